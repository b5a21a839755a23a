"""An example HiCache implementation package plugged into tiercheck (see driver.py)."""

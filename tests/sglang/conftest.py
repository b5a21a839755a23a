"""The SGLang lane tests. Run them with a lane's interpreter:

    $(tiercheck lane setup sglang==0.5.23) -m pytest tests/sglang -m sglang -p no:cacheprovider

Tests marked ``sglang`` (deselected by the default test command) skip when no supported
SGLang release is importable; test_lane_logic.py (pure lane/shim logic) runs by default.
"""

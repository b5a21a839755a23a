"""The SGLang lane tests. Run them with the lane's interpreter:

    <lane>/bin/python -m pytest tests/sglang -m sglang -p no:cacheprovider

Every test here is marked ``sglang`` (deselected by the default test command); the ones
that drive SGLang skip when SGLang 0.5.23 is not importable (no lane, or another Python).
"""

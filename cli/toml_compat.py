"""tomllib (Python >= 3.11) or its backport tomli (declared for older Pythons in pyproject)."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["tomllib"]

"""tiercheck: specify, model-check, prove and conformance-test tiered KV-cache reclaim.

This folder (cli/) is installed as the top package tiercheck; the folders spec/, models/,
proofs/, impl/, conformance/ and tla/ are installed as tiercheck.spec, tiercheck.models, ...
(see pyproject.toml).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tiercheck")
except PackageNotFoundError:  # pragma: no cover -- imported from a checkout without installing
    __version__ = "unknown"

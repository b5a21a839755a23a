"""tiercheck: specify, model-check, prove and conformance-test tiered KV-cache reclaim.

The folders spec/, models/, proofs/, impl/ and conformance/ sit at the top of the
repository and are installed as tiercheck.spec, tiercheck.models, ... (see pyproject.toml).
"""

__version__ = "0.1.0"

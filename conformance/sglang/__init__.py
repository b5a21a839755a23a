"""The conformance adapter for upstream SGLang HiCache, across releases.

| module | job |
|---|---|
| ``versions`` | release parsing and which shim drives which release (pure, no sglang) |
| ``lane`` | isolated per-release environments (``tiercheck lane``): paths, setup, listing |
| ``driver`` | ``SGLangDriver`` (the Driver protocol): 1 rank in-process or R gloo processes |
| ``core`` | one TP rank: the spec's actions through SGLang's methods, snapshot, verify |
| ``shims`` | the per-release API differences the core goes through |
| ``controls`` | deterministic control points (held acks, gated storage, victim order) |
| ``patches`` | CPU runtime patches (device primitives only) |
| ``paths`` | upstream path coverage counters |
| ``campaign`` / ``history`` | the campaign on one release, and over every release |

sglang itself is imported lazily (only inside a lane).
"""

from .driver import SGLangDriver

__all__ = ["SGLangDriver"]

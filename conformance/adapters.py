"""Implementations conformance can drive, by name."""

from __future__ import annotations

from tiercheck.errors import UserError

from .driver import SpecDriver

IMPLEMENTATIONS = {
    "spec": "the specification itself (with --variant: a mutant of it)",
    "reference": "tiercheck.impl, the torch-backed reference HiCache",
    "sglang": "upstream SGLang 0.5.23 HiCache (needs the lane: scripts/setup_sglang_lane.sh)",
}
BACKENDS = ("lockstep", "gloo")


def driver_factory(impl: str, cfg, variants=frozenset(), backend: str = "lockstep", timeouts=None):
    """A zero-argument callable building a fresh driver (one per Hypothesis example).
    ``timeouts``: {"timeout": collective seconds, "driver_timeout": seconds} for the
    reference implementation (tiercheck.conformance.fault_flags)."""
    if backend not in BACKENDS:
        raise UserError(f"--backend: unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if impl == "spec":
        return lambda: SpecDriver(cfg, variants)
    if impl == "reference":
        from .reference import ReferenceDriver

        return lambda: ReferenceDriver(cfg, variants=variants, backend=backend, **(timeouts or {}))
    if impl == "sglang":
        from .sglang import SGLangDriver

        return lambda: SGLangDriver(cfg, backend=backend)
    raise UserError(f"--impl: unknown implementation {impl!r} (known: {', '.join(IMPLEMENTATIONS)})")

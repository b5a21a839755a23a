"""Implementations conformance can drive, by name."""

from __future__ import annotations

from tiercheck.errors import UserError

from .driver import SpecDriver

IMPLEMENTATIONS = {
    "spec": "the specification itself (with --variant: a mutant of it)",
    "reference": "tiercheck.impl, the torch-backed reference HiCache",
    "sglang": "upstream SGLang HiCache, the release of the running lane (tiercheck lane setup sglang==X.Y.Z)",
}
BACKENDS = ("lockstep", "gloo")


def driver_factory(impl: str, cfg, variants=frozenset(), backend: str = "lockstep"):
    """A zero-argument callable building a fresh driver (one per Hypothesis example)."""
    if backend not in BACKENDS:
        raise UserError(f"--backend: unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if impl == "spec":
        return lambda: SpecDriver(cfg, variants)
    if impl == "reference":
        from .reference import ReferenceDriver

        return lambda: ReferenceDriver(cfg, variants=variants, backend=backend)
    if impl == "sglang":
        from .sglang import SGLangDriver

        return lambda: SGLangDriver(cfg, backend=backend)
    raise UserError(f"--impl: unknown implementation {impl!r} (known: {', '.join(IMPLEMENTATIONS)})")

"""The adapter tiercheck drives: a driver for "your" HiCache, here tiercheck's reference one.

A real plugin builds its own cache from ``cfg`` (the model's constants) and maps each spec
action onto it; this one wraps the reference implementation's adapter so that the example
stays small, and adds what a wrapper typically adds: a count of the actions it performed
and a check that it is not used after close().

Registered in pyproject.toml as ``wrapped``; either form drives it:

    tiercheck conform --impl wrapped
    tiercheck conform --impl wrapped_hicache.driver:make_driver
"""

from __future__ import annotations

from typing import List

from tiercheck.conformance.driver import Driver
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.spec.action import Action
from tiercheck.spec.state import State


class WrappedHiCache:
    """The Driver protocol (tiercheck.conformance.driver.Driver) around one HiCache group."""

    def __init__(self, inner: Driver):
        self.inner = inner
        self.model = inner.model  # the spec instance built with the same constants
        self.actions = 0
        self.closed = False

    def apply(self, action: Action) -> None:
        assert not self.closed, "driver used after close()"
        self.actions += 1
        self.inner.apply(action)

    def state(self) -> State:
        return self.inner.state()

    def verify(self) -> List[str]:
        return self.inner.verify()

    def close(self) -> None:
        self.closed = True
        self.inner.close()


def make_driver(cfg, variants=frozenset(), backend="lockstep", **options) -> WrappedHiCache:
    """the reference HiCache behind a wrapper (example plugin, examples/wrapped-hicache)"""
    return WrappedHiCache(ReferenceDriver(cfg, variants=variants, backend=backend, **options))

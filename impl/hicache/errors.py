"""Errors the HiCache implementation raises for protocol-level failures (not user input)."""

from __future__ import annotations


class HiCacheError(RuntimeError):
    """Base class: the cache detected a state it must not continue from."""


class ReplicaDivergenceError(HiCacheError):
    """A sync round found the TP ranks' replicas diverged (the reclaim digest differs)."""


class DeviceFullError(HiCacheError):
    """A request needs more device pages than are free even after eviction."""


class ProtocolError(HiCacheError):
    """An internal invariant broke (e.g. an agreed allocation failed on this rank)."""


class RemoteRankError(HiCacheError):
    """A gloo rank process died or did not answer a command."""

"""The L3 storage backend interface and the small helpers every backend shares.

A backend stores opaque pages (contiguous CPU tensors of any dtype) under string keys.
All calls are batched and answer one code per key (see ``codes``); a partial failure inside
a batch is normal and is never an exception. Exceptions are reserved for misuse (bad
arguments) and for a backend that cannot be opened at all.
"""

from __future__ import annotations

import abc
import collections
import threading
from typing import Sequence

import torch

from . import codes
from .codes import completed_prefix  # re-exported: part of the interface

__all__ = ["StorageBackend", "Counters", "completed_prefix", "rank_key", "byte_view",
           "check_pages"]


class Counters:
    """Thread-safe named counters (failures by code name, corrupt files, injections...)."""

    def __init__(self) -> None:
        self._c: collections.Counter = collections.Counter()
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._c[name] += n

    def add_codes(self, prefix: str, results: Sequence[int]) -> None:
        """Count every failing code in ``results`` as ``<prefix>.<CODE_NAME>``."""
        with self._lock:
            for r in results:
                if r < 0:
                    self._c[f"{prefix}.{codes.name(r)}"] += 1

    def __getitem__(self, name: str) -> int:
        with self._lock:
            return self._c[name]

    def total(self, prefix: str = "") -> int:
        with self._lock:
            return sum(v for k, v in self._c.items() if k.startswith(prefix))

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._c)

    def __repr__(self) -> str:
        return f"Counters({self.snapshot()})"


def rank_key(page_hash: str, tp_rank: int) -> str:
    """Storage key of one TP rank's shard of a page: each rank writes its own object."""
    return f"{page_hash}.r{tp_rank}"


def byte_view(t: torch.Tensor) -> torch.Tensor:
    """A flat uint8 view sharing ``t``'s memory (``t`` must be contiguous)."""
    return t.reshape(-1).view(torch.uint8)


def check_pages(keys: Sequence[str], tensors: Sequence[torch.Tensor], what: str) -> None:
    """Reject misuse with a one-line error: the batch must pair keys with CPU pages."""
    if len(keys) != len(tensors):
        raise ValueError(f"{what}: {len(keys)} keys but {len(tensors)} tensors")
    for i, (k, t) in enumerate(zip(keys, tensors)):
        if not isinstance(k, str) or not k:
            raise ValueError(f"{what}: key #{i} must be a non-empty str, got {k!r}")
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{what}: value #{i} for key {k!r} is {type(t).__name__}, not a tensor")
        if t.device.type != "cpu" or not t.is_contiguous():
            raise ValueError(f"{what}: tensor for key {k!r} must be a contiguous CPU tensor "
                             f"(device={t.device}, contiguous={t.is_contiguous()})")


def check_keys(keys: Sequence[str], what: str) -> None:
    for i, k in enumerate(keys):
        if not isinstance(k, str) or not k:
            raise ValueError(f"{what}: key #{i} must be a non-empty str, got {k!r}")


class StorageBackend(abc.ABC):
    """A batched key -> page store (the L3 tier).

    ``batch_put``  -> per key 0 (stored, or already present: never overwritten) or negative.
    ``batch_get``  -> per key the bytes read into ``outs[i]`` or negative; an output tensor is
                      written only when its page is read back completely and verified.
    ``batch_exists`` -> per key 1 present, 0 absent, -1 unknown (error).
    ``delete``     -> per key 0 removed or negative (-704 when absent).
    An acked page may later vanish (store eviction, restart): callers must handle misses.
    """

    name = "abstract"

    def __init__(self) -> None:
        self.stats = Counters()

    @abc.abstractmethod
    def batch_put(self, keys: Sequence[str], values: Sequence[torch.Tensor]) -> list[int]: ...

    @abc.abstractmethod
    def batch_get(self, keys: Sequence[str], outs: Sequence[torch.Tensor]) -> list[int]: ...

    @abc.abstractmethod
    def batch_exists(self, keys: Sequence[str]) -> list[int]: ...

    @abc.abstractmethod
    def delete(self, keys: Sequence[str]) -> list[int]: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

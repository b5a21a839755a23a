"""A storage backend whose server this process started and can see die (the Mooncake
master of a benchmark arm).

Once ``alive()`` says the server is gone, every call answers at once (RPC_FAIL; a lookup
EXISTS_ERROR) instead of spending seconds per call on a dead connection, and ``outages``
records it: the benchmark fails the arm with that line and its counters instead of
logging RPC failures for minutes.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from . import codes
from .base import StorageBackend


class StoreGuard(StorageBackend):
    def __init__(self, inner: StorageBackend, alive: Callable[[], bool], what: str) -> None:
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.alive = alive
        self.what = what
        self.outages: list[str] = []

    def _down(self, op: str, n: int, code: int = codes.RPC_FAIL) -> list[int] | None:
        if not n or self.alive():
            return None
        if not self.outages:
            self.outages.append(f"{self.what} stopped answering (found dead at a {op}); "
                                "later calls failed at once")
        self.stats.add(f"skipped.{op}", n)
        return [code] * n

    def batch_put(self, keys: Sequence[str], values: Sequence[torch.Tensor]) -> list[int]:
        down = self._down("put", len(keys))
        return down if down is not None else self.inner.batch_put(keys, values)

    def batch_get(self, keys: Sequence[str], outs: Sequence[torch.Tensor]) -> list[int]:
        down = self._down("get", len(keys))
        return down if down is not None else self.inner.batch_get(keys, outs)

    def batch_exists(self, keys: Sequence[str]) -> list[int]:
        down = self._down("exists", len(keys), codes.EXISTS_ERROR)
        return down if down is not None else self.inner.batch_exists(keys)

    def delete(self, keys: Sequence[str]) -> list[int]:
        down = self._down("delete", len(keys))
        return down if down is not None else self.inner.delete(keys)

    def close(self) -> None:
        self.inner.close()


class GuardedStorage:
    """A storage factory (see tiercheck.impl.hicache.storage_setup) whose backends are
    StoreGuards around ``factory``'s."""

    def __init__(self, factory, alive: Callable[[], bool], what: str) -> None:
        self.factory, self.alive, self.what = factory, alive, what

    def make(self, rank: int) -> StoreGuard:
        return StoreGuard(self.factory.make(rank), self.alive, self.what)

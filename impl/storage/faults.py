"""Fault injection on top of a real backend.

``FaultyBackend`` forwards every call to a real store and can, on demand:
- fail the keys of a batch from position k on with a given code (partial batch failure);
  the keys before k really reach the store, the failed ones never do;
- fail every key of every call for a number of seconds or calls (outage);
- evict a key from the real store right after its put was acked (store eviction: the ack
  stands, the object is gone);
- run a callback before the n-th call of an op reaches the store (e.g. SIGKILL the master
  between two chunks of one backup).
Every injected failure is counted as ``injected.<op>.<CODE>``, every failure the real store
answered as ``observed.<op>.<CODE>``, every eviction as ``evicted_after_ack``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import torch

from . import codes
from .base import StorageBackend, check_pages

OPS = ("put", "get", "exists", "delete")


@dataclass
class _PartialRule:
    op: str
    position: int
    code: int
    remaining: int | None  # batches left to hit; None = forever


@dataclass
class _Outage:
    code: int
    ops: tuple[str, ...]
    until: float | None  # monotonic deadline
    calls_left: int | None


def _check_op(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"unknown storage op {op!r}; expected one of {', '.join(OPS)}")


class FaultyBackend(StorageBackend):
    def __init__(self, inner: StorageBackend) -> None:
        super().__init__()
        self.inner = inner
        self.name = f"faulty({inner.name})"
        self._lock = threading.Lock()
        self._partial: list[_PartialRule] = []
        self._outage: _Outage | None = None
        self._evict_keys: set[str] | None = None
        self._evict_all = False
        self._evict_left: int | None = None
        self._hooks: dict[tuple[str, int], Callable[[], None]] = {}
        self._calls = {op: 0 for op in OPS}

    # -- arming --------------------------------------------------------------------------

    def fail_from(self, position: int, code: int, op: str = "put", times: int | None = 1) -> None:
        """The next ``times`` ``op`` batches fail every key at index >= ``position``."""
        _check_op(op)
        if position < 0 or (code >= 0 and op != "exists"):
            raise ValueError(f"fail_from needs position >= 0 and a negative code, got {position}, {code}")
        with self._lock:
            self._partial.append(_PartialRule(op, position, code, times))

    def fail_all(self, code: int, ops: Iterable[str] = OPS, seconds: float | None = None,
                 calls: int | None = None) -> None:
        """Every key of every call to ``ops`` fails with ``code`` (exists: -1) until
        ``seconds`` pass or ``calls`` calls were failed (both None: until ``clear()``)."""
        ops = tuple(ops)
        for op in ops:
            _check_op(op)
        if code >= 0:
            raise ValueError(f"fail_all needs a negative code, got {code}")
        until = None if seconds is None else time.monotonic() + seconds
        with self._lock:
            self._outage = _Outage(code, ops, until, calls)

    def evict_after_ack(self, keys: Iterable[str] | None = None, count: int | None = None) -> None:
        """Delete acked keys from the real store right after the put returns. ``keys``:
        only these (None: any key); ``count``: at most this many evictions."""
        with self._lock:
            self._evict_keys = None if keys is None else set(keys)
            self._evict_all = keys is None
            self._evict_left = count

    def on_call(self, op: str, call_no: int, fn: Callable[[], None]) -> None:
        """Run ``fn()`` before the ``call_no``-th (1-based, counted from creation) ``op`` call."""
        _check_op(op)
        with self._lock:
            self._hooks[(op, call_no)] = fn

    def clear(self) -> None:
        with self._lock:
            self._partial.clear()
            self._outage = None
            self._evict_keys, self._evict_all, self._evict_left = None, False, None
            self._hooks.clear()

    def calls(self, op: str) -> int:
        return self._calls[op]

    def evict(self, keys: Sequence[str]) -> list[int]:
        """Evict now, as the store would (lease expiry / restart): counted."""
        res = self.inner.delete(keys)
        self.stats.add("evicted", sum(1 for r in res if r == codes.OK))
        return res

    # -- the injection core ----------------------------------------------------------------

    def _plan(self, op: str, n: int) -> tuple[int, int]:
        """(how many leading keys reach the real store, code for the rest)."""
        with self._lock:
            self._calls[op] += 1
            hook = self._hooks.pop((op, self._calls[op]), None)
        if hook is not None:
            hook()  # outside the lock: it may block (e.g. kill a process)
        with self._lock:
            o = self._outage
            if o is not None and o.until is not None and time.monotonic() >= o.until:
                o = self._outage = None
            if o is not None and op in o.ops:
                if o.calls_left is not None:
                    o.calls_left -= 1
                    if o.calls_left <= 0:
                        self._outage = None
                return 0, o.code
            for rule in self._partial:
                if rule.op == op:
                    if rule.remaining is not None:
                        rule.remaining -= 1
                        if rule.remaining <= 0:
                            self._partial.remove(rule)
                    return min(rule.position, n), rule.code
        return n, codes.OK

    def _run(self, op: str, n: int, call: Callable[[int], list[int]]) -> list[int]:
        keep, code = self._plan(op, n)
        real = call(keep) if keep else []
        if op == "exists":
            errors = sum(1 for r in real if r < 0)
            if errors:
                self.stats.add("observed.exists.ERROR", errors)
            code = codes.EXISTS_ERROR  # exists answers 1/0/-1: an injected failure is -1
            label = "ERROR"
        else:
            self.stats.add_codes(f"observed.{op}", real)
            label = codes.name(code)
        if n - keep:
            self.stats.add(f"injected.{op}.{label}", n - keep)
        return list(real) + [code] * (n - keep)

    # -- interface -----------------------------------------------------------------------

    def batch_put(self, keys: Sequence[str], values: Sequence[torch.Tensor]) -> list[int]:
        check_pages(keys, values, f"{self.name} batch_put")
        keys = list(keys)
        res = self._run("put", len(keys), lambda k: self.inner.batch_put(keys[:k], values[:k]))
        self._evict_acked(keys, res)
        return res

    def _evict_acked(self, keys: list[str], res: list[int]) -> None:
        with self._lock:
            if not (self._evict_all or self._evict_keys):
                return
            victims = []
            for k, r in zip(keys, res):
                if r != codes.OK or self._evict_left == 0:
                    continue
                if self._evict_all or k in self._evict_keys:
                    victims.append(k)
                    if self._evict_left is not None:
                        self._evict_left -= 1
        if victims:
            done = self.inner.delete(victims)
            self.stats.add("evicted_after_ack", sum(1 for r in done if r == codes.OK))

    def batch_get(self, keys: Sequence[str], outs: Sequence[torch.Tensor]) -> list[int]:
        check_pages(keys, outs, f"{self.name} batch_get")
        keys = list(keys)
        return self._run("get", len(keys), lambda k: self.inner.batch_get(keys[:k], outs[:k]))

    def batch_exists(self, keys: Sequence[str]) -> list[int]:
        keys = list(keys)
        return self._run("exists", len(keys), lambda k: self.inner.batch_exists(keys[:k]))

    def delete(self, keys: Sequence[str]) -> list[int]:
        keys = list(keys)
        return self._run("delete", len(keys), lambda k: self.inner.delete(keys[:k]))

    def close(self) -> None:
        self.inner.close()

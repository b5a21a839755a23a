"""The one collective interface through which every cross-rank agreement goes.

    group.rank, group.world_size
    group.all_reduce(values: list[int], op: "min" | "max", tag: str) -> list[int]
    group.min_max(values, tag) -> (mins, maxs)        # one MIN all-reduce of negated pairs
    group.barrier(tag)

Implementations: LockstepGroup (R ranks as threads of one process, impl/lockstep.py) and
TorchDistGroup (torch.distributed, impl/torchdist.py). Both share the framing below, so they
return identical results for identical inputs.

Every call is ONE elementwise MIN reduction of int64 frames. The first frame starts with the
sync point's id as an [id, -id] pair: after the MIN it holds [min id, -max id], so the ranks
agree on the sync point iff frame[0] == -frame[1]. The id hashes (tag, op, number of values),
so a length mismatch is caught before any frame of a different size could be exchanged.
"max" travels as a MIN of bitwise complements (~x = -x - 1 reverses order with no overflow).
A rank that does not arrive raises RankMissingError naming the sync point and the missing ranks.
"""

from __future__ import annotations

import hashlib
import operator
from abc import ABC, abstractmethod

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
FRAME = 32  # ints per reduction frame (first frame: 2 header + 30 values)
OPS = ("min", "max")


class CollectiveError(RuntimeError):
    """A collective could not complete correctly; the group is unusable afterwards."""


class SyncMismatchError(CollectiveError):
    """Ranks reached different sync points (tag, op or number of values) at the same call."""


class RankMissingError(CollectiveError):
    """Some ranks did not arrive at a sync point (finished, failed, or too slow)."""


class CollectiveTimeoutError(RankMissingError):
    """Some ranks did not arrive at a sync point within the timeout."""


class Int64RangeError(ValueError):
    """A value cannot travel as int64 (or cannot be negated in int64)."""


def as_int64_list(values, what: str = "value") -> list[int]:
    out = []
    for i, v in enumerate(values):
        try:
            v = operator.index(v)
        except TypeError:
            raise Int64RangeError(f"{what}[{i}] = {v!r} is not an integer") from None
        if not INT64_MIN <= v <= INT64_MAX:
            raise Int64RangeError(f"{what}[{i}] = {v} does not fit in int64")
        out.append(v)
    return out


def negated_pairs(values, what: str = "value") -> list[int]:
    """[v0, -v0, v1, -v1, ...]. After a MIN all-reduce, split_negated() yields min and max of
    every field. INT64_MIN is refused: its negation overflows int64 and would wrap to itself,
    silently turning the max into garbage."""
    out = []
    for i, v in enumerate(as_int64_list(values, what)):
        if v == INT64_MIN:
            raise Int64RangeError(
                f"{what}[{i}] = INT64_MIN cannot be negated in int64 (negated-pair overflow)"
            )
        out += [v, -v]
    return out


def split_negated(reduced: list[int]) -> tuple[list[int], list[int]]:
    """Inverse of negated_pairs after a MIN reduction: (mins, maxs)."""
    if len(reduced) % 2:
        raise ValueError(f"negated pairs need an even length, got {len(reduced)}")
    return list(reduced[0::2]), [-x for x in reduced[1::2]]


def sync_point_id(tag: str, op: str, n: int) -> int:
    """A positive 62-bit id of (tag, op, number of values); [id, -id] never overflows."""
    h = hashlib.blake2b(f"{tag}\0{op}\0{n}".encode(), digest_size=8, person=b"tc-sync").digest()
    return (int.from_bytes(h, "little") >> 2) or 1


def describe(tag: str, op: str, n: int) -> str:
    return f"'{tag}' ({op} of {n} value{'s' if n != 1 else ''})"


class Collective(ABC):
    """Base of both implementations: validation, framing, sync-point check, broken state."""

    rank: int
    world_size: int
    timeout: float

    def __init__(self) -> None:
        self.calls = 0  # collectives entered by this rank; the k-th calls of all ranks pair up
        self._broken: CollectiveError | None = None

    def all_reduce(self, values, op: str, tag: str) -> list[int]:
        """Elementwise MIN or MAX of ``values`` over all ranks (int64); the same list on every rank."""
        if op not in OPS:
            raise ValueError(f"all_reduce op must be one of {OPS}, got {op!r}")
        if not isinstance(tag, str) or not tag:
            raise ValueError(f"all_reduce tag must be a non-empty string, got {tag!r}")
        values = as_int64_list(values, f"all_reduce '{tag}' value")
        if self._broken is not None:
            raise type(self._broken)(f"rank {self.rank}: collective group is broken: {self._broken}")
        n = len(values)
        call, self.calls = self.calls, self.calls + 1
        desc = describe(tag, op, n)
        sid = sync_point_id(tag, op, n)
        payload = values if op == "min" else [~v for v in values]
        frames = [[sid, -sid] + payload[: FRAME - 2]]
        frames += [payload[i : i + FRAME] for i in range(FRAME - 2, n, FRAME)]
        frames = [f + [0] * (FRAME - len(f)) for f in frames]
        try:
            self._arrive(call, desc)
            first = self._min_reduce(frames[0], call, 0, desc)
            if first[0] != -first[1]:
                peers = self._peer_sync_points(call)
                where = ", ".join(f"rank {r} at {d}" for r, d in sorted(peers.items()))
                raise SyncMismatchError(
                    f"rank {self.rank}: ranks reached different sync points at collective call "
                    f"#{call}: {where}"
                )
            reduced = first[2:]
            for k, frame in enumerate(frames[1:], start=1):
                reduced += self._min_reduce(frame, call, k, desc)
        except CollectiveError as exc:
            self._broken = exc
            raise
        reduced = reduced[:n]
        return reduced if op == "min" else [~v for v in reduced]

    def min_max(self, values, tag: str) -> tuple[list[int], list[int]]:
        """Min and max of every field in one MIN all-reduce of negated pairs."""
        pairs = negated_pairs(values, f"min_max '{tag}' value")
        return split_negated(self.all_reduce(pairs, "min", tag))

    def barrier(self, tag: str) -> None:
        self.all_reduce([], "min", tag)

    # -- implementation hooks ----------------------------------------------------------------
    def _arrive(self, call: int, desc: str) -> None:
        """Record that this rank entered collective ``call`` at sync point ``desc``."""

    @abstractmethod
    def _min_reduce(self, frame: list[int], call: int, index: int, desc: str) -> list[int]:
        """Elementwise MIN of equal-length frames over all ranks; raise RankMissingError (naming
        ``desc`` and the missing ranks) rather than wait longer than self.timeout."""

    @abstractmethod
    def _peer_sync_points(self, call: int) -> dict[int, str]:
        """rank -> description of the sync point it is at for collective ``call``."""

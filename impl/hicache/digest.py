"""Rolling digests and the negated-pair agreement check, in a fixed integer width.

Ranks compare a field x with one MIN all-reduce of [x, -x]: min(-x) = -max(x), so they
agree iff min == -min(-x). In w-bit two's complement -x of the most negative value wraps
to itself and the check can pass on different values. The fixed encoding keeps digests in
[0, 2^(w-1) - 1); the ``negated-pair-overflow`` variant lets them range over the full
signed width.
"""

from __future__ import annotations

import hashlib

_MUL = 1000003


def wrap(x: int, bits: int) -> int:
    """Two's-complement wrap of x to a signed ``bits``-wide integer."""
    m = 1 << bits
    x &= m - 1
    return x - m if x >= m >> 1 else x


def node_key(end_hash: str) -> int:
    """A 60-bit integer naming a node (by its end page hash), identical on every rank."""
    return int(hashlib.blake2b(end_hash.encode(), digest_size=8).hexdigest(), 16) >> 4


def fold(digest: int, key: int, bits: int, overflow: bool) -> int:
    raw = digest * _MUL + key + 1
    if overflow:
        return wrap(raw, bits)
    return raw % ((1 << (bits - 1)) - 1)


def digest_of(keys, bits: int, overflow: bool) -> int:
    d = 0
    for k in keys:
        d = fold(d, k, bits, overflow)
    return d


def pair(x: int, bits: int) -> list[int]:
    """[x, -x] as the wire carries them (negation wraps in ``bits``)."""
    return [wrap(x, bits), wrap(-x, bits)]


def pair_agrees(lo: int, neg_lo: int, bits: int) -> bool:
    """What a rank concludes from the MIN-reduced pair: min == max."""
    return wrap(lo, bits) == wrap(-neg_lo, bits)

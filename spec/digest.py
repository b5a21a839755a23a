"""Fixed-width digests and the negated-pair agreement check.

Ranks compare a field ``x`` with one MIN all-reduce of ``[x, -x]``: the minimum of ``-x`` is
minus the maximum of ``x``, so all ranks agree iff ``min == max``. In w-bit two's
complement, ``-x`` of the most negative value wraps to itself, and then two different
digests can pass the check. The fixed protocol keeps digests in [0, 2^(w-1) - 1]; the
``negated-pair-overflow`` variant lets them range over the full signed width.
"""

from __future__ import annotations


def wrap(x: int, bits: int) -> int:
    """Two's-complement wrap of ``x`` to a signed ``bits``-wide integer."""
    m = 1 << bits
    x &= m - 1
    return x - m if x >= m >> 1 else x


def mix(cfg, digest: int, node: int) -> int:
    """Fold one victim (a node end page) into a rolling digest, as the wire carries it.

    Fixed encoding: a non-negative value below 2^(w-1) - 1, whose negation never wraps.
    negated-pair-overflow: the full signed w-bit range, most negative value included.
    """
    raw = digest * 1000003 + node + 1
    if cfg.has("negated-pair-overflow"):
        return wrap(raw, cfg.digest_bits)
    return raw % ((1 << (cfg.digest_bits - 1)) - 1)


def wire_digest(cfg, victims) -> int:
    d = 0
    for e in victims:
        d = mix(cfg, d, e)
    return d


plan_digest = wire_digest


def digests_agree(cfg, sequences) -> bool:
    """The outcome of the [digest, -digest] MIN check over each rank's victims.

    The spec keeps each rank's victims since the last round exactly, and treats the
    fixed encoding as an ideal hash: it agrees iff the sequences are equal (real digests
    are 42-bit or wider; collisions are negligible and not what the check is about).
    Under negated-pair-overflow it computes what the w-bit wire values really give.
    """
    if cfg.has("negated-pair-overflow"):
        return negated_pairs_agree([wire_digest(cfg, v) for v in sequences], cfg.digest_bits)
    return all(v == sequences[0] for v in sequences)


def negated_pairs_agree(values, bits: int) -> bool:
    """What every rank concludes from MIN over [x, -x] in ``bits``-wide arithmetic."""
    lo = min(wrap(v, bits) for v in values)
    neg_lo = min(wrap(-v, bits) for v in values)
    return lo == wrap(-neg_lo, bits)

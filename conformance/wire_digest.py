"""The reclaim digest a rank puts on the wire, against the spec's encoding.

Ranks compare their duplicate-reclaim digests with one MIN all-reduce of ``[x, -x]``
(tiercheck.spec.digest). The check is sound only if ``-x`` does not wrap: the fixed
encoding keeps ``x`` in [0, 2^(w-1) - 1] of the w-bit wire; the ``negated-pair-overflow``
variant lets it range over the full signed width of the model's ``digest_bits``. Which
victim lists collide is the implementation's business (the spec treats the fixed encoding
as an ideal hash); the range and the pair's form are the protocol's, and are checked here
on every snapshot that reports a pair (``digest_pair``, ``digest_bits``).
"""

from __future__ import annotations

from tiercheck.spec.digest import wrap

OVERFLOW = "negated-pair-overflow"
WIRE_BITS = 64  # the all-reduce carries int64


def problems(model, snaps) -> list:
    out = []
    for r, snap in enumerate(snaps):
        pair = snap.get("digest_pair")
        if not pair:
            continue
        out += [f"rank {r}: reclaim digest pair {list(pair)!r}: {p}" for p in pair_problems(model.cfg, pair, snap.get("digest_bits"))]
    return out


def pair_problems(cfg, pair, bits) -> list:
    if type(bits) is not int or not 2 <= bits <= WIRE_BITS:
        return [f"digest_bits {bits!r} is not a wire width in 2..{WIRE_BITS}"]
    overflow = cfg.has(OVERFLOW)
    if overflow and bits != cfg.digest_bits:
        return [f"{bits}-bit wire, the model's {OVERFLOW} digests are {cfg.digest_bits}-bit"]
    if len(pair) != 2 or any(type(v) is not int for v in pair):
        return ["not two integers [x, -x]"]
    x, neg = pair
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    outside = [v for v in pair if not lo <= v <= hi]
    if outside:
        return [f"{' and '.join(map(str, outside))} outside the {bits}-bit wire's [{lo}, {hi}]"]
    out = []
    if neg != wrap(-x, bits):
        out.append(f"the second value is not -x in {bits} bits ({wrap(-x, bits)})")
    if not overflow and not 0 <= x <= hi:
        out.append(f"the fixed encoding keeps digests in [0, {hi}] so that -x cannot wrap")
    return out

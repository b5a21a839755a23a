"""Consensus over fixed-width machine integers (z3 bit-vectors), for any number of ranks.

The mirror-release round (seed 000) and the duplicate-reclaim digest check (seed 001)
compare per-rank values with ONE elementwise MIN all-reduce of negated pairs [x, -x]:
MIN(x) is the minimum and -MIN(-x) the maximum, so all ranks agree iff min == -MIN(-x).
In w-bit two's complement -x wraps for x = INT_MIN, and then the check can pass for
values that differ. The theorems below are stated for every number of ranks (ranks are
an uninterpreted sort, quantified as in proofs.ranks) and for w = 64 unless noted.

Each theorem is a named query: "proved" means the negation is unsatisfiable;
``overflow_witness`` is the one query expected to be *satisfiable*: z3 exhibits the
negated-pair-overflow variant with concrete values.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, List, NamedTuple, Optional

import z3

from .ranks import RankSort, SymbolicRanks, Template
from .resolution import LEMMAS
from .sym import and_, implies, not_, or_

W = 64


class Theorem(NamedTuple):
    name: str
    claim: str
    expect: str  # "unsat" (a proof) or "sat" (a witness the check must produce)
    build: Callable  # () -> (solver assertions, describe(model) -> str)


def _int_min(w):
    return z3.BitVecVal(1 << (w - 1), w)


def _range(x, lo: int, hi_excl: int, w: int):
    """lo <= x < hi_excl, as signed w-bit values (bounds given as Python ints)."""
    return and_(z3.BitVecVal(lo, w) <= x, x < z3.BitVecVal(hi_excl, w)) if hi_excl < (1 << (w - 1)) else \
        z3.BitVecVal(lo, w) <= x


def _setup(w: int):
    space = SymbolicRanks()
    x = z3.Function(f"x!{space.tag}", RankSort, z3.BitVecSort(w))
    return space, x


def _finish(space, extra):
    return list(space.side) + space.ground() + list(extra)


def minmax_theorem(lo: int, hi_excl: int, w: int = W):
    """Values in [lo, hi_excl): MIN(x) is the minimum and -MIN(-x) the maximum."""

    def build():
        space, x = _setup(w)
        space.forall(lambda h: _range(x(h), lo, hi_excl, w))
        mn = space.min(lambda h: x(h))
        nmn = space.min(lambda h: -x(h))
        mx = -nmn
        is_max = and_(space.all(lambda h: x(h) <= mx), space.any(lambda h: x(h) == mx))
        is_min = and_(space.all(lambda h: mn <= x(h)), space.any(lambda h: x(h) == mn))
        goal = not_(and_(is_min, is_max))
        return _finish(space, [goal]), None

    return build


def agreement_theorem(lo: int, hi_excl: int, w: int = W):
    """Values in [lo, hi_excl): the check MIN(x) == -MIN(-x) passes iff all are equal."""

    def build():
        space, x = _setup(w)
        space.forall(lambda h: _range(x(h), lo, hi_excl, w))
        mn = space.min(lambda h: x(h))
        nmn = space.min(lambda h: -x(h))
        passes = mn == -nmn
        same = space.all(lambda h: x(h) == x(space.r0))
        return _finish(space, [passes != same]), None

    return build


def overflow_witness(w: int = W):
    """Over the full signed range (INT_MIN allowed) the check passes for differing values."""

    def build():
        space, x = _setup(w)
        mn = space.min(lambda h: x(h))
        nmn = space.min(lambda h: -x(h))
        passes = mn == -nmn
        a, b = space.fresh("a"), space.fresh("b")
        space.forall(lambda h: or_(h == a, h == b))  # two ranks suffice to show it
        goal = and_(passes, x(a) != x(b))

        def describe(model):
            vals = sorted({model.eval(x(c), model_completion=True).as_signed_long() for c in space.consts})
            return (f"ranks hold {vals}; MIN(x) = {model.eval(mn).as_signed_long()}, "
                    f"MIN(-x) = {model.eval(nmn).as_signed_long()}, so min == -MIN(-x) passes "
                    f"although the values differ (-INT64_MIN wraps to INT64_MIN)")

        return _finish(space, [goal]), describe

    return build


def sentinel_theorem(w: int = W):
    """Single-writer ack slots: followers send INT64_MAX (the SKIP sentinel on the wire),
    the writer its completed count c in [0, INT64_MAX): MIN yields c on every rank; and the
    sentinel itself negates without overflow (so it may ride a negated pair too)."""

    def build():
        space, x = _setup(w)
        writer = space.r0
        imax = z3.BitVecVal((1 << (w - 1)) - 1, w)
        space.forall(lambda h: or_(h == writer, x(h) == imax))
        c = x(writer)
        ok_c = and_(z3.BitVecVal(0, w) <= c, c < imax)
        mn = space.min(lambda h: x(h))
        goal = and_(ok_c, mn != c)
        return _finish(space, [goal]), None

    return build


def complement_max_theorem(w: int = W):
    """impl/collective.py sends MAX as MIN of bitwise complements: ~x = -x - 1 reverses the
    signed order over the FULL range (no overflow), so ~MIN(~x) is the maximum."""

    def build():
        space, x = _setup(w)
        m = space.min(lambda h: ~x(h))
        mx = ~m
        is_max = and_(space.all(lambda h: x(h) <= mx), space.any(lambda h: x(h) == mx))
        return _finish(space, [not_(is_max)]), None

    return build


def sync_id_theorem(w: int = W):
    """The sync-point id [id, -id] (a positive 62-bit id) never overflows: after the MIN,
    frame[0] == -frame[1] iff every rank is at the same sync point."""
    return agreement_theorem(1, 1 << 62, w)


def plan_digest_injective(k: int, bits: int = 16):
    """Two ascending lists of node ends below k with the same wire digest (spec/digest.py
    mix, fixed encoding, ``bits`` wide), whatever their lengths, are the same list: the
    lemma that lets the drain obligations compare committable entries instead of
    digests."""

    def build():
        from .config import ProofConfig
        from .encode.sync import wire_digest
        from .sym import SymList

        cfg = ProofConfig.symbolic_config(digest_bits=bits)
        lists, facts = [], []
        for tag in "ab":
            n = z3.Int(f"n_{tag}")
            items = [(z3.Int(f"{tag}{i}"),) for i in range(k)]
            lst = SymList(k, n, items)
            facts += [n >= 0, n <= k] + [z3.Implies(i < n, z3.And(items[i][0] >= 0, items[i][0] < k)) for i in range(k)]
            facts += [z3.Implies(i + 1 < n, items[i][0] < items[i + 1][0]) for i in range(k - 1)]
            lists.append(lst)
        a, b = lists
        same_wire = wire_digest(cfg, a) == wire_digest(cfg, b)
        return facts + [same_wire, z3.Not(a.same(b))], None

    return build


def width_theorem(bits: int = 16):
    """At the spec's own digest width: values in [0, 2^(w-1) - 1) pass the negated-pair
    check iff identical (the range the fixed mix keeps digests in)."""
    return agreement_theorem(0, (1 << (bits - 1)) - 1, bits)


THEOREMS: List[Theorem] = [
    Theorem("minmax_digest_range", "digests in [0, 2^63-1): MIN(x) is the min and -MIN(-x) the max",
            "unsat", minmax_theorem(0, (1 << 63) - 1)),
    Theorem("agree_iff_identical_digest", "digests in [0, 2^63-1): min == -MIN(-x) iff every rank sent the same digest",
            "unsat", agreement_theorem(0, (1 << 63) - 1)),
    Theorem("agree_iff_identical_seed_digest", "seed 001's digest mod 2^42: min == -MIN(-x) iff identical",
            "unsat", agreement_theorem(0, 1 << 42)),
    Theorem("agree_iff_identical_counts", "plan count and tokens in [0, 2^62): the triple check is exact",
            "unsat", agreement_theorem(0, 1 << 62)),
    Theorem("agree_iff_identical_no_int_min", "any int64 except INT64_MIN: the check is exact",
            "unsat", agreement_theorem(-(1 << 63) + 1, 1 << 63)),
    Theorem("single_writer_sentinel", "followers send the INT64_MAX sentinel: MIN yields the writer's count",
            "unsat", sentinel_theorem()),
    Theorem("agree_iff_identical_with_sentinel", "values in [0, 2^63) (the sentinel INT64_MAX included): the "
            "negated-pair check is exact, -INT64_MAX does not wrap", "unsat", agreement_theorem(0, 1 << 63)),
    Theorem("complement_max", "MAX as MIN of ~x is exact over the full int64 range", "unsat", complement_max_theorem()),
    Theorem("sync_point_id", "[id, -id] with a positive 62-bit id detects differing sync points", "unsat", sync_id_theorem()),
    Theorem("agree_iff_identical_at_width", "at the spec's 16-bit digest width, values in [0, 2^15-1) pass iff identical",
            "unsat", width_theorem(16)),
    Theorem("plan_digest_injective", "ascending lists over 3 pages with equal digests are equal lists",
            "unsat", plan_digest_injective(3)),
    Theorem("overflow_witness", "negated-pair-overflow: with INT64_MIN allowed the check passes for differing values",
            "sat", overflow_witness()),
    # The finer resolution's lemmas (slots, page_size, victim_order; proofs/resolution.py).
    *(Theorem(*lemma) for lemma in LEMMAS),
]


class TheoremResult(NamedTuple):
    name: str
    claim: str
    status: str  # "proved" | "exhibited" | "failed" | "undecided" (out of its rlimit) | "unknown"
    seconds: float
    detail: Optional[str] = None


def run_theorem(th: Theorem, rlimit: int = 0) -> TheoremResult:
    """The theorem checked under z3's resource limit ``rlimit`` (0: limits.THEOREM_RLIMIT):
    out of it, "undecided" (`tiercheck prove` exits 3); the wrong answer, "failed" (exits 1)."""
    from . import limits
    from .obligations import OUT_OF_LIMIT

    t0 = time.perf_counter()
    assertions, describe = th.build()
    # Bit-vector theorems go to the bit-blasting solver (seconds -> tenths); the plan
    # digest lemma is integer arithmetic.
    sol = z3.SolverFor("QF_UFBV") if th.name != "plan_digest_injective" else z3.Solver()
    sol.set("rlimit", rlimit or limits.THEOREM_RLIMIT)
    sol.add(*[a if not isinstance(a, bool) else z3.BoolVal(a) for a in assertions])
    res = sol.check()
    secs = time.perf_counter() - t0
    if res == z3.unknown:
        why = sol.reason_unknown()
        return TheoremResult(th.name, th.claim, "undecided" if why in OUT_OF_LIMIT else "unknown", secs, why)
    if th.expect == "unsat":
        if res == z3.unsat:
            return TheoremResult(th.name, th.claim, "proved", secs)
        return TheoremResult(th.name, th.claim, "failed", secs, str(sol.model()))
    if res == z3.sat:
        return TheoremResult(th.name, th.claim, "exhibited", secs, describe(sol.model()) if describe else None)
    return TheoremResult(th.name, th.claim, "failed", secs, "no witness found")


def run_all() -> List[TheoremResult]:
    return [run_theorem(t) for t in THEOREMS]

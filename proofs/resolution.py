"""z3 lemmas for the spec's finer resolution (issue 15): slot identities through a split,
the page arithmetic of prefix matching, and the LRU victim key. One small function per
field; each gives the correct step as a claim z3 proves for every size up to a bound, and
the bug variant's step as a query z3 must answer with a witness.

They are not inductive obligations over the whole transition relation (the z3 encoding
keeps free-page counters, one token per page and page-order victims: proofs/scope.py
refuses models with ``slots``, ``page_size`` or ``victim_order`` set); they check the one
effect each variant changes, over all node sizes, split points, page sizes and stamps.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple

import z3

BITS = 8  # slot ids, token counts and stamps (the bounds below stay far from wrapping)


class Lemma(NamedTuple):  # the shape of proofs.consensus.Theorem
    name: str
    claim: str
    expect: str  # "unsat" (proved) or "sat" (the variant's witness)
    build: Callable


def _bv(name):
    return z3.BitVec(name, BITS)


def _val(v):
    return z3.BitVecVal(v, BITS)


# --- slots: _split_node's slicing of the device value -----------------------------------


def split_slots(off_by_one: bool, max_pages: int = 6):
    """A node of n pages (2 <= n <= max_pages) holds n distinct slots; a split after page
    k (1 <= k < n) gives the upper half value[:k] and the lower half value[k:] (or, with
    split-slice-off-by-one, value[k-1:-1]). Claim: the two halves together own exactly
    the node's slots, each once. Query: they do not."""

    def build():
        n, k = _bv("n"), _bv("k")
        s = [_bv(f"s{i}") for i in range(max_pages)]
        facts = [z3.UGE(n, 2), z3.ULE(n, max_pages), z3.UGE(k, 1), z3.ULT(k, n)]
        live = [z3.ULT(_val(i), n) for i in range(max_pages)]
        facts += [z3.Implies(z3.And(live[i], live[j]), s[i] != s[j])
                  for i in range(max_pages) for j in range(i + 1, max_pages)]
        # after the split, page i holds new[i]: unchanged in the upper half; in the lower
        # half the slot of page i (or page i - 1 under the variant)
        new = []
        for i in range(max_pages):
            below = s[i - 1] if off_by_one and i > 0 else s[i]
            new.append(z3.If(z3.ULT(_val(i), k), s[i], below))
        dup = z3.Or(*[z3.And(live[i], live[j], new[i] == new[j])
                      for i in range(max_pages) for j in range(i + 1, max_pages)])
        lost = z3.Or(*[z3.And(live[j], *[z3.Or(z3.Not(live[i]), new[i] != s[j]) for i in range(max_pages)])
                       for j in range(max_pages)])
        broken = z3.Or(dup, lost)

        def describe(model):
            nv, kv = model.eval(n).as_long(), model.eval(k).as_long()
            before = [model.eval(s[i]).as_long() for i in range(nv)]
            after = [model.eval(new[i]).as_long() for i in range(nv)]
            return f"{nv}-page node, split after page {kv}: slots {before} -> {after}"

        return facts + [broken], describe

    return build


# --- page_size: _key_match_paged floors a token match to whole pages --------------------


def page_match(ceil: bool):
    """Two keys share their first t tokens (t below one key's length); pages are p tokens
    (2 <= p <= 8). The match the radix walk takes is t floored to pages (ceil: rounded
    up). Claim: the matched tokens are all shared (match <= t) and whole pages. Query:
    the match covers a token the keys differ in."""

    def build():
        t, p, length = _bv("t"), _bv("p"), _bv("len")
        facts = [z3.UGE(p, 2), z3.ULE(p, 8), z3.ULE(length, 64), z3.ULT(t, length),
                 z3.URem(length, p) == 0]
        floor = z3.UDiv(t, p) * p
        match = z3.UDiv(t + p - 1, p) * p if ceil else floor
        broken = z3.Or(z3.UGT(match, t), z3.URem(match, p) != 0)

        def describe(model):
            tv, pv = model.eval(t).as_long(), model.eval(p).as_long()
            return f"keys share {tv} tokens, page_size {pv}: the match takes {model.eval(match).as_long()}"

        return facts + [broken], describe

    return build


# --- victim_order = "lru": the key evict_host orders host leaves by ------------------------


def lru_victim(local_clock: bool):
    """Two ranks, two host leaves a and b with the replicated logical stamps ra != rb (the
    same on both ranks, the steps are replicated) and per-rank wall-clock stamps: each is
    the replicated stamp unless the rank touched the leaf on its own since (a later
    stamp). Claim: both ranks evict the same leaf. Query: they do not."""

    def build():
        ra, rb = _bv("ra"), _bv("rb")
        facts = [ra != rb, z3.ULT(ra, 100), z3.ULT(rb, 100)]
        picks = []
        for r in range(2):
            la, lb = _bv(f"la{r}"), _bv(f"lb{r}")
            facts += [z3.UGE(la, ra), z3.UGE(lb, rb), z3.ULT(la, 200), z3.ULT(lb, 200), la != lb]
            key_a, key_b = (la, lb) if local_clock else (ra, rb)
            picks.append(z3.ULT(key_a, key_b))  # True: the rank evicts a
        return facts + [picks[0] != picks[1]], (lambda model: "the ranks evict different leaves")

    return build


def _pair(claim: str, witness: str, fn) -> List[Lemma]:
    """The correct step's claim (proved) and the variant's witness (exhibited)."""
    (ok_name, ok_text), (bad_name, bad_text) = claim.split(": ", 1), witness.split(": ", 1)
    return [Lemma(ok_name, ok_text, "unsat", fn(False)), Lemma(bad_name, bad_text, "sat", fn(True))]


LEMMAS: List[Lemma] = [
    *_pair("split_keeps_slot_owners: a split gives every slot of the node to exactly one half (nodes up to 6 pages)",
           "split_slice_off_by_one_witness: split-slice-off-by-one: a slot gets two owners or none", split_slots),
    *_pair("page_floored_match: a match floored to pages covers only shared tokens, in whole pages",
           "page_ceil_match_witness: page-ceil-match: the match covers a token the keys differ in", page_match),
    *_pair("lru_replicated_victim: LRU keyed on the replicated clock: every rank evicts the same host leaf",
           "lru_local_clock_witness: lru-local-clock: ranks evict different host leaves", lru_victim),
]

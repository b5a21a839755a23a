"""Session 13: the situations that kill the seed-11 survivors in the CP planner's view of a
device page (cp_load.py: its logical page ``1 + lane + cp * slot`` and token locations
``q * ps + k``) and in the reclaim digest's modulus (digest.py), each against its mutant:
the reference agrees on the situation, and the same reference with the one function
recompiled with the mutant's edit does not."""

from __future__ import annotations

import operator

import pytest
import torch

from tiercheck.conformance import situations as st
from tiercheck.conformance.adapters import driver_factory
from tiercheck.impl.cp.histogram import counts_bincount
from tiercheck.impl.cp.syncs import SyncCounter
from tiercheck.impl.hicache import digest as dg
from tiercheck.impl.hicache.cp_load import CpLoadBack
from tiercheck.impl.hicache.pages import PageRegistry

from mutant_helpers import recompiled

EVEN_SLOT = "a CP load-back whose victim holds a lane-1 page in an even slot"
LOGICAL = "1 + lane + cp * s for"
LOCS = "q * ps + k for"


def _verdict(name: str) -> str:
    sit = next(s for s in st.SITUATIONS if s.name == name)
    return st.check(sit, lambda cfg: driver_factory("reference", cfg))


@pytest.mark.parametrize("old, new", [
    # cp_load.py:118 (the seed-11 survivor): 1 + lane ** 2 * slot is right on lane 0 and
    # in odd slots (1 ** 2 = 1), and puts a lane-1 page of slot 2 on logical page 3: lane 0.
    (LOGICAL, "1 + lane ** cp * s for"),
    # :118 `lane % cp * s`: lane % 2 is lane, the same misreading as ** above.
    (LOGICAL, "1 + lane % cp * s for"),
    # :118 `cp >> s` ((1 + lane + cp) >> slot): right in slots 0 and 1 only.
    (LOGICAL, "1 + lane + cp >> s for"),
    # cp_load.py:119 (the seed-11 survivor): q & (ps + k): the page's first location
    # 6 & 2 = 2 (logical page 1, lane 0) for logical page 6 (lane 1) with two-token pages.
    (LOCS, "q & ps + k for"),
    # :119 `ps ** k`: the first location q * 1 (k = 0), read as page q // 2.
    (LOCS, "q * ps ** k for"),
])
def test_the_even_slot_victim_kills_its_mutant(monkeypatch, old, new):
    _assert_kills(monkeypatch, EVEN_SLOT, old, new)


def _assert_kills(monkeypatch, name: str, old: str, new: str) -> None:
    assert _verdict(name) == ""
    monkeypatch.setattr(CpLoadBack, "_planner_view",
                        recompiled(CpLoadBack._planner_view, old, new)["_planner_view"])
    assert "load_queue" in _verdict(name)  # the mutant refuses the load the spec makes


@pytest.mark.parametrize("new", [
    # cp_load.py:118 on three lanes: a lane-1 page of slot 2 (logical page 8) read as
    # page 6 (lane 2: 1 - 1 + 6, 2 | 6, 1 ^ 7) or page 4 (lane 0: 2 ^ 6).
    "1 - lane + cp * s for", "1 + lane | cp * s for", "1 ^ lane + cp * s for", "1 + lane ^ cp * s for",
])
def test_the_three_lane_even_slot_victim_kills_its_mutant(monkeypatch, new):
    _assert_kills(monkeypatch, EVEN_SLOT + ", three lanes", LOGICAL, new)


@pytest.mark.parametrize("new", [
    # cp_load.py:119 with two-token pages: logical page 1's first location 1 / 2, 1 // 2
    # or 1 ** 2 instead of 2, read as page 0 (lane 1).
    "q / ps + k for", "q // ps + k for", "q ** ps + k for",
])
def test_the_two_token_lane0_load_kills_its_mutant(monkeypatch, new):
    _assert_kills(monkeypatch, "a CP load-back of a lane-0 page, two-token pages", LOCS, new)


@pytest.mark.parametrize("op", [operator.sub, operator.rshift, operator.lshift, operator.or_, operator.xor])
def test_the_planner_reads_only_each_pages_first_location(op):
    """What the equivalents of cp_load.py:119 (``q * ps OP k``, equal to ``q * ps`` at
    k = 0) rest on: the planner's per-lane counts read the first location of each page
    only, so the other locations of a page may hold anything."""
    cp, ps = 2, 3
    logical = [1 + lane + cp * s for lane, s in [(0, 0), (1, 0), (1, 2), (0, 3)]]
    counts = [counts_bincount(torch.tensor([o(q * ps, k) for q in logical for k in range(ps)]), ps, cp, SyncCounter())
              for o in (operator.add, op)]
    assert counts[0] == counts[1] == (2, 2)


DIVERGED = "reclaim victims the ranks' digests must tell apart"
MODULUS = "raw % ((1 << (bits - 1)) - 1)"


@pytest.mark.parametrize("new, said", [
    ("raw % ((1 + (bits - 1)) - 1)", "halted"),  # digest.py:33 (the seed-11 survivor): modulus 63
    # -63: digests in (-63, 0]: the wire-digest check (session 18) names the first negative one
    ("raw % ((1 - (bits - 1)) - 1)", "the fixed encoding keeps digests in [0, "),
    ("raw % ((1 * (bits - 1)) - 1)", "halted"),  # 62
    ("raw % ((1 | (bits - 1)) - 1)", "halted"),  # 63 | 1 - 1 = 62
    ("raw % ((1 ^ (bits - 1)) - 1)", "halted"),  # 63 ^ 1 - 1 = 61
])
def test_the_diverged_reclaim_kills_a_small_digest_modulus(monkeypatch, new, said):
    """The ranks reclaim different pages and the round must halt; with the mutant the
    two victims' digests are equal, the round passes and the ranks go on diverged (or,
    for a negative modulus, a digest leaves the fixed encoding's range first)."""
    assert _verdict(DIVERGED) == ""
    monkeypatch.setattr(dg, "fold", recompiled(dg.fold, MODULUS, new)["fold"])
    assert said in _verdict(DIVERGED)


def test_the_diverged_victims_collide_only_under_a_small_modulus():
    """What the kill rests on: the keys of pages (1,) and (1, 269849) differ by a multiple
    of 61, 62 and 63 (one fold each from 0: digest key + 1 mod the modulus), not of
    2^63 - 1."""
    reg = PageRegistry(1)
    one, two = (dg.node_key(h) for h in reg.hashes((1, 269849)))
    assert dg.fold(0, one, 64, False) != dg.fold(0, two, 64, False)
    for modulus in (61, 62, 63, -63):
        assert (one + 1) % modulus == (two + 1) % modulus

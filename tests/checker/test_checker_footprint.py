"""The memoised engines (tiercheck.models.element_memo, the default, and
tiercheck.models.footprint) explore exactly what the plain one does, reuse the spec's
work across states that differ only in parts a step never reads, and their wrappers see
every use of a part."""

from __future__ import annotations

import pytest
from checker_helpers import explore, reachable, shipped

from tiercheck.models import model_file
from tiercheck.models.codec import Codec
from tiercheck.models.checker import resolve_property
from tiercheck.models.element_memo import ElementMemoExpander
from tiercheck.models.expand import Expander
from tiercheck.models.footprint import MemoExpander
from tiercheck.models.tracked import Tracked, TrackedRank, TrackedSeq

MODELS = [
    "wt-2r", "wb-reclaim-2r", "wt-storage-1r", "wt-alloc-2r", "wt-prefetch-2r", "wts-2r",
    "variants/early-return-collective", "variants/orphan-host-subtree", "variants/host-starvation",
    "variants/release-no-consensus", "variants/split-during-backup", "variants/reclaim-during-loadback",
]


@pytest.mark.parametrize("name", MODELS)
def test_memo_and_plain_engines_explore_the_same_graph(name):
    props = model_file.load(name).properties
    runs = {}
    for engine in ("plain", "fields", "memo"):
        c, r = explore(shipped(name), props, engine=engine, keep_graph=True)
        s = c.search
        hits = {p: [(h.index, h.pos, h.succ_key, h.message) for h in hs] for p, hs in s.hits.items()}
        runs[engine] = (r.distinct, r.transitions, r.verdicts, r.coverage, list(s.keys), list(s.parent), list(s.via),
                        list(s.src), list(s.dst), bytes(s.kind), bytes(s.frees), hits,
                        {p: [(v.actions, v.loop_start) for v in vs] for p, vs in r.violations.items()})
    assert runs["memo"] == runs["plain"]
    assert runs["fields"] == runs["plain"]


def test_steps_that_do_not_read_the_store_are_reused_across_stores():
    m = shipped("wt-mirror-2r")
    codec = Codec(m)
    ex = MemoExpander(m, [], codec)
    s = next(x for x in reachable(m, 2000) if x.ranks[0].sq and not any(x.store))
    t = s._replace(store=(0b1, 0b11))  # the same ranks and flags, another store
    first = ex.expand(codec.encode(s))
    ran = ex.computed
    second = ex.expand(codec.encode(t))
    rerun = ex.computed - ran
    # Only the units that read the store ran again (storage_backup_done writes it).
    assert 0 < rerun < ran / 2
    plain = MemoExpander.__mro__[1](m, [], codec)
    assert second == plain.expand(codec.encode(t)) and first == plain.expand(codec.encode(s))


def test_a_wrapper_records_every_use_and_refuses_what_it_lacks():
    box = [0]
    w = Tracked((1, 2, 3), box, 4)
    assert str(w) == "(1, 2, 3)" and box[0] == 4
    for use in (lambda: w[0], lambda: list(w), lambda: len(w), lambda: bool(w), lambda: 2 in w,
                lambda: w == (1, 2, 3), lambda: hash(w), lambda: w.count(1), lambda: w + (4,), lambda: (0,) + w,
                lambda: sorted(w), lambda: f"{w}"):
        box[0] = 0
        use()
        assert box[0] == 4
    n = Tracked(6, box, 1)
    box[0] = 0
    assert n >> 1 == 3 and 1 << n == 64 and n & 2 == 2 and box[0] == 1
    with pytest.raises(TypeError):
        (1, 2) * Tracked(1.5, box, 1)  # an operation the value refuses stays refused


def test_the_engine_is_chosen_on_the_command_line(capsys):
    from tiercheck.cli import main

    outs = []
    for engine in ("plain", "fields", "memo"):
        assert main(["check", "wt-2r", "--engine", engine, "--quiet"]) == 0
        outs.append(capsys.readouterr().out)
    assert all("227 distinct states, 1,170 transitions" in o for o in outs)
    assert main(["check", "wt-2r", "--engine", "jit"]) == 2
    err = capsys.readouterr().err
    assert "--engine" in err and len(err.strip().splitlines()) == 1


def test_a_one_rank_step_is_reused_whatever_the_other_rank_holds():
    m = shipped("wt-mirror-2r")
    codec = Codec(m)
    props = [resolve_property(p) for p in model_file.load("wt-mirror-2r").properties]
    ex = ElementMemoExpander(m, props, codec)
    # Two states in which rank 0 finishes the same D->H copy while rank 1 differs.
    seen, pair = {}, None
    for s in reachable(m, 3000):
        if s.ranks[0].wdone < len(s.ranks[0].wq):
            other = seen.setdefault((s.ranks[0], s.store[0], s.hung, s.halted), s)
            if other.ranks[1] != s.ranks[1]:
                pair = (other, s)
                break
    assert pair is not None
    first = ex.expand(codec.encode(pair[0]))
    c = next(c for c, (a, _u) in enumerate(ex.cands) if a.name == "write_dma_done" and a["rank"] == 0)
    mask = ex._find(ex.step_tables[c], codec.encode(pair[0]))[1]
    second = ex.expand(codec.encode(pair[1]))
    assert mask & codec.layout.element_masks()[1] == 0  # it never read rank 1
    assert sum(len(table) for _m, table in ex.step_tables[c]) == 1  # computed once for both
    plain = Expander(m, props, codec)
    assert first == plain.expand(codec.encode(pair[0])) and second == plain.expand(codec.encode(pair[1]))


def test_a_state_differing_only_in_the_store_reuses_its_template():
    m = shipped("wt-mirror-2r")
    codec = Codec(m)
    ex = ElementMemoExpander(m, [], codec)
    s = next(x for x in reachable(m, 2000) if x.ranks[0].sq and not any(x.store))
    ex.expand(codec.encode(s))
    ran = ex.computed
    t = s._replace(store=(0b1, 0b11))
    second = ex.expand(codec.encode(t))
    # One template for both; only its store-reading steps (storage_backup_done) ran again.
    (_state, items), = ex.templates.values()
    dynamic = [ex.cands[it][0].name for it in items if type(it) is int]
    assert dynamic and set(dynamic) == {"storage_backup_done"} and ex.computed - ran == len(dynamic)
    assert second == Expander(m, [], codec).expand(codec.encode(t))


def test_element_wrappers_read_one_rank_at_a_time():
    box = [0]
    a, b = TrackedRank((1, 2), box, 1, 7), TrackedRank((3, 4), box, 2, 9)
    seq = TrackedSeq(((1, 2), (3, 4)), box, 3, [a, b])
    ranks = list(seq)
    assert len(seq) == 2 and ranks[1] is b and seq[0] is a and box[0] == 0  # copying reads nothing
    assert hash(b) == 9 and box[0] == 2
    assert seq[0] == (1, 2) and box[0] == 3
    box[0] = 0
    assert seq == ((1, 2), (3, 4)) and box[0] == 3  # the tuple as a whole reads every rank


@pytest.mark.parametrize("name", ["variants/planner-local-tiebreak", "lru-2r"])
def test_a_spec_memo_cache_that_met_a_wrapper_before_does_not_hide_a_read(name):
    # The spec's per-rank memo caches answer an argument they met by identity without
    # touching it: a wrapper shared by two computations of one state hid the second's
    # read of its rank (local_access's candidates after evict's, both device_leaves),
    # and the search lost most of this model.
    m = shipped(name)
    codec = Codec(m)
    props = [resolve_property(p) for p in model_file.load(name).properties]
    memo, plain = ElementMemoExpander(m, props, codec), Expander(m, props, codec)
    for s in reachable(m, 200):
        k = codec.encode(s)
        assert memo.expand(k) == plain.expand(k)


def test_records_of_one_template_class_live_in_the_template_only():
    # A computation that read every rank (and the flags) but not the store can only be
    # looked up again by its own template class, which holds it: it is not filed twice.
    m = shipped("wt-mirror-2r")
    codec = Codec(m)
    props = [resolve_property(p) for p in model_file.load("wt-mirror-2r").properties]
    memo, plain = ElementMemoExpander(m, props, codec), Expander(m, props, codec)
    for s in reachable(m, 400):
        k = codec.encode(s)
        assert memo.expand(k) == plain.expand(k)
    tables = [memo.state_tables, *memo.cand_tables, *memo.step_tables]
    masks = {mask for entry in tables for mask, _t in entry}
    assert masks and memo.template_mask not in masks
    assert memo.records == len(memo.templates) + sum(len(t) for entry in tables for _m, t in entry)

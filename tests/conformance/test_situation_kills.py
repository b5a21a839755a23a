"""The situations that kill survivors of the mutation samples (sessions 9 to 11), each
against its mutant: the reference agrees on the situation, and the same reference with
the one method recompiled from its source with the mutant's edit does not."""

from __future__ import annotations

import inspect
import textwrap

import pytest

from tiercheck.conformance import situations as st
from tiercheck.conformance.adapters import driver_factory
from tiercheck.impl.hicache import prefetch as prefetch_module
from tiercheck.impl.hicache.cp_load import CpLoadBack
from tiercheck.impl.hicache.eviction import Eviction
from tiercheck.impl.hicache.load_path import LoadPath
from tiercheck.impl.hicache.pages import PageRegistry
from tiercheck.impl.hicache.prefetch import Prefetch
from tiercheck.impl.hicache.state import RankBase
from tiercheck.impl.hicache.write_path import WritePath

from mutant_helpers import load_mutation_suite, recompiled


@pytest.fixture(scope="module")
def suite():
    return load_mutation_suite("bench_mutation_suite")


def _mutate(monkeypatch, cls, name: str, old: str, new: str) -> None:
    """``cls.name`` (a class's method or a module's function) replaced by its mutant."""
    monkeypatch.setattr(cls, name, recompiled(getattr(cls, name), old, new)[name])


def _situation(name: str):
    return next(s for s in st.SITUATIONS + st.TWIN_SITUATIONS if s.name == name)


def _verdict(suite, sit) -> str:
    """"" when the reference agrees on the situation, else where it departs (the twin
    replay for a situation of a catalogued bug, as the mutation suite runs it)."""
    if sit in st.TWIN_SITUATIONS:
        cfg, actions, probes = st.trace(sit)
        return suite._twin_departs(cfg, actions, next(iter(cfg.variants)), probes)
    return st.check(sit, lambda cfg: driver_factory("reference", cfg))


@pytest.mark.parametrize("name, cls, method, old, new, caught", [
    # prefetch.py:58: the hit query's anchor keys compared by identity (never the same
    # object), so diverged replicas prefetch below different anchors.
    ("a prefetch the diverged replicas anchor differently", Prefetch, "prefetch_from_storage",
     "mins[1] != maxs[1]", "mins[1] is maxs[1]", "storage_prefetch"),
    # prefetch.py:151: the page count compared by identity: a run of more than 256 pages
    # cached whole is attached again (as an empty node).
    ("a fetched run of 257 pages cached whole", Prefetch, "check_prefetch_progress",
     "if have < len(fetched) and", "if have is not len(fetched) and", "IndexError"),
    # write_path.py:138: past the shorter list a rank stages by index.
    ("an insert the diverged replicas stage two nodes apart for", WritePath, "_write_backups",
     "if i >= mins[0]:", "if i is mins[0]:", "IndexError"),
    # write_path.py:154 (partial-backup-leak's branch): a rank with room runs the fallback
    # host eviction anyway.
    ("a backup with host room beside a host leaf, each rank on its own", WritePath, "_allocate_host",
     "if not self._host_ok(need, fail):", "if self._host_ok(need, fail):", "host_free"),
    # cp_load.py:69: a lane's free pages as capacity XOR used (2 ^ 1 = 3, not 1).
    ("insert short of a CP lane of two pages", CpLoadBack, "lane_free",
     "c - u for", "c ^ u for", "+ node 2/3/4"),
    # write_path.py:20 (page-ceil-match): a page's leading token read at +page_size (the
    # second page's), on either side of the comparison: no such token in a first page...
    ("a first page rounded up to a cached sibling", WritePath, "_ceil_match",
     "reg.path[wanted][-reg.page_size]", "reg.path[wanted][reg.page_size]", "IndexError"),
    ("a first page rounded up to a cached sibling", WritePath, "_ceil_match",
     "reg.path[cached][-reg.page_size]", "reg.path[cached][+reg.page_size]", "IndexError"),
    # ...and the wrong token three pages deep: the sibling is not taken.
    ("a third page rounded up to a cached sibling", WritePath, "_ceil_match",
     "reg.path[wanted][-reg.page_size]", "reg.path[wanted][reg.page_size]", "- node 1,2/3,4/5,7/8,9"),
    ("a third page rounded up to a cached sibling", WritePath, "_ceil_match",
     "reg.path[cached][-reg.page_size]", "reg.path[cached][+reg.page_size]", "- node 1,2/3,4/5,7/8,9"),
    # cp_load.py:60: a node's first lane counted from past its last page (depth + len):
    # 2 * len pages off, which two lanes cannot tell apart; three lanes put page 1 on
    # lane 2 and let request 4 in on lane 0.
    ("insert short of a CP lane only, three lanes", CpLoadBack, "_node_lanes",
     "page_size - len(node)", "page_size + len(node)", "+ node 4"),
    # cp_load.py:98: an unbacked childless leaf freeable under write_back instead of
    # write-through: the planner deletes leaf 2 to load page 1 back, which the spec
    # refuses (write_back)...
    ("a CP load-back with only unbacked leaves, write_back", CpLoadBack, "_freeable",
     "(not self.cfg.write_back and", "(self.cfg.write_back and", "- node 2"),
    # ...and refuses the load the spec makes by deleting leaf 2 (write_through_selective).
    ("a CP load-back deleting an unbacked leaf, write_through_selective", CpLoadBack, "_freeable",
     "(not self.cfg.write_back and", "(self.cfg.write_back and", "node 1: device loading->absent"),
    # prefetch.py:26: the anchor key as one bit of the hash (& 4 for >> 4): the diverged
    # anchors (1 page, below page 1; none, the root) both get 0, the hit query agrees and
    # each rank prefetches below its own anchor (a module function, patched in its module).
    ("a prefetch the diverged replicas anchor differently", prefetch_module, "_anchor_key",
     "int(h, 16) >> 4", "int(h, 16) & 4", "prefetch_from_storage(req=1)"),
    # cp_load.py:47 (session 11): a CP rank's touch of the node its clock already ends
    # with says it moved the clock (returns 1); the spec disables that touch.
    ("a CP touch of the most recent node", CpLoadBack, "local_access",
     "if live and live[-1] == node.end:\n        return 0", "if live and live[-1] == node.end:\n        return 1",
     "returned 1, the spec's state change says 0"),
    # load_path.py:51 (session 11): load_back with load_back_evicts evicts the chain's
    # size or-ed with the free pages instead of the shortfall: a second leaf goes.
    ("a load-back evicting its shortfall beside a free page", LoadPath, "load_back",
     "self.evict((total - self.device_pool.available())", "self.evict((total | self.device_pool.available())",
     "node 2: device resident->absent"),
    # eviction.py:114 (session 11): pruning ignores the host references below (host_ref
    # >= 0): a node without a host copy is deleted with the host-only child a backup reads.
    ("an evict above a host-only node a backup still reads", Eviction, "_prunable",
     "d.host_ref == 0", "d.host_ref >= 0", "- node 1/2"),
    # write_path.py:101 (session 11), in split-slice-off-by-one's branch: the bug's slice
    # cut at the front ([:1]) instead of one page early; a lower half of two pages tells.
    ("a split with a lower half of two pages", WritePath, "_split",
     "(upper.dev_slots[-1:] + node.dev_slots)[:-1]", "(upper.dev_slots[-1:] + node.dev_slots)[:1]",
     "device_slots [0, 1]->[0, -1]"),
    # state.py:277 (session 11): the victim order compared by identity with the literal
    # "path": a model file's "path" (TOML) is another string, so its victims go LRU.
    ("an insert that evicts by path order read from TOML", RankBase, "_order",
     'self.cfg.victim_order == "path"', 'self.cfg.victim_order is "path"', "device absent->resident"),
])
def test_the_situation_kills_its_mutant(suite, monkeypatch, name, cls, method, old, new, caught):
    sit = _situation(name)
    assert _verdict(suite, sit) == ""
    _mutate(monkeypatch, cls, method, old, new)
    assert caught in _verdict(suite, sit)


def test_the_diverged_anchor_keys_collide_as_one_bit():
    """What the prefetch.py:26 kill rests on: the two anchors of the diverged situation
    (rank 0: one page, below page 1; rank 1: none, the root) have different keys, and the
    mutant's keys (bit 2 of the hash) are equal (both 0)."""
    page1 = PageRegistry(1).hashes((1,))[0]
    assert prefetch_module._anchor_key(1, page1) != prefetch_module._anchor_key(0, None)
    src = textwrap.dedent(inspect.getsource(prefetch_module._anchor_key))
    made: dict = {}
    exec(compile(src.replace("int(h, 16) >> 4", "int(h, 16) & 4"), "<mutant>", "exec"),  # noqa: S102
         prefetch_module.__dict__, made)
    assert made["_anchor_key"](1, page1) == made["_anchor_key"](0, None) == 0


def test_the_long_run_is_past_the_shared_small_ints():
    """The 257-page situation fetches more than 256 pages (CPython shares one int object
    per value up to 256: below that an identity test agrees with an equality test)."""
    cfg, actions, _probes = st.trace(_situation("a fetched run of 257 pages cached whole"))
    req = next(a["req"] for a in actions if a.name == "prefetch_from_storage")
    assert len(cfg.requests[req]) // cfg.page_size > 256


def test_the_63_page_backup_kills_a_small_int64_max(suite, monkeypatch):
    """state.py:26 (session 11): INT64_MAX as (1 * 63) - 1 = 62, as the modules that
    import it would see it: the follower's SKIP sent as 62 undercuts the writer's ack of
    63 pages in the MIN, which then reads as "no ack" (nothing durable)."""
    from tiercheck.impl.hicache import eviction, state, storage_path

    sit = _situation("a 63-page backup acked through the single writer's synced slots")
    assert _verdict(suite, sit) == ""
    for mod in (state, storage_path, eviction):
        monkeypatch.setattr(mod, "INT64_MAX", (1 * 63) - 1)
    assert "durable" in _verdict(suite, sit)

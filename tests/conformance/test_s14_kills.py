"""The units of tiercheck.conformance.s14_kills (session 17) and the checks added for the
seed-14 survivors, each run as the mutation suite runs it, against the survivor it kills
(recompiled from its source with the mutant's one edit): the unit passes on the
implementation and fails with the mutant in."""

from __future__ import annotations

import pytest

from tiercheck.conformance import s14_kills as k
from tiercheck.impl.hicache.config import HiCacheConfig
from tiercheck.impl.hicache.cp_load import CpLoadBack
from tiercheck.impl.hicache.eviction import Eviction
from tiercheck.impl.hicache.load_path import LoadPath
from tiercheck.impl.hicache.observe import Inspect
from tiercheck.impl.hicache.prefetch import Prefetch
from tiercheck.impl.hicache.state import RankBase
from tiercheck.impl.hicache.storage_path import StoragePath
from tiercheck.impl.hicache.write_path import WritePath

from mutant_helpers import load_mutation_suite, recompiled

MS = load_mutation_suite("bench_mutation_suite_s14")
UNITS = dict(MS.s14_kills_units())


def _run(name: str) -> bool:
    return MS.run_unit(name, UNITS[name])


def _sit(name: str) -> str:
    return f"situation {name}"


def test_the_units_are_in_the_mutation_suite():
    assert list(UNITS) == ([_sit(s.name) for s in k.SITUATIONS] + [_sit(s.name) for s in k.TWIN_SITUATIONS]
                           + [f"fault {n}" for n, _ in k.scenarios()])


@pytest.mark.parametrize("name", list(UNITS))
def test_every_unit_passes_on_the_implementation(name):
    assert _run(name)


def _mutate(monkeypatch, cls, method: str, old: str, new: str):
    monkeypatch.setattr(cls, method, recompiled(getattr(cls, method), old, new)[method])


# (unit, class, method, original text, mutant text, what the failing unit prints)
KILLS = [
    ("a second prefetch queued on one rank", Prefetch, "prefetch_from_storage",
     "return len(self.pq) - 1", "return len(self.pq) % 1", "returned index 0, the prefetch queue has 2"),  # prefetch.py:82
    ("a prefetch anchored two pages deep", Prefetch, "_anchor",
     "owner[hashes[k - 1]]", "owner[hashes[k ^ 1]]", "IndexError"),  # prefetch.py:39
    ("a prefetch whose anchor holds no host copy", Prefetch, "_anchor",
     "node.host != RESIDENT", "node.host > RESIDENT", "step 7 of 8"),  # prefetch.py:40 (the sampled one)
    ("a prefetch whose match ends inside the node (1, 2, 6)", Prefetch, "_anchor",
     "node.end != hashes[k - 1]", "node.end > hashes[k - 1]", "prefetch_from_storage(req=0)"),  # the same line's end test
    ("a prefetch whose match ends inside the node (1, 2, 3)", Prefetch, "_anchor",
     "node.end != hashes[k - 1]", "node.end < hashes[k - 1]", "prefetch_from_storage(req=0)"),  # its mirror
    ("a load-back of one two-token page under a three-token threshold", LoadPath, "load_back",
     "total * self.layout.page_size <", "total + self.layout.page_size <", "load_queue"),  # load_path.py:35
    ("a CP load-back of a node spanning both lanes", CpLoadBack, "_node_lanes",
     "(first + k)", "(first << k)", "load_queue"),  # cp_load.py:61
    ("a check of the prefetch two past the queue's end", Prefetch, "_prefetch_op",
     "index < len(self.pq)", "index is not len(self.pq)", "IndexError"),  # prefetch.py:96 (seed 15)
    ("a drain round beside a mirror that is locked but holds no host reference", StoragePath, "is_redundant_mirror",
     "node.lock_ref == 0 and node.host_ref", "node.lock_ref == 0 or node.host_ref",
     "host resident->absent"),  # storage_path.py:160 (seed 15)
    ("a mirror-release round with no plan after a mismatch", StoragePath, "_release_round",
     "bits) > 0:", "bits) > -1:", "plan_mismatches 1 -> 0"),  # storage_path.py:191
    ("digest-unchecked evicting a two-page node only rank 1 must write", Eviction, "_evict_one",
     "self.rank << 32", "self.rank ** 32", "host_free 0 -> 2"),  # eviction.py:75
    ("early-return-collective with a copy done on every rank", WritePath, "writing_check",
     "self.wq and done == 0", "self.wq and done != 0", "write_queue"),  # write_path.py:197 (seed 15)
    ("split-write-lock-leak committing a one-page write", WritePath, "_commit_writes",
     "op.pages[-1]", "op.pages[+1]", "IndexError"),  # write_path.py:209
    ("failed-batch-acked drained", RankBase, "_sstored",
     "op.stored is None", "op.stored is not None", "breaks ['durable_only_when_acked']"),  # state.py:338
]


@pytest.mark.parametrize("unit, cls, method, old, new, said", KILLS, ids=[x[0] for x in KILLS])
def test_a_situation_kills_its_mutant(unit, cls, method, old, new, said, monkeypatch, capsys):
    _mutate(monkeypatch, cls, method, old, new)
    assert not _run(_sit(unit))
    assert said in capsys.readouterr().out


def test_a_page_torn_under_a_backup_in_flight_is_not_reported(monkeypatch, capsys):
    # observe.py:168: the self-check reading pages whose backups are still in flight
    _mutate(monkeypatch, Inspect, "_verify_store", "self.stored - inflight", "self.stored | inflight")
    assert not _run("fault store bytes torn under a backup in flight")
    assert "is reported" in capsys.readouterr().out


def test_check_prefetch_progress_returns_whether_the_prefetch_retired(monkeypatch, capsys):
    # prefetch.py:174: a retired prefetch reported as not retired
    _mutate(monkeypatch, Prefetch, "check_prefetch_progress", "return True", "return False")
    name, run = next((n, r) for n, r in MS.campaign_units(25, 1) if n == "campaign wt-prefetch-2r seed 0")
    assert not MS.run_unit(name, run)
    assert "check_prefetch_progress(op=0) returned False, the spec's state change says True" in capsys.readouterr().out


@pytest.mark.parametrize("old, new", [("not 0 <= v", "not 1 <= v"), ("not 0 <= v", "not -1 <= v")])
def test_a_timer_domain_off_by_one_is_caught(old, new, monkeypatch):
    # config.py:130: the prefetch timer's seconds refused below 1, or accepted down to -1
    from tiercheck.conformance import impl_domain

    _mutate(monkeypatch, HiCacheConfig, "__post_init__", old, new)
    assert any("a timer's seconds" in line or "raised" in line for line in impl_domain.duration_problems())


@pytest.mark.gloo
@pytest.mark.parametrize("slack", ["6.0", pytest.param("4.0", marks=pytest.mark.slow)])  # ~15 s each
def test_a_stall_grace_other_than_the_documented_one_is_caught(monkeypatch, slack):
    # gloo.py:144: the grace after a failure is one collective timeout + 5 s (GlooHiCache's docstring)
    from tiercheck.conformance import verdict_faults as vf
    from tiercheck.conformance.process_faults import guarded
    from tiercheck.impl.hicache.gloo import GlooHiCache

    made = recompiled(GlooHiCache._call, "grace = self.collective_timeout + 5.0",
                      f"grace = self.collective_timeout + {slack}")
    monkeypatch.setattr(GlooHiCache, "_call", made["_call"])
    got = guarded(vf.stall_beside_a_long_failure)
    assert got.startswith("the stall report does not give the documented grace (7s)"), got

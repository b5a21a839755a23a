"""Cluster mode (tiercheck.models.cluster): the state space partitioned by state hash gives
the one-process search's counts, verdicts and shortest counterexamples, in this process
(LocalParts) and on a real local Dask cluster of several worker processes."""

from __future__ import annotations

import pytest
from checker_helpers import explore, shipped

from tiercheck.cli import main
from tiercheck.models import cluster, model_file


def _same(a, b, graph=()):
    """The one-process result ``a`` and the cluster result ``b`` agree."""
    assert (b.distinct, b.transitions, b.depth, b.complete, b.stop_reason) == (
        a.distinct, a.transitions, a.depth, a.complete, a.stop_reason)
    assert b.coverage == a.coverage
    for name, verdict in a.verdicts.items():
        assert b.verdicts[name] == (cluster.NOT_CHECKED if name in graph else verdict), name
    assert b.violations.keys() == a.violations.keys()
    for name, found in a.violations.items():
        got = b.violations[name]
        assert [(v.message, v.actions, v.states) for v in got] == [(v.message, v.actions, v.states) for v in found]


def _local(name, props, parts=3, k=1):
    mf = model_file.load(name)
    return cluster.check(shipped(name), props, cluster.LocalParts(mf.config, props, parts), k)


@pytest.mark.parametrize(
    "name, props, k",
    [
        ("wt-2r", None, 1),  # clean, 2 ranks, graph property left unchecked
        ("variants/release-busy", ["release_safety"], 1),  # stops early at the first hit
        ("variants/release-busy", ["release_safety", "no_ghost"], 3),  # one property never violated
        ("variants/early-return-collective", ["no_collective_hang"], 3),  # runs out before 3 hits
        ("variants/partial-backup-leak", ["rank_agreement", "no_ghost"], 2),
    ],
)
def test_partitions_in_process_equal_one_process(name, props, k):
    mf = model_file.load(name)
    props = props or mf.properties
    _c, one = explore(shipped(name), props, max_violations=k)
    graph = {"eviction_progress"} & set(props)
    _same(one, _local(name, props, 3, k), graph)


def test_one_partition_and_many_agree():
    props = ["release_safety", "no_ghost"]
    a, b = _local("variants/release-busy", props, 1), _local("variants/release-busy", props, 5)
    _same(a, b)


def test_a_local_dask_cluster_equals_one_process():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        for name, props in [("wt-2r", ["no_ghost", "rank_agreement", "slot_conservation"]),
                            ("variants/partial-backup-leak", ["rank_agreement", "no_ghost"])]:
            _c, one = explore(shipped(name), props)
            res = cluster.run(shipped(name), props, lc.scheduler_address)
            assert res.workers == 3
            _same(one, res)
    assert one.verdicts["rank_agreement"] == "violated"
    assert len(res.violations["rank_agreement"][0].actions) == len(one.violations["rank_agreement"][0].actions)


def test_check_cluster_local_from_the_command_line(capsys):
    pytest.importorskip("distributed")
    rc = main(["check", "variants/orphan-host-subtree", "--cluster", "local:2", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "14 distinct states" in out and "2 workers" in out
    assert "eviction_progress" in out and "not checked (cluster mode" in out
    assert "shortest counterexample" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--cluster", "local:0"], "local:N needs N in 1..64"),
        (["--cluster", "local:2", "--max-states", "5"], "drop --max-states"),
        (["--cluster", "local:2", "--symmetry"], "drop --symmetry"),
        (["--cluster", "local:2", "--workers", "2"], "drop --workers"),
    ],
)
def test_cluster_bad_input_is_one_line_exit_2(capsys, argv, needle):
    assert main(["check", "wt-1r", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_cluster_without_the_extra_names_it(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if absent
    assert main(["check", "wt-1r", "--cluster", "local:2", "--quiet"]) == 2
    assert "tiercheck[cluster]" in capsys.readouterr().err


def test_the_owning_partition_follows_the_value_not_its_spelling():
    # Equal rank states must land on one partition in every process: the digest ignores
    # which equal sub-tuples are one object (pickle shares them) and True versus 1.
    rs = shipped("wt-2r").init_states()[0].ranks[0]
    op = (0, 1)
    shared = rs._replace(wq=(op, op), closed=True)
    apart = rs._replace(wq=((0, 1), tuple([0, 1])), closed=1)
    assert shared == apart and shared.wq[0] is shared.wq[1] and apart.wq[0] is not apart.wq[1]
    assert cluster.rank_digest(shared) == cluster.rank_digest(apart)
    assert cluster.rank_digest(shared) != cluster.rank_digest(rs)

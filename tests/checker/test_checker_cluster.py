"""Cluster mode (tiercheck.models.cluster): the state space partitioned by state hash gives
the one-process search's counts, verdicts and shortest counterexamples (lassos included),
in this process (LocalParts) and on a real local Dask cluster of several worker processes."""

from __future__ import annotations

import numpy as np
import pytest
from checker_helpers import explore, shipped

from tiercheck.cli import main
from tiercheck.models import cluster, model_file
from tiercheck.models.state_graph import SearchGraph
from tiercheck.spec.model import Model


def _config(name):
    return model_file.load(name).config


def _props(name):
    return model_file.load(name).properties


def _same(a, b):
    """The one-process result ``a`` and the cluster result ``b`` agree."""
    assert (b.distinct, b.transitions, b.depth, b.complete, b.stop_reason) == (
        a.distinct, a.transitions, a.depth, a.complete, a.stop_reason)
    assert b.coverage == a.coverage
    assert (b.verdicts, b.symmetry, b.notes) == (a.verdicts, a.symmetry, a.notes)
    assert b.violations.keys() == a.violations.keys()
    for name, found in a.violations.items():
        got = b.violations[name]
        assert [(v.message, v.actions, v.states, v.loop_start, v.kind) for v in got] == [
            (v.message, v.actions, v.states, v.loop_start, v.kind) for v in found], name


def _local(name, props, parts=3, k=1):
    cfg = _config(name)
    return cluster.check(Model(cfg), props, cluster.LocalParts(cfg, props, parts), k)


@pytest.mark.parametrize(
    "name, props, k",
    [
        ("wt-2r", None, 1),  # clean, 2 ranks, eviction_progress holds
        ("variants/release-busy", ["release_safety"], 1),  # stops early at the first hit
        ("variants/release-busy", ["release_safety", "no_ghost"], 3),  # one property never violated
        ("variants/early-return-collective", ["no_collective_hang"], 3),  # runs out before 3 hits
        ("variants/partial-backup-leak", ["rank_agreement", "no_ghost"], 2),
        ("variants/host-starvation", None, 2),  # host_channel (progress) and its fair lasso fail
        ("wt-2r", ["eviction_progress_fair", "lock_release"], 1),  # a fair form that holds
        ("variants/split-write-lock-leak", None, 2),  # lock_release (progress) fails
        ("variants/terminated-half-dropped", None, 3),  # prefetch_progress: several counterexamples
    ],
)
def test_partitions_in_process_equal_one_process(name, props, k):
    props = props or _props(name)
    _c, one = explore(Model(_config(name)), props, max_violations=k)
    _same(one, _local(name, props, 3, k))
    if "host_channel_fair" in one.violations:
        assert all(v.loop_start is not None for v in one.violations["host_channel_fair"])


def test_the_gathered_graph_is_the_one_process_graph(monkeypatch):
    # What liveness and progress read: the same edges in the same order, depths,
    # expanded states, obligations, met states and fair steps, wherever the states live.
    name = "variants/host-starvation"
    props = _props(name)
    m = shipped(name)
    c, _one = explore(m, props)
    one = SearchGraph(m, c.search)
    built = []

    class Kept(cluster.ClusterGraph):
        def __init__(self, *a):
            super().__init__(*a)
            built.append(self)

    monkeypatch.setattr(cluster, "ClusterGraph", Kept)
    parts = cluster.LocalParts(model_file.load(name).config, props, 4)
    cluster.check(m, props, parts)
    (got,) = built
    assert got.n == one.n
    for f in ("src", "dst", "kind", "depth", "expanded"):
        assert np.array_equal(getattr(got, f), getattr(one, f)), f
    # Each partition keeps the edges into its own states.
    for q, p in enumerate(parts.parts):
        dst = np.frombuffer(p.edges()[1], dtype=np.int32)
        assert len(dst) and (np.frombuffer(bytes(got.owner), dtype=np.uint8)[dst] == q).all()
    prop = cluster.resolve_property("host_channel_fair")
    opened = one.obligations(prop)
    assert opened and got.obligations(prop) == opened
    mine, theirs = got.met(prop, list(opened)), one.met(prop, list(opened))
    assert all(np.array_equal(mine[k], theirs[k]) for k in opened)
    some = list(range(0, one.n, 7))
    assert got.fair_steps(some) == one.fair_steps(some)


@pytest.mark.parametrize(
    "name, props, k, cuts",
    [
        ("wt-2r", None, 1, (1, 2, 17, 226, 227)),  # the cut falls inside a state's steps
        ("variants/early-return-collective", ["no_collective_hang"], 1, (7, 8, 9)),  # both stops
        ("variants/release-busy", ["release_safety"], 1, (176, 177)),  # on the closing state
    ],
)
def test_max_states_cuts_where_one_process_cuts(name, props, k, cuts):
    props = props or _props(name)
    for cut in cuts:
        _c, one = explore(shipped(name), props, max_states=cut, max_violations=k)
        got = cluster.check(shipped(name), props, cluster.LocalParts(_config(name), props, 3), k, max_states=cut)
        _same(one, got)
        assert not got.complete and ("--max-states" in got.stop_reason or "every property" in got.stop_reason)


def test_a_time_limit_stops_at_a_level_end():
    props = ["no_ghost"]
    cut = cluster.check(shipped("wt-2r"), props, cluster.LocalParts(_config("wt-2r"), props, 2), time_limit=1e-9)
    _c, one = explore(shipped("wt-2r"), props, max_states=cut.distinct)
    assert (cut.complete, cut.stop_reason, cut.verdicts) == (False, "--time-limit 1e-09s reached", {"no_ghost": "holds so far"})
    assert (cut.distinct, cut.depth) == (one.distinct, 1)  # level 0 expanded, level 1 found


@pytest.mark.parametrize(
    "name, props, k, cut",
    [
        ("wt-2r", None, 1, 100),  # rank swaps, eviction_progress not checked, cut inside a level
        ("variants/early-return-collective", ["no_collective_hang"], 2, None),  # traces into orbits
        ("variants/orphan-host-subtree", None, 1, None),  # no symmetry applies: a note
    ],
)
def test_symmetry_gives_the_one_process_reduced_run(name, props, k, cut):
    props = props or _props(name)
    _c, one = explore(shipped(name), props, max_violations=k, symmetry=True, max_states=cut)
    parts = cluster.LocalParts(_config(name), props, 3, symmetry=True)
    _same(one, cluster.check(shipped(name), props, parts, k, max_states=cut))


def test_symmetry_withdraws_holds_when_replicas_diverge(monkeypatch):
    from tiercheck.models import symmetry

    m = shipped("variants/release-no-consensus")
    ident = [(tuple(range(m.pages.count)), tuple(range(len(m.pages.request_pages))))]
    monkeypatch.setattr(symmetry, "for_model", lambda m: (symmetry.Symmetry(m, True, ident), ""))
    props = ["rank_agreement", "no_ghost"]
    _c, one = explore(m, props, symmetry=True)
    got = cluster.check(m, props, cluster.LocalParts(m.cfg, props, 3, symmetry=True))
    _same(one, got)
    assert got.verdicts["no_ghost"] == cluster.verdicts.UNSOUND_SYMMETRY


def test_one_partition_and_many_agree():
    props = ["release_safety", "no_ghost"]
    a, b = _local("variants/release-busy", props, 1), _local("variants/release-busy", props, 5)
    _same(a, b)


def test_a_local_dask_cluster_equals_one_process():
    distributed = pytest.importorskip("distributed")
    runs = {}
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        for name, props in [("wt-2r", ["no_ghost", "rank_agreement", "eviction_progress", "eviction_progress_fair"]),
                            ("variants/partial-backup-leak", None),
                            ("seed004/wt-storage-1r", None),  # host_channel_fair: a lasso
                            ("variants/terminated-half-dropped", None)]:
            props, m = props or _props(name), Model(_config(name))
            _c, one = explore(m, props, max_violations=2)
            res = cluster.run(m, props, lc.scheduler_address, 2)
            assert res.workers == 3
            _same(one, res)
            runs[name] = res
        # A model file asking for symmetry (ranks and prefixes): orbit representatives on
        # the workers.
        props = ["no_ghost", "slot_conservation"]
        _c, one = explore(shipped("wt-mirror-sym4-2r"), props, symmetry=True)
        res = cluster.run(shipped("wt-mirror-sym4-2r"), props, lc.scheduler_address, symmetry=True)
        _same(one, res)
        assert res.symmetry["factor"] > 10
        # A cut inside a level, across worker processes.
        _c, one = explore(shipped("wt-2r"), ["no_ghost"], max_states=100)
        _same(one, cluster.run(shipped("wt-2r"), ["no_ghost"], lc.scheduler_address, max_states=100))
    assert runs["variants/partial-backup-leak"].verdicts["rank_agreement"] == "violated"
    assert runs["wt-2r"].verdicts == dict.fromkeys(runs["wt-2r"].verdicts, "holds")
    starved = runs["seed004/wt-storage-1r"]
    assert starved.verdicts["host_channel_fair"] == "violated"
    assert starved.violations["host_channel_fair"][0].loop_start is not None
    assert runs["variants/terminated-half-dropped"].verdicts["prefetch_progress"] == "violated"


def test_check_cluster_local_from_the_command_line(capsys):
    pytest.importorskip("distributed")
    rc = main(["check", "variants/orphan-host-subtree", "--cluster", "local:2", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "14 distinct states" in out and "2 workers" in out
    assert "eviction_progress" in out and "not checked" not in out
    assert "shortest counterexample" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--cluster", "local:0"], "local:N needs N in 1..64"),
        (["--cluster", "local:2", "--workers", "2"], "drop --workers"),
        (["--cluster", "local:2", "--max-memory", "1G"], "drop --max-memory"),
    ],
)
def test_cluster_bad_input_is_one_line_exit_2(capsys, argv, needle):
    assert main(["check", "wt-1r", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_check_cluster_max_states_is_inconclusive_exit_3(capsys, monkeypatch):
    # The command line's cut and exit code (partitions in this process: the Dask path is
    # the test above).
    monkeypatch.setattr(cluster, "DaskParts", lambda cfg, props, _address, sym: cluster.LocalParts(cfg, props, 2, sym))
    assert main(["check", "wt-2r", "--cluster", "local:2", "--max-states", "50", "--quiet"]) == 3
    out, err = capsys.readouterr()
    assert "50 distinct states" in out and "--max-states 50 reached" in err


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

"""`tiercheck check --simulate`: random walks that find a variant's violation and write it
as an ITF trace that replays on the spec, reproducible from the seed; one-line errors."""

from __future__ import annotations

import json

import pytest
from checker_helpers import shipped

from tiercheck.cli import main
from tiercheck.models import simulate
from tiercheck.models.checker import resolve_property
from tiercheck.models.replay import replay
from tiercheck.models.trace import read_trace


def _check(capsys, *argv):
    rc = main(["check", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_simulation_finds_a_variants_violation_and_writes_a_replayable_trace(capsys, tmp_path):
    out_path = tmp_path / "walk.json"
    rc, out, _err = _check(
        capsys, "variants/split-during-backup", "--simulate", "300", "--depth", "40", "--seed", "1", "--out", str(out_path)
    )
    assert rc == 1
    assert "no_use_after_free violated" in out and "a random walk's, not a shortest one" in out
    t = read_trace(out_path)
    assert t.prop == "no_use_after_free"
    assert t.meta["simulation"] == {"seed": 1, "walk": t.meta["simulation"]["walk"]}
    m = shipped("variants/split-during-backup")
    states = replay(m, t.actions)  # every step enabled on the spec
    assert resolve_property("no_use_after_free").fn(m, states[-1])
    assert len(set(states)) == len(states)  # cycles were cut out


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    m = shipped("wt-mirror-2r")
    props = [resolve_property(n) for n in ("no_ghost", "release_safety", "rank_agreement")]
    a = simulate.simulate(m, props, walks=20, depth=30, seed=7)
    b = simulate.simulate(shipped("wt-mirror-2r"), props, walks=20, depth=30, seed=7)
    c = simulate.simulate(m, props, walks=20, depth=30, seed=8)
    assert (a.walks, a.steps, a.distinct, a.coverage) == (b.walks, b.steps, b.distinct, b.coverage)
    assert (a.steps, a.distinct) != (c.steps, c.distinct)
    assert a.walks == 20 and a.longest <= 30 and not a.violations


def test_swarm_walks_take_action_subsets():
    m = shipped("wt-storage-2r")
    subsets = {simulate.swarm(m, simulate.walk_rng(0, k)) for k in range(40)}
    assert len(subsets) > 10 and all(subsets)
    assert not any("prefetch_io" in s for s in subsets)  # prefetch is off in this model


def test_a_clean_simulation_is_inconclusive_not_a_pass(capsys):
    rc, out, err = _check(capsys, "wt-2r", "--simulate", "30", "--depth", "20", "--seed", "3")
    assert rc == 3
    assert "simulation (seed 3): 30 walks" in out and "not violated in 30 walks" in out
    assert "eviction_progress" in out and "not checked (simulation)" in out
    assert "seed 3" in err


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--depth", "5"], "--depth applies to --simulate only"),
        (["--seed", "5"], "--seed applies to --simulate only"),
        (["--simulate", "5", "--workers", "2"], "--workers does not apply to --simulate"),
        (["--simulate", "5", "--max-states", "9"], "--max-states does not apply to --simulate"),
        (["--simulate", "5", "--symmetry"], "--symmetry does not apply to --simulate"),
    ],
)
def test_bad_simulation_flags_are_one_line_errors(capsys, argv, fragment):
    rc, out, err = _check(capsys, "wt-2r", *argv)
    assert rc == 2 and out == ""
    assert fragment in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["0", "-3", "x"])
def test_bad_walk_counts_are_refused(capsys, value):
    rc, out, err = _check(capsys, "wt-2r", "--simulate", value)
    assert rc == 2 and out == ""
    assert "--simulate" in err and len(err.strip().splitlines()) == 1


def test_all_violations_keeps_distinct_final_states(capsys, tmp_path):
    out_path = tmp_path / "w.json"
    rc, out, _err = _check(
        capsys, "variants/orphan-host-subtree", "--simulate", "200", "--depth", "20", "--seed", "2",
        "--all-violations", "3", "--out", str(out_path),
    )
    assert rc == 1
    finals = [json.dumps(json.loads(f.read_text())["states"][-1], sort_keys=True) for f in tmp_path.glob("w*.json")]
    assert finals and len(finals) == len(set(finals)) == out.count("written to ")

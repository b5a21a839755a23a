"""`tiercheck sglang history --reuse` without SGLang: a release whose campaign was cut keeps
its finished runs and runs only the missing ones; a complete release and the replays
already made on a lane are taken as they are (no lane is started)."""

import hashlib
import json

from tiercheck.conformance.sglang import history

ROWS = [
    {"kind": "conform", "model": "sglang/wt-1r", "backend": "lockstep", "result": "conforms"},
    {"kind": "conform", "model": "sglang/wb-2r:3", "backend": "gloo", "result": "n/a", "message": "no"},
    {"kind": "tour", "model": "sglang/wt-1r", "backend": "lockstep", "disagreements": []},
]


def test_missing_runs_are_those_a_cut_campaign_lacks():
    runs = ["sglang/wt-1r", "sglang/wb-2r:3@gloo", "sglang/wt-alloc-2r@gloo"]
    assert history.missing_runs(ROWS, runs, ["sglang/wt-1r", "sglang/wb-1r"]) == (
        ["sglang/wt-alloc-2r@gloo"], ["sglang/wb-1r"])
    assert history.missing_runs([], runs[:1], []) == (runs[:1], [])


def test_reuse_takes_complete_campaigns_and_cached_replays(tmp_path):
    lanes, work, out = tmp_path / "lanes", tmp_path / "work", tmp_path / "out"
    (lanes / "sglang-0.5.14" / "venv" / "bin").mkdir(parents=True)
    (lanes / "sglang-0.5.14" / "venv" / "bin" / "python").write_text("")  # never run
    (lanes / "sglang-0.5.14" / "lane.json").write_text("{}")
    trace = tmp_path / "t.json"
    trace.write_text('{"#meta": {}}')
    sig = "state at insert: node.host"
    row = {"kind": "conform", "model": "sglang/wt-1r", "backend": "lockstep", "result": "disagrees", "steps": 5,
           "findings": [{"signature": sig, "message": "m", "trace": str(trace), "passes": [],
                         "steps_after_shrink": 2}]}
    work.mkdir()
    (work / "results.json").write_text(json.dumps([{"release": "0.5.14", "rows": [row], "seconds": 1.0}]))
    stored = str(out / "traces" / "history" / f"wt-1r-{hashlib.sha256(trace.read_bytes()).hexdigest()[:8]}.json")
    (work / "replays.json").write_text(json.dumps({"0.5.14": {stored: {
        "trace": stored, "result": "disagrees", "signature": sig, "step": 1, "message": "m", "passed": []}}}))
    assert history.main(["--reuse", "--releases", "0.5.14", "--runs", "sglang/wt-1r", "--tours",
                         "--lanes-dir", str(lanes), "--work", str(work), "--out", str(out)]) == 0
    expected = json.loads((out / "history.json").read_text())["expected"]
    assert expected == {stored: {"0.5.14": "disagrees"}}
    assert "**caught**" in (out / "history.md").read_text()


def test_a_run_given_another_strategy_reruns_where_it_was_driven():
    prefetch = "sglang/wt-prefetch-2r@gloo"
    driven = {"kind": "conform", "model": "sglang/wt-prefetch-2r", "backend": "gloo", "result": "conforms"}
    na = {**driven, "result": "n/a", "message": "prefetch is not mapped"}
    runs = ["sglang/wt-1r", prefetch + "~coverage"]
    # the index-choice row is stale once the run list says ~coverage; an n/a row stands for any strategy
    assert history.current_rows(ROWS[:1] + [driven], runs, []) == ROWS[:1]
    assert history.missing_runs(ROWS[:1], runs, []) == ([prefetch + "~coverage"], [])
    assert history.current_rows([na], runs, []) == [na]
    assert history.missing_runs([na], [prefetch + "~coverage"], []) == ([], [])
    again = {**driven, "strategy": "coverage"}
    assert history.missing_runs([again], [prefetch + "~coverage"], []) == ([], [])
    assert history.current_rows([again, na], [prefetch + "~coverage"], [], rerun=[prefetch + "~coverage"]) == [na]


def test_a_run_names_its_own_strategy():
    import pytest

    from tiercheck.conformance.sglang.campaign import parse_run
    from tiercheck.errors import UserError

    assert parse_run("sglang/wt-prefetch-2r@gloo~coverage!prefetch_at_hit") == (
        "sglang/wt-prefetch-2r", "gloo", "coverage", ["prefetch_at_hit"])
    assert parse_run("sglang/wb-2r:3@gloo", "swarm") == ("sglang/wb-2r:3", "gloo", "swarm", [])
    assert parse_run("sglang/wt-1r") == ("sglang/wt-1r", "lockstep", "index", [])
    with pytest.raises(UserError, match="unknown strategy 'fast'"):
        parse_run("sglang/wt-1r~fast")
    assert history.run_key("sglang/wt-1r~index") == history.run_key("sglang/wt-1r") == "sglang/wt-1r@lockstep"

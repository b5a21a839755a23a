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

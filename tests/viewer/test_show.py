"""`tiercheck show TRACE`: a stored trace step by step, a lasso's cycle marked, and bad files
refused with one line and exit 2; --html writes a page that needs no network."""

from __future__ import annotations

import json
import re

import pytest

from tiercheck import cli
from tiercheck.models.trace import diff_itf, read_trace

from trace_helpers import write_counterexample, write_walk

# wt-1r: stage 1/2, commit, demote it, load it back: the last state equals state 3.
CYCLE = [
    "insert(req=0)", "write_dma_done(rank=0)", "writing_check",
    "evict(node=1)", "load_back(node=1)", "load_dma_done(rank=0)", "loading_check",
]


@pytest.fixture
def show(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", ["show"])  # only this command's imports
    return cli.main


def test_prints_every_step_and_what_changed_per_rank(show, tmp_path, capsys):
    _m, actions, _s = write_counterexample(tmp_path / "t.json", "variants/partial-backup-leak", "rank_agreement")
    assert show(["show", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    trace = read_trace(tmp_path / "t.json")
    assert out.startswith(f"trace {tmp_path / 't.json'}: counterexample of rank_agreement in model partial-backup-leak")
    assert trace.message in out
    for i, a in enumerate(actions, start=1):
        assert re.search(rf"^\s*{i}\. {re.escape(str(a))}$", out, re.M)
    for line in diff_itf(trace.states[0], trace.states[1]):
        assert f"       {line}\n" in out
    # The failed allocation hit one rank only: the ranks' lines differ.
    assert "rank 0: + node 1/2" in out and "rank 1: + node 1/2" in out


def test_a_lasso_shows_where_its_cycle_starts_and_closes(show, tmp_path, capsys):
    _m, _a, states = write_walk(tmp_path / "l.json", "wt-1r", CYCLE, loop_start=3)
    assert states[-1] == states[3]
    assert show(["show", str(tmp_path / "l.json")]) == 0
    out = capsys.readouterr().out
    assert "lasso: steps 4..7 form a cycle back to state 3" in out
    assert re.search(r"^\s*4\. evict\(node=1\)\s+<- cycle starts \(leaves state 3\)$", out, re.M)
    assert "-> state 7 equals state 3: steps 4..7 repeat forever" in out


def test_a_lasso_that_does_not_close_is_flagged(show, tmp_path, capsys):
    write_walk(tmp_path / "l.json", "wt-1r", CYCLE, loop_start=2)
    assert show(["show", str(tmp_path / "l.json")]) == 0
    assert "warning: state 7 differs from state 2" in capsys.readouterr().out


def _corrupt(path, doc):
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("damage, needle", [
    (None, "no such trace file"),
    ("text", "not JSON"),
    (lambda d: d["#meta"].update(source="quint"), "not a tiercheck trace"),
    (lambda d: d["states"].pop(), "do not line up"),
    (lambda d: d["states"][2].pop("ranks"), "state 2 has no ranks"),
    (lambda d: d["states"][1]["ranks"][0]["nodes"].update({"#map": [["x", 3]]}), "bad node entry"),
    (lambda d: d["#meta"]["tiercheck"].update(loop_start=99), "loop_start 99 outside the trace"),
])
def test_bad_trace_files_are_one_line_exit_2(show, tmp_path, capsys, damage, needle):
    write_walk(tmp_path / "ok.json", "wt-1r", CYCLE[:3])
    path = tmp_path / "bad.json"
    if damage == "text":
        path.write_text("{not json")
    elif damage is not None:
        doc = json.loads((tmp_path / "ok.json").read_text())
        damage(doc)
        _corrupt(path, doc)
    for argv in (["show", str(path)], ["show", str(path), "--html", str(tmp_path / "o.html")]):
        assert show(argv) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "o.html").exists()


def test_html_page_is_self_contained(show, tmp_path, capsys):
    write_walk(tmp_path / "l.json", "wt-1r", CYCLE, loop_start=3)
    assert show(["show", str(tmp_path / "l.json"), "--html", str(tmp_path / "v.html")]) == 0
    assert "7 steps, 1 rank(s)" in capsys.readouterr().out
    page = (tmp_path / "v.html").read_text()
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=", page)
    assert re.findall(r"https?://[^\s\"']+", page) == ["http://www.w3.org/2000/svg"]  # a namespace, not a fetch
    data = page[page.index('type="application/json">') + 24:page.index("</script>")]
    doc = json.loads(data)
    assert doc["loop_start"] == 3 and len(doc["steps"]) == 8 and doc["model"] == "wt-1r"
    assert "</" not in data  # nothing in the data can close the script element


def test_the_html_viewer_opens_where_the_trace_went_wrong():
    from types import SimpleNamespace

    from tiercheck.models.viewer_html import focus_step

    states = [{}] * 6
    trace = lambda **kw: SimpleNamespace(**{"states": states, "meta": {}, "kind": "counterexample", "prop": None, **kw})  # noqa: E731
    assert focus_step(trace()) == 0  # a plain walk: from the start
    assert focus_step(trace(prop="no_ghost")) == 5  # a counterexample: where it breaks
    assert focus_step(trace(kind="conformance", prop="conformance", meta={"failing_step": 2})) == 3

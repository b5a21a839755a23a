"""`tiercheck check` and `tiercheck graph` from the command line: verdicts, partial runs,
coverage, several counterexamples as ITF files, graph export, one-line errors."""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET

import itf_py
import networkx as nx
import pytest
from checker_helpers import explore, shipped

from tiercheck.cli import main
from tiercheck.commands import graph as graph_cmd
from tiercheck.models import graph_export
from tiercheck.models.trace import read_trace


def _check(capsys, *argv):
    rc = main(["check", *argv, "--quiet"])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_clean_model_holds_and_reports_rate(capsys):
    rc, out, _err = _check(capsys, "wt-2r")
    assert rc == 0
    assert "227 distinct states" in out and "exploration complete" in out and "states/s" in out
    assert "no_ghost" in out and "violated" not in out
    assert "never enabled" not in out


def test_a_partial_run_says_so_plainly(capsys):
    rc, out, _err = _check(capsys, "wt-storage-2r", "--max-states", "300")
    assert rc == 3  # inconclusive, not a pass
    assert "PARTIAL (--max-states 300 reached)" in out
    assert "no 'holds' below is a proof" in out
    assert "holds so far" in out and "unknown" in out
    assert " holds\n" not in out  # nothing claims a full 'holds'


def test_coverage_table_and_not_applicable_actions(capsys):
    rc, out, _err = _check(capsys, "wt-1r", "--coverage")
    assert rc == 0
    table = out.split("coverage (steps of the explored graph):")[1]
    assert "insert" in table and "n/a: prefetch is off" in table and "n/a: no storage tier" in table
    row = next(line for line in table.splitlines() if line.split()[:1] == ["evict"])
    assert row.split()[-1] == "ok"


def test_never_enabled_actions_are_flagged(capsys, tmp_path):
    # No host pool: the request is inserted and evicted, but never written to the host nor
    # loaded back. (A device pool that no request fits is refused by the loader.)
    path = tmp_path / "tiny.toml"
    path.write_text("[model]\nrequests = [[1, 2]]\ndevice_pages = 2\nhost_pages = 0\n")
    rc, out, _err = _check(capsys, str(path))
    assert rc == 0
    line = next(x for x in out.splitlines() if "warning: actions never enabled" in x)
    assert "write_dma_done" in line and "load_back" in line
    assert "insert" not in line and "evict" not in line and "prefetch_io" not in line


def test_all_violations_writes_each_counterexample(capsys, tmp_path):
    out_path = tmp_path / "cex.json"
    rc, out, _err = _check(
        capsys, "variants/host-starvation", "--property", "host_channel_fair", "--all-violations", "3", "--out", str(out_path)
    )
    assert rc == 1
    files = sorted(tmp_path.glob("cex*.json"))
    assert out_path in files and len(files) == out.count("written to ") >= 2
    finals = set()
    for f in files:
        t = read_trace(f)
        assert t.prop == "host_channel_fair" and t.loop_start is not None
        doc = json.loads(f.read_text())
        assert len(itf_py.trace_from_json(doc).states) == len(t.actions) + 1
        finals.add((json.dumps(doc["states"][-1], sort_keys=True), tuple(map(str, t.actions))))
    assert len(finals) == len(files)  # distinct counterexamples


def test_several_invariant_counterexamples_end_in_distinct_states(tmp_path):
    m = shipped("variants/release-no-consensus")
    _c, res = explore(m, ["rank_agreement"], max_violations=4)
    found = res.violations["rank_agreement"]
    assert len(found) == 4
    assert len({v.states[-1] for v in found}) == 4
    lengths = [len(v.actions) for v in found]
    assert lengths == sorted(lengths)  # breadth-first: shortest first


@pytest.mark.parametrize(
    "argv, words",
    [
        (["wt-1r", "--workers", "0"], "--workers"),
        (["wt-1r", "--all-violations", "0"], "--all-violations"),
        (["wt-1r", "--property", "nonsense"], "unknown property"),
        (["no-such-model"], "no such model"),
        (["wt-1r", "--time-limit", "-1"], "--time-limit"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, words):
    rc, _out, err = _check(capsys, *argv)
    assert rc == 2 and words in err and err.count("\n") == 1 and "Traceback" not in err


def test_symmetry_from_the_model_file_and_its_override(capsys):
    rc, out, _err = _check(capsys, "wt-mirror-sym4-2r", "--property", "no_ghost", "--max-states", "200")
    assert rc == 3 and "reduction" in out and "symmetry:" in out and "PARTIAL" in out
    rc, out, _err = _check(capsys, "wt-mirror-sym4-2r", "--property", "no_ghost", "--no-symmetry", "--max-states", "50")
    assert "symmetry:" not in out


def _graph(argv):
    p = argparse.ArgumentParser()
    graph_cmd.add_arguments(p)
    return graph_cmd.run(p.parse_args(argv))


def test_graph_export_graphml_and_dot(tmp_path):
    m = shipped("wt-1r")
    _c, res = explore(m)
    gml, dot = tmp_path / "g.graphml", tmp_path / "g.dot"
    assert _graph(["wt-1r", "-o", str(gml)]) == 0
    assert _graph(["wt-1r", "-o", str(dot)]) == 0
    g = nx.read_graphml(gml)
    assert g.number_of_nodes() == res.distinct == 99
    # One edge per ordered pair of states joined by a non-stuttering step.
    assert g.number_of_edges() <= sum(t for _e, t in res.coverage.values())
    assert all("action" in d for _a, _b, d in g.edges(data=True))
    ET.parse(gml)  # well-formed XML
    text = dot.read_text()
    assert text.startswith('digraph "wt-1r" {') and text.rstrip().endswith("}")
    assert text.count(" -> ") == g.number_of_edges()


def test_graph_export_marks_violating_states():
    g = graph_export.build(shipped("variants/orphan-host-subtree"), 100)
    bad = [n for n, d in g.nodes(data=True) if d["violates"]]
    assert bad and all("slot_conservation" in g.nodes[n]["violates"] for n in bad)


def test_graph_export_refuses_big_models_with_a_clear_error(capsys, tmp_path):
    from tiercheck.errors import UserError

    with pytest.raises(UserError, match="more than 200 states; graph export is for small models"):
        _graph(["wt-mirror-1r", "-o", str(tmp_path / "g.dot"), "--max-states", "200"])
    with pytest.raises(UserError, match="cannot tell the format"):
        _graph(["wt-1r", "-o", str(tmp_path / "g.txt")])

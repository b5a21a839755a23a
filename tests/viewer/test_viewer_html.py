"""The HTML viewer in headless Chromium: it draws, for the step in the address, each rank's
tree with the nodes and tier states of that step's state, flags exactly the nodes the step
changed, lists every step; a screenshot shows the coloured node boxes."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from tiercheck.models.trace import diff_itf, read_trace
from tiercheck.models.viewer_html import write

from chromium import dump_dom, executable, screenshot
from png import count_colour
from trace_helpers import write_counterexample, write_walk

pytestmark = pytest.mark.skipif(executable() is None, reason="needs Debian's chromium (apt-get install -y chromium)")

# wt-mirror-2r: stage 1/2, back it up, plan its release, demote it, load it back, then
# insert 1/3 (a split) while the load is in flight; rank 0 finishes its copy first.
WALK = [
    "insert(req=0)", "write_dma_done(rank=0)", "write_dma_done(rank=1)", "writing_check",
    "storage_backup_done(rank=0, pages=2)", "storage_backup_done(rank=1, pages=2)",
    "drain_storage_control_queues", "evict(node=1)", "load_back(node=1)", "insert(req=1)",
    "load_dma_done(rank=0)",
]


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found = []
        self.text = {}
        self._open = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.found.append((tag, a))
        if a.get("id") == "changes" or (self._open and tag == "li"):
            self._open = self._open or "changes"

    def handle_endtag(self, tag):
        if tag == "ul" and self._open:
            self._open = None

    def handle_data(self, data):
        if self._open and data.strip():
            self.text.setdefault(self._open, []).append(data.strip())

    def all(self, tag, **attrs):
        return [a for t, a in self.found if t == tag and all(a.get(k) == v for k, v in attrs.items())]


def _nodes(itf_rank):
    return {name: n for name, n in itf_rank["nodes"]["#map"]}


def _check_step(dom: str, trace, k: int):
    page = Elements()
    page.feed(dom)
    assert page.all("main")[0]["data-step"] == str(k)
    steps = [a for t, a in page.found if t == "li" and "step" in a.get("class", "").split()]
    assert [a["data-step"] for a in steps] == [str(i) for i in range(len(trace.states))]
    assert [a["data-step"] for a in steps if "current" in a["class"].split()] == [str(k)]
    state = trace.states[k]
    trees = page.all("svg", **{"class": "tree"})
    assert [t["data-rank"] for t in trees] == [str(r) for r in range(len(state["ranks"]))]
    drawn = [a for t, a in page.found if t == "g" and a.get("class") == "node"]
    for r, rank in enumerate(state["ranks"]):
        nodes = _nodes(rank)
        assert trees[r]["data-nodes"] == ",".join(sorted(nodes))
        before = _nodes(trace.states[k - 1]["ranks"][r]) if k else None
        mine = drawn[:len(nodes)]
        drawn = drawn[len(nodes):]
        for a in mine:
            n = nodes[a["data-node"]]
            assert (a["data-dev"], a["data-host"]) == (n["device"], n["host"])
            changed = bool(before is not None and before.get(a["data-node"]) != n)
            assert (a["data-changed"] != "") == changed, (k, r, a)
    assert not drawn
    want = diff_itf(trace.states[k - 1], state) if k else ["initial state"]
    assert page.text.get("changes") == (want or ["(nothing changed)"])


@pytest.fixture(scope="module")
def walk_page(tmp_path_factory):
    d = tmp_path_factory.mktemp("viewer")
    write_walk(d / "walk.json", "wt-mirror-2r", WALK)
    trace = read_trace(d / "walk.json")
    page = write(trace, d / "walk.html")
    return trace, page


@pytest.mark.parametrize("k", [0, 9, 11])
def test_chromium_renders_the_step_in_the_address(walk_page, k):
    trace, page = walk_page
    _check_step(dump_dom(f"{page.as_uri()}#step={k}"), trace, k)


def test_chromium_renders_a_two_rank_counterexample(tmp_path):
    write_counterexample(tmp_path / "cx.json", "variants/release-no-consensus", "rank_agreement")
    trace = read_trace(tmp_path / "cx.json")
    page = write(trace, tmp_path / "cx.html")
    last = len(trace.states) - 1
    dom = dump_dom(f"{page.as_uri()}#step={last}")
    _check_step(dom, trace, last)
    assert "rank_agreement" in dom and trace.message in dom


def test_screenshot_shows_the_coloured_tree(walk_page, tmp_path):
    _trace, page = walk_page
    # A small window (the header and the two trees) keeps the pure-Python PNG decode short.
    # Step 10: rank 0 and 1 each draw 1 (loading, host resident), 1/2 (the same) and the
    # new 1/3 (device resident, host absent), in the viewer's fixed colours. Headless
    # Chromium on a loaded machine has once captured a frame before layout settled, so a
    # short first frame gets two more tries; a page without these colours fails all three.
    seen = []
    for attempt in range(3):
        png = screenshot(f"{page.as_uri()}#step=10", tmp_path / f"shot{attempt}.png", size=(900, 330)).read_bytes()
        loading = count_colour(png, (0x42, 0xA5, 0xF5))
        resident = count_colour(png, (0x43, 0xA0, 0x47))
        host_resident = count_colour(png, (0x7E, 0x57, 0xC2))
        seen.append((loading, resident, host_resident))
        if loading > 4 * 2000 and host_resident > 4 * 1500 and resident > 2 * 1500:
            return
    raise AssertionError(f"(loading, resident, host_resident) pixels per try: {seen}")


def _rank_differences(state):
    ranks = state["ranks"]
    fields = {k for k in ranks[0] if k != "nodes" and any(r[k] != ranks[0][k] for r in ranks)}
    maps = [_nodes(r) for r in ranks]
    names = set().union(*maps)
    nodes = {n for n in names if any(m.get(n) != maps[0].get(n) for m in maps)}
    return fields, nodes


def test_the_page_opens_at_the_violation_and_marks_where_ranks_differ(tmp_path):
    write_counterexample(tmp_path / "cx.json", "variants/release-no-consensus", "rank_agreement")
    trace = read_trace(tmp_path / "cx.json")
    page = write(trace, tmp_path / "cx.html")
    html_text = page.read_text()
    assert "text-overflow: ellipsis" not in html_text  # action labels are never cut
    last = len(trace.states) - 1
    dom = dump_dom(page.as_uri())  # no #step: the page chooses
    _check_step(dom, trace, last)
    fields, nodes = _rank_differences(trace.states[last])
    assert fields or nodes  # rank_agreement broke: the replicas differ somewhere
    parsed = Elements()
    parsed.feed(dom)
    marked = {a["data-node"] for t, a in parsed.found if t == "g" and a.get("data-rankdiff") == "1"}
    rows = {a["data-field"] for t, a in parsed.found if t == "tr" and "rankdiff" in a.get("class", "").split()}
    assert marked == nodes and rows == fields
    assert "ranks differ: " in dom

"""Pages of several tokens (page_size): the page universe, partial last pages, prefix
matching that stops at a page boundary, load_back_threshold in tokens, and the tree's
prefix closure (property prefix_closed) that a match rounded up to the page breaks."""

from __future__ import annotations

from spec_helpers import model, node, page, run

from tiercheck.spec.config import build_pages
from tiercheck.spec.properties import prefix_closed


def test_pages_are_whole_chunks_and_a_partial_last_page_is_not_one():
    pages = build_pages(((1, 2, 3, 4, 5), (1, 2, 3, 6)), 2)
    assert pages.paths == ((1, 2), (1, 2, 3, 4), (1, 2, 3, 6))
    assert pages.request_pages == ((0, 1), (0, 2))
    assert pages.parent == (-1, 0, 0) and pages.depth(1) == 2 and pages.tokens(2) == (3, 6)


def test_a_match_stops_at_the_page_boundary_and_splits_there():
    m = model(page_size=2, requests=((1, 2, 3, 4, 5), (1, 2, 3, 6)), device_pages=3)
    s = run(m, ("insert", {"req": 0}), ("insert", {"req": 1}))
    assert node(m, s, 1, 2).start == page(m, 1, 2)  # the split is after page 1,2
    assert node(m, s, 1, 2, 3, 6).start == page(m, 1, 2, 3, 6)
    assert s.ranks[0].dev_free == 0 and prefix_closed(m, s) is None
    assert m.name(page(m, 1, 2, 3, 6)) == "1,2/3,6"


def test_load_back_threshold_counts_tokens():
    m = model(page_size=2, requests=((1, 2, 3, 4),), device_pages=2, host_pages=2, load_back_threshold=3)
    s = run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))
    s = run(m, ("evict", {"node": page(m, 1, 2, 3, 4)}), state=s)
    assert "load_back" in {a.name for a in m.actions(s)}  # 2 pages = 4 tokens >= 3
    m3 = model(page_size=2, requests=((1, 2), (1, 2, 3, 4)), device_pages=2, host_pages=2, load_back_threshold=3)
    s = run(m3, ("insert", {"req": 1}), ("write_dma_done", {"rank": 0}), ("writing_check", {}),
            ("insert", {"req": 0}))
    s = run(m3, ("evict", {"node": page(m3, 1, 2, 3, 4)}), state=s)
    assert "load_back" not in {a.name for a in m3.actions(s)}  # 1 page = 2 tokens < 3


def test_a_match_rounded_up_to_the_page_detaches_the_rest():
    reqs = ((1, 2, 3, 4), (1, 2, 3, 5, 6, 7))
    ok = model(page_size=2, requests=reqs, device_pages=4)
    assert prefix_closed(ok, run(ok, ("insert", {"req": 0}), ("insert", {"req": 1}))) is None
    bad = model(page_size=2, requests=reqs, device_pages=4, variants={"page-ceil-match"})
    s = run(bad, ("insert", {"req": 0}), ("insert", {"req": 1}))
    assert "page 1,2/3,5 before it is not" in prefix_closed(bad, s)

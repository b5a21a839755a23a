"""The serving API's prefix match, checked against the spec's tree.

``match_prefix(tokens)`` is how a scheduler asks the cache what it holds for a request:
the device pages of the longest cached prefix, the host-only pages below them, and the
last fully matched node of each. The spec has no action for it, but its answer is a
function of the spec state (the tree): walk the request's pages while they are cached;
pages with a device copy (resident or loading) count as device pages until the first
page that has only a host copy, host-resident pages after that count as host pages, and
anything else ends the match. Only the reference driver asks (``HiCacheGroup.match_prefix``).
"""

from __future__ import annotations

from tiercheck.spec.state import RankState

from .counters import DEV_ABSENT, HOST_RESIDENT


def expected_match(model, rs: RankState, req: int) -> dict:
    """match_prefix's answer on one rank for request ``req``, from the spec state."""
    dev = host = 0
    last_dev = last_host = None
    for p in model.pages.request_pages[req]:
        end = rs.owner[p]
        if end < 0:
            break
        n = rs.nodes[end]
        if n.dev != DEV_ABSENT and not host:
            dev += 1
            last_dev = p if p == end else last_dev
        elif n.host == HOST_RESIDENT:
            host += 1
            last_host = p if p == end else last_host
        else:
            break
    path = lambda p: None if p is None else tuple(model.pages.paths[p])  # noqa: E731
    return {"device_pages": dev, "host_pages": host, "last_device_node": path(last_dev),
            "last_host_node": path(last_host)}


def _plain(answer: dict) -> dict:
    return {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in answer.items()}


def match_problems(model, state, group) -> list:
    """Ask every rank match_prefix for every request of the model and compare."""
    out = []
    for i, req in enumerate(model.cfg.requests):
        got = group.match_prefix(list(req))
        for r, (rs, answer) in enumerate(zip(state.ranks, got)):
            want = expected_match(model, rs, i)
            if _plain(answer) != want:
                out.append(f"rank {r}: match_prefix({list(req)}) = {answer}, the spec's tree says {want}")
    return out

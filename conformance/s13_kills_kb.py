"""Units for survivors of the seed-13 mutation sample (session 15, kB).

- (twin, split-slice-off-by-one) an insert splitting a node whose upper half keeps two
  pages: the bug's lower half takes the upper half's LAST device slot
  (``upper.dev_slots[-1:]``); a slice of two pages takes two and drops two of its own,
  so the lower half's device slots differ from the spec-with-the-bug's (slots on).
- (situation, early-return-collective) a writing_check every rank enters with copies in
  flight and none finished: every rank returns before the all-reduce (no hang, nothing
  committed) and must report 0 commits; the reference adapter compares each rank's
  return with the spec's change of its write queue (counters.returned_problems).
"""

from __future__ import annotations

from .situations import Situation


def _split_keeps_two_upper_pages(m, s, a, t) -> bool:
    """An insert that splits a device-resident node after its second page or later."""
    if a.name != "insert":
        return False
    rs, rt = s.ranks[0], t.ranks[0]
    return _split_upper_len(m, rs, rt) >= 2


def _split_upper_len(m, rs, rt) -> int:
    from tiercheck.spec.state import live_nodes, node_len
    # Nodes are keyed by their end page: a split node keeps its key (the lower half) and
    # starts later; the pages it lost are the upper half's.
    best = 0
    for e in live_nodes(rs):
        if e < len(rt.nodes) and rt.nodes[e] is not None and rt.nodes[e].start != rs.nodes[e].start:
            best = max(best, node_len(m.pages, rs, e) - node_len(m.pages, rt, e))
    return best


def _all_ranks_return_early(m, s, a, t) -> bool:
    """writing_check with copies in flight on every rank and none finished anywhere."""
    return (a.name == "writing_check" and all(rs.wq for rs in s.ranks)
            and all(rs.wdone == 0 for rs in s.ranks))


SITUATIONS = (
    Situation("a writing_check every rank returns from early (copies in flight, none done)",
              "variants/early-return-collective", (), _all_ranks_return_early),
)

TWIN_SITUATIONS = (
    Situation("an insert splitting a node after its second device page (slice of the bug)",
              "variants/split-slice-off-by-one", (), _split_keeps_two_upper_pages,
              overrides=(("requests", ((1, 2, 3), (1, 2, 4))), ("device_pages", 4))),
)

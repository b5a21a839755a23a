"""Wrong bytes, traced to the step that put them there.

The implementation's byte check names the rank, pool and page ("rank 0: node 1: wrong
bytes in the host pool: page 1/2 (slot 3)"). The spec's states along the trace say when
that page's copy in that pool last changed (the node owning it became resident, was
split or moved there): that step's action is the operation that last wrote it.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"rank (\d+): node [^:]*: wrong bytes in the (device|host) pool: (.*)")
_PAGE = re.compile(r"page ([0-9/]+) \(slot (\d+)\)")
_FIELD = {"device": "dev", "host": "host"}


def last_writer(model, actions, states, rank: int, pool: str, page: int):
    """(step index, action) of the last step that changed ``page``'s copy in ``pool`` on
    ``rank`` (its owner node or that node's residency there), or None."""
    field = _FIELD[pool]

    def copy(s):
        rs = s.ranks[rank]
        end = rs.owner[page]
        node = rs.nodes[end] if end >= 0 else None
        return end, None if node is None else (node.start, getattr(node, field))

    for i in range(min(len(actions), len(states) - 1) - 1, -1, -1):
        if copy(states[i]) != copy(states[i + 1]):
            return i, actions[i]
    return None


def annotate(model, actions, states, message: str) -> str:
    """``message`` with each wrong page followed by the step that last wrote it."""
    out = []
    for part in message.split("; "):
        m = _LINE.match(part)
        if m:
            rank, pool = int(m.group(1)), m.group(2)

            def explain(pm, rank=rank, pool=pool):
                path = tuple(int(t) for t in pm.group(1).split("/"))
                page = model.pages.index.get(path)
                hit = None if page is None else last_writer(model, actions, states, rank, pool, page)
                tail = "" if hit is None else f", last written by step {hit[0] + 1} ({hit[1]})"
                return f"page {pm.group(1)} (slot {pm.group(2)}{tail})"

            part = _PAGE.sub(explain, part)
        out.append(part)
    return "; ".join(out)

"""The explored state graph of a small model as a networkx DiGraph (GraphML, DOT).

Nodes are states (numbered in breadth-first order, 0 = initial), with a one-line summary
of each rank's tree and the invariants the state breaks; edges are steps labelled with
their action. Stuttering steps are left out. Meant for models of up to a few thousand
states: bigger graphs are refused with a clear error.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx

from tiercheck.errors import UserError
from tiercheck.models.checker import Checker
from tiercheck.spec.model import ACTION_SPECS
from tiercheck.spec.properties import PROPERTIES
from tiercheck.spec.state import DEV_NAMES, HOST_NAMES, live_nodes

DEFAULT_LIMIT = 5000
HARD_LIMIT = 200_000


def _rank_summary(m, rs) -> str:
    parts = []
    for e in live_nodes(rs):
        n = rs.nodes[e]
        bits = DEV_NAMES[n.dev][0].upper() + HOST_NAMES[n.host][0].upper()
        if n.lock:
            bits += f" l{n.lock}"
        if n.href:
            bits += f" r{n.href}"
        parts.append(f"{m.name(e)}[{bits}]")
    tree = " ".join(parts) or "empty"
    return f"{tree} dev_free={rs.dev_free} host_free={rs.host_free}"


def summary(m, s) -> str:
    out = " | ".join(f"r{r}: {_rank_summary(m, rs)}" for r, rs in enumerate(s.ranks))
    if any(s.store):
        out += " | store " + ",".join(str(x) for x in s.store)
    if s.hung:
        out += f" | HUNG in {s.hung}"
    if s.halted:
        out += " | HALTED"
    return out


def build(model, limit: int = DEFAULT_LIMIT, name: str = "model") -> nx.DiGraph:
    """Explore ``model`` completely (at most ``limit`` states) and return its graph."""
    if limit < 1 or limit > HARD_LIMIT:
        raise UserError(f"graph: the state limit must be in [1, {HARD_LIMIT}], got {limit}")
    checker = Checker(model, [], max_states=limit + 1, keep_graph=True)
    res = checker.run()
    if res.distinct > limit:
        raise UserError(
            f"{name}: more than {limit:,} states; graph export is for small models "
            f"(raise the limit with --max-states, up to {HARD_LIMIT:,}, or shrink the model)"
        )
    search = checker.search
    decode = search.codec.decode
    invariants = [p for p in PROPERTIES if p.kind == "invariant"]
    g = nx.DiGraph(name=name)
    depth = 0
    level = 0
    for i, key in enumerate(search.keys):
        while level + 1 < len(search.level_start) and i >= search.level_start[level + 1]:
            level += 1
        depth = level
        s = decode(key)
        broken = [p.name for p in invariants if p.fn(model, s)]
        g.add_node(
            i,
            label=summary(model, s),
            depth=depth,
            initial=search.parent[i] < 0,
            expanded=bool(search.expanded[i]),
            violates=",".join(broken),
        )
    for i, key in enumerate(search.keys):
        if not search.expanded[i]:
            continue
        s = decode(key)
        for a in model.actions(s):
            t = ACTION_SPECS[a.name].effect(model, s, a)
            if t == s:
                continue
            j = search.index[search.codec.encode(t)]
            if g.has_edge(i, j):
                g.edges[i, j]["action"] += f" / {a}"
            else:
                g.add_edge(i, j, action=str(a), kind=model.action_kind(a.name))
    return g


def write(g: nx.DiGraph, path, fmt: str) -> None:
    path = Path(path)
    if fmt == "graphml":
        nx.write_graphml(g, path)
    elif fmt == "dot":
        path.write_text(to_dot(g))
    else:
        raise UserError(f"graph: unknown format {fmt!r} (graphml or dot)")


def _q(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(g: nx.DiGraph) -> str:
    lines = [f"digraph {_q(g.graph.get('name', 'model'))} {{", "  node [shape=box, fontsize=9];"]
    for i, d in g.nodes(data=True):
        style = []
        if d.get("initial"):
            style.append("penwidth=2")
        if d.get("violates"):
            style.append('color=red, fontcolor=red')
        extra = (", " + ", ".join(style)) if style else ""
        label = f"{i}: {d['label']}" + (f"\\nviolates {d['violates']}" if d.get("violates") else "")
        lines.append(f"  {i} [label={_q(label)}{extra}];")
    for i, j, d in g.edges(data=True):
        lines.append(f"  {i} -> {j} [label={_q(d['action'])}];")
    lines.append("}")
    return "\n".join(lines) + "\n"

"""Traces on disk: ITF JSON (as Quint and Apalache write it), one format for everything.

A trace is a list of actions from the initial state; the file also carries every state
(for reading without re-running anything), the model that produced it (as TOML text, so a
replay needs nothing else), and, for counterexamples, the property and message. Each
state records the action that produced it in ``mbt::actionTaken`` and its parameters in
``mbt::nondetPicks`` (Quint's model-based-testing convention).
"""

from __future__ import annotations

import json
from typing import List, Optional

from tiercheck.errors import UserError
from tiercheck.inputs import TRACE_BYTES, read_text, write_atomic
from tiercheck.spec.action import Action
from tiercheck.spec.durable import tracks_lru
from tiercheck.spec.prefetch_end import FREED, REVOKED, TERMINATED, TIMED_OUT
from tiercheck.spec.state import DEV_NAMES, HOST_NAMES, live_nodes

FORMAT = "tiercheck-trace/1"


# --- state <-> ITF values ---------------------------------------------------------------


def _set(items) -> dict:
    return {"#set": sorted(items)}


def _page_set(m, mask: int) -> dict:
    return _set(m.page_name(p) for p in range(m.pages.count) if mask >> p & 1)


def _span(m, start: int, end: int) -> str:
    return f"{m.page_name(start)}..{m.page_name(end)}" if start != end else m.page_name(end)


def rank_to_itf(m, rs) -> dict:
    nodes = []
    for e in live_nodes(rs):
        n = rs.nodes[e]
        extra = {}
        if m.cfg.slots:  # slot identities: the slot of each page's device / host copy
            chain = m.pages.chain(n.start, e)
            extra = {"device_slots": [rs.dslot[p] for p in chain], "host_slots": [rs.hslot[p] for p in chain]}
        nodes.append(
            [
                m.name(e),
                {
                    "pages": [m.page_name(p) for p in m.pages.chain(n.start, e)],
                    "device": DEV_NAMES[n.dev],
                    "host": HOST_NAMES[n.host],
                    "lock_ref": n.lock,
                    "host_ref_counter": n.href,
                    "hit_count": n.hits,
                    "load_back_pending": n.lbp,
                    "released": n.rel,
                    **extra,
                },
            ]
        )
    out = {
        "nodes": {"#map": nodes},
        "device_free": rs.dev_free,
        "host_free": rs.host_free,
        "durable": _page_set(m, rs.durable),
        "write_queue": [_span(m, s, e) for s, e in rs.wq],
        "write_done": rs.wdone,
        "load_queue": [_span(m, s, e) for s, e in rs.lq],
        "load_done": rs.ldone,
        "backup_queue": [_span(m, s, e) for s, e in rs.sq],
        "backup_acks": [{"reported": a.reported, "stored": a.actual} for a in rs.sdone],
        "prefetches": [
            {"request": q[0], "anchor": m.name(q[1]), "from_page": q[2], "pages": q[3], "read": d}
            for q, d in zip(rs.pq, rs.pdone)
        ],
        "release_queue": list(rs.relq),
        "release_plan": [m.name(e) for e in rs.plan],
        "plan_mismatches": rs.mismatch,
        "mirror_release_closed": rs.closed,
        "duplicate_registry": [m.name(e) for e in rs.dups],
        "reclaimed_since_round": [m.name(e) for e in rs.digest],
    }
    if m.cfg.slots:
        out["device_free_slots"] = {"#set": [x for x in range(m.cfg.device_pages) if rs.dfree >> x & 1]}
        out["host_free_slots"] = {"#set": [x for x in range(m.cfg.host_pages) if rs.hfree >> x & 1]}
        out["prefetch_slots"] = [list(x) for x in rs.pslots]
        out["release_slots"] = [list(x) for x in rs.rslots]
    if tracks_lru(m.cfg):  # seed 000's bounded / age-gated durable LRU: (page, age)
        out["durable_lru"] = [[m.page_name(p), age] for p, age in rs.dlru]
    if m.cfg.lru:
        out["lru_order"] = [m.name(e) for e in rs.lru]
        out["wall_clock_order"] = [m.name(e) for e in rs.clock]
    if m.cfg.request_locks:
        out["running_requests"] = [[r, m.name(e)] for r, e in rs.running]
    if rs.pflags:  # prefetch endings (spec/prefetch_end.py): what ended each prefetch so far
        out["prefetch_flags"] = [[n for bit, n in _PREFETCH_FLAGS if f & bit] for f in rs.pflags]
    return out


_PREFETCH_FLAGS = ((TIMED_OUT, "timed_out"), (TERMINATED, "terminated"), (REVOKED, "revoked"), (FREED, "freed"))


def state_to_itf(m, s) -> dict:
    return {
        "ranks": [rank_to_itf(m, rs) for rs in s.ranks],
        "store": [_page_set(m, mask) for mask in s.store],
        "hung": s.hung,
        "halted": s.halted,
    }


VARS = ["ranks", "store", "hung", "halted"]


# --- writing and reading -----------------------------------------------------------------


def write_trace(
    path,
    model,
    model_toml: str,
    actions: List[Action],
    states: list,
    prop: Optional[str] = None,
    message: Optional[str] = None,
    kind: str = "counterexample",
    loop_start: Optional[int] = None,
    extra: Optional[dict] = None,
) -> None:
    """Write a trace; ``states`` has one more entry than ``actions`` (the initial state)."""
    assert len(states) == len(actions) + 1
    out_states = []
    for i, s in enumerate(states):
        item = {"#meta": {"index": i}}
        if i == 0:
            item["mbt::actionTaken"] = "init"
            item["mbt::nondetPicks"] = {}
        else:
            a = actions[i - 1]
            item["mbt::actionTaken"] = a.name
            item["mbt::nondetPicks"] = {
                k: {"tag": "Some", "value": list(v) if isinstance(v, tuple) else v} for k, v in a.params
            }
        item.update(state_to_itf(model, s))
        out_states.append(item)
    meta = {
        "format": "ITF",
        "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
        "source": FORMAT,
        "tiercheck": {
            "kind": kind,
            "model": model_toml,
            "property": prop,
            "message": message,
            "actions": [a.to_json() for a in actions],
        },
    }
    if loop_start is not None:
        meta["tiercheck"]["loop_start"] = loop_start
    if extra:
        meta["tiercheck"].update(extra)
    doc = {"#meta": meta, "vars": VARS, "states": out_states}
    if loop_start is not None:
        doc["loop"] = loop_start  # top level, where the ITF format (and itf-py) reads it
    write_atomic(path, json.dumps(doc, indent=1) + "\n")


class Trace:
    def __init__(self, path: str, doc: dict):
        self.path = path
        self.doc = doc
        meta = doc["#meta"]["tiercheck"]
        self.kind = meta.get("kind", "counterexample")
        self.model_toml = meta["model"]
        self.prop = meta.get("property")
        self.message = meta.get("message")
        self.loop_start = meta.get("loop_start")
        self.meta = meta
        self.actions = [Action.from_json(x) for x in meta["actions"]]
        self.states = doc["states"]


def read_trace(path) -> Trace:
    """Read a trace file; anything malformed is a one-line UserError naming the file."""
    return parse_trace(path, load_json(path, "trace file"))


def parse_trace(path, doc) -> Trace:
    """A trace from its parsed JSON (``read_trace`` without the reading)."""
    try:
        if doc["#meta"]["source"] != FORMAT:
            raise UserError(f"{path}: not a tiercheck trace (source {doc['#meta'].get('source')!r})")
        meta = doc["#meta"]["tiercheck"]
        if not isinstance(meta["model"], str) or not isinstance(meta["actions"], list):
            raise TypeError("model/actions")
        if not isinstance(doc["states"], list) or len(doc["states"]) != len(meta["actions"]) + 1:
            raise ValueError("states and actions do not line up")
        if not all(isinstance(x, dict) for x in doc["states"]):
            raise TypeError("a state is not an object")
        return Trace(str(path), doc)
    except UserError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{path}: corrupt trace ({exc.__class__.__name__}: {exc})") from None


def load_json(path, what: str):
    """A JSON file read through the validation layer (regular file, size cap, depth)."""
    text = read_text(path, what, TRACE_BYTES)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: corrupt {what} (not JSON: {exc})") from None
    except RecursionError:
        raise UserError(f"{path}: corrupt {what} (JSON nested too deeply)") from None


# --- showing what changed -----------------------------------------------------------------


def diff_itf(old: dict, new: dict) -> List[str]:
    """Human lines for what changed between two ITF states, per rank."""
    out = []
    for r, (a, b) in enumerate(zip(old["ranks"], new["ranks"])):
        lines = _diff_rank(a, b)
        out += [f"rank {r}: {line}" for line in lines]
    for r, (a, b) in enumerate(zip(old["store"], new["store"])):
        added = sorted(set(b["#set"]) - set(a["#set"]))
        lost = sorted(set(a["#set"]) - set(b["#set"]))
        if added:
            out.append(f"store {r}: + {', '.join(added)}")
        if lost:
            out.append(f"store {r}: lost {', '.join(lost)}")
    for flag in ("hung", "halted"):
        if new[flag] != old[flag]:
            out.append(f"{flag}: {new[flag]}")
    return out


def _diff_rank(a: dict, b: dict) -> List[str]:
    out = []
    na, nb = dict(map(tuple, a["nodes"]["#map"])), dict(map(tuple, b["nodes"]["#map"]))
    for name in sorted(set(na) | set(nb)):
        x, y = na.get(name), nb.get(name)
        if x is None:
            out.append(f"+ node {name} [{_node_brief(y)}]")
        elif y is None:
            out.append(f"- node {name}")
        else:
            changed = [f"{k} {x[k]}->{y[k]}" for k in y if x.get(k) != y[k] and k != "pages"]
            if x["pages"] != y["pages"]:
                changed.insert(0, f"pages {','.join(x['pages'])}->{','.join(y['pages'])}")
            if changed:
                out.append(f"node {name}: {'; '.join(changed)}")
    for key in list(a) + [k for k in b if k not in a]:  # a field left out when empty is on one side only
        if key == "nodes" or a.get(key) == b.get(key):
            continue
        if key not in a or key not in b:
            out.append(f"{key} {_brief(a.get(key, 'absent'))} -> {_brief(b.get(key, 'absent'))}")
        elif isinstance(a[key], dict) and "#set" in a[key]:
            added = sorted(set(b[key]["#set"]) - set(a[key]["#set"]))
            gone = sorted(set(a[key]["#set"]) - set(b[key]["#set"]))
            parts = ([f"+{', +'.join(map(str, added))}"] if added else []) + (
                [f"-{', -'.join(map(str, gone))}"] if gone else [])
            out.append(f"{key} {' '.join(parts)}")
        else:
            out.append(f"{key} {_brief(a[key])} -> {_brief(b[key])}")
    return out


def _node_brief(n: dict) -> str:
    bits = [f"pages {','.join(n['pages'])}", f"device {n['device']}", f"host {n['host']}"]
    for k in ("lock_ref", "host_ref_counter", "hit_count"):
        if n[k]:
            bits.append(f"{k} {n[k]}")
    if n["load_back_pending"]:
        bits.append("load_back_pending")
    if "device_slots" in n:
        bits.append(f"device slots {n['device_slots']}, host slots {n['host_slots']}")
    return "; ".join(bits)


def _brief(v) -> str:
    return json.dumps(v, separators=(",", ":"))


def format_steps(trace_states: List[dict], actions: List[Action], loop_start=None) -> List[str]:
    lines = ["  0. init"]
    for i, a in enumerate(actions, start=1):
        mark = "  <- loop starts here" if loop_start is not None and i == loop_start else ""
        lines.append(f"{i:3d}. {a}{mark}")
        for d in diff_itf(trace_states[i - 1], trace_states[i]) or ["(nothing changed)"]:
            lines.append(f"       {d}")
    return lines

"""What the trace viewers show, computed once in Python from a stored ITF trace: per step
the action, the state, and the human lines for what changed (models/trace.py diff_itf).
Both `tiercheck show` (text) and the HTML page (models/viewer_html.py) use it."""

from __future__ import annotations

from typing import List, Optional

from tiercheck.errors import UserError
from tiercheck.models.trace import Trace, diff_itf

from tiercheck.toml_compat import tomllib


def model_name(trace: Trace) -> str:
    try:
        raw = tomllib.loads(trace.model_toml)
        return str(raw.get("model", {}).get("name") or "?")
    except tomllib.TOMLDecodeError:
        return "?"


def _check_state(path: str, i: int, st) -> None:
    """The parts of an ITF state the viewers read; anything else is a corrupt trace."""
    if not isinstance(st, dict) or not isinstance(st.get("ranks"), list) or not st["ranks"]:
        raise UserError(f"{path}: corrupt trace (state {i} has no ranks)")
    if not isinstance(st.get("store"), list) or len(st["store"]) != len(st["ranks"]):
        raise UserError(f"{path}: corrupt trace (state {i}: store does not match the ranks)")
    for r, rank in enumerate(st["ranks"]):
        nodes = rank.get("nodes", {}).get("#map") if isinstance(rank, dict) else None
        if not isinstance(nodes, list):
            raise UserError(f"{path}: corrupt trace (state {i}, rank {r}: no nodes map)")
        for item in nodes:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], dict) and isinstance(item[1].get("pages"), list)):
                raise UserError(f"{path}: corrupt trace (state {i}, rank {r}: bad node entry)")


def steps(trace: Trace) -> List[dict]:
    """One entry per state: index, action text, action name, state, change lines."""
    out = []
    states = trace.states
    for i, st in enumerate(states):
        _check_state(trace.path, i, st)
    try:
        for i, st in enumerate(states):
            if i == 0:
                action, name, changes = "init", "init", []
            else:
                a = trace.actions[i - 1]
                action, name = str(a), a.name
                changes = diff_itf(states[i - 1], st) or ["(nothing changed)"]
            out.append({"index": i, "action": action, "name": name, "state": st, "changes": changes})
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise UserError(f"{trace.path}: corrupt trace ({exc.__class__.__name__}: {exc})") from None
    return out


def loop_start(trace: Trace) -> Optional[int]:
    """The state the lasso's cycle returns to (the last state equals it), or None."""
    ls = trace.loop_start
    if ls is None:
        return None
    if not isinstance(ls, int) or isinstance(ls, bool) or not 0 <= ls < len(trace.states) - 1:
        raise UserError(f"{trace.path}: corrupt trace (loop_start {ls!r} outside the trace)")
    return ls


def text_lines(trace: Trace, passed_at: Optional[int] = None) -> List[str]:
    """The trace step by step, what changed per rank; a lasso's cycle is marked, and
    ``passed_at``: the first step whose state is the implementation's, not the spec's (a
    conformance trace passing known disagreements: tiercheck.models.trace_check.check_passing)."""
    ls = loop_start(trace)
    entries = steps(trace)
    head = f"trace {trace.path}: {trace.kind}"
    if trace.prop:
        head += f" of {trace.prop}"
    head += f" in model {model_name(trace)}"
    lines = [head]
    if trace.message:
        lines.append(f"  {trace.message}")
    n = len(entries) - 1
    summary = f"  {n} step{'s' if n != 1 else ''}, {len(entries[0]['state']['ranks'])} rank(s)"
    if ls is not None:
        summary += f"; lasso: steps {ls + 1}..{n} form a cycle back to state {ls}"
    lines.append(summary)
    for sig in trace.meta.get("passes") or ():
        lines.append(f"  passes the known disagreement: {sig}")
    lines.append("")
    for e in entries:
        i = e["index"]
        mark = ""
        if ls is not None and i == ls + 1:
            mark = f"   <- cycle starts (leaves state {ls})"
        if passed_at is not None and i == passed_at:
            mark = ("   <- passed: the implementation disagrees here in a known way and the trace goes on "
                    "from its state (not the spec's)")
        lines.append(f"{i:3d}. {e['action']}{mark}")
        for c in e["changes"]:
            lines.append(f"       {c}")
    if ls is not None:
        if _plain(entries[n]["state"]) == _plain(entries[ls]["state"]):
            lines.append(f"       -> state {n} equals state {ls}: steps {ls + 1}..{n} repeat forever")
        else:
            lines.append(f"       warning: state {n} differs from state {ls}: the stored lasso does not close")
    return lines


def _plain(itf_state: dict) -> dict:
    """A state without its trace bookkeeping (index, action taken, picks)."""
    return {k: v for k, v in itf_state.items() if k != "#meta" and not k.startswith("mbt::")}

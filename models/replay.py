"""Rebuilding and replaying traces by re-executing the spec.

The search keeps only packed keys, parent indices and action positions; a trace is rebuilt
by running the recorded steps again from an initial state. Under symmetry reduction the
search stores orbit representatives, so a concrete trace follows, at each step, the first
enabled action whose successor lies in the recorded successor's orbit.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from tiercheck.errors import UserError


def _effect(m, s, a):
    t = m.next_state(s, a)
    if t is None:
        raise UserError(f"replay: {a} is not enabled")
    return t


def rebuild(m, search, i: int, canon_key=None) -> Tuple[list, list]:
    """(states, actions) of the recorded shortest path from an initial state to state ``i``.

    ``canon_key(state) -> key`` is the search's key function under symmetry (None without).
    """
    path = search.path_to(i)
    keys = search.keys
    decode = search.codec.decode
    if canon_key is None:
        s = decode(keys[path[0]])
        states, actions = [s], []
        for j in path[1:]:
            a = m.actions(s)[search.via[j]]
            s = _effect(m, s, a)
            actions.append(a)
            states.append(s)
        if search.codec.encode(s) != keys[i]:  # the encoding is exact: a mismatch is a bug
            raise RuntimeError("replay diverged from the recorded search")
        return states, actions
    s = next(x for x in m.init_states() if canon_key(x) == keys[path[0]])
    states, actions = [s], []
    for j in path[1:]:
        a, s = step_into(m, s, keys[j], canon_key)
        actions.append(a)
        states.append(s)
    return states, actions


def step_into(m, s, target_key, canon_key):
    """The first enabled action of ``s`` whose successor's orbit key is ``target_key``."""
    for a in m.actions(s):
        t = _effect(m, s, a)
        if t != s and canon_key(t) == target_key:
            return a, t
    raise RuntimeError("no step into the recorded orbit (symmetry is not a symmetry here)")


def final_step(m, s, pos: int, succ_key, prop, canon_key=None):
    """The offending step of a transition-property hit, taken from concrete state ``s``."""
    if canon_key is None:
        a = m.actions(s)[pos]
        return a, _effect(m, s, a)
    for a in m.actions(s):
        t = _effect(m, s, a)
        if t != s and canon_key(t) == succ_key and prop.fn(m, s, a, t):
            return a, t
    raise RuntimeError("no violating step into the recorded orbit")


def replay(m, actions, start=None) -> List:
    """Apply ``actions`` from ``start`` (default: the initial state); every step must be
    enabled. Returns the states, one more than the actions."""
    s = start if start is not None else m.init_states()[0]
    states = [s]
    for a in actions:
        s = _effect(m, s, a)
        states.append(s)
    return states


def lasso_closes(m, actions, loop_start: int, start=None) -> Optional[str]:
    """None when prefix + cycle replays on the spec and the cycle returns to its first
    state; otherwise why not. ``loop_start`` indexes the states (0 = initial state)."""
    try:
        states = replay(m, actions, start)
    except UserError as exc:
        return str(exc)
    if not 0 <= loop_start < len(states):
        return f"loop start {loop_start} outside the trace of {len(states)} states"
    if states[-1] != states[loop_start]:
        return "the cycle does not return to its start state"
    return None


def breaks_at(m, actions, step: int, names) -> List[str]:
    """The safety properties among ``names`` that the spec's own states break at action
    ``step`` (0-based: the invariant in the state after it, the transition property on
    it). The checker searches on past one property's violation for the others', so a
    counterexample may pass through another property's violation, where a replay that
    checks every property stops."""
    from tiercheck.spec.properties import BY_NAME

    states = replay(m, actions[: step + 1])
    out = []
    for name in names:
        p = BY_NAME[name]
        if p.kind == "invariant" and p.fn(m, states[-1]):
            out.append(name)
        elif p.kind == "transition" and p.fn(m, states[-2], actions[step], states[-1]):
            out.append(name)
    return out

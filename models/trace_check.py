"""Traces checked against the spec before anything else reads them.

A trace is a list of actions from the initial state. Each step must name an action of the
spec, with parameters the spec enumerates in that state, and be enabled there; a guard
probe (a step a generated tour marks as one that must be refused) must be a candidate the
spec lists there whose guard is false. Anything else is a bad trace (exit 2) and never
reaches an implementation, so exit 1 from ``replay`` always means the implementation
disagrees with the spec.
"""

from __future__ import annotations

import json
from typing import Iterable, List

from tiercheck.errors import UserError
from tiercheck.spec.action import Action
from tiercheck.spec.model import ACTION_SPECS, ACTIONS

MAX_STEPS = 100_000  # longer than any counterexample or tour trace; keeps a replay bounded


def _key(a: Action) -> str:
    # Parameter order and list-vs-tuple do not matter; values are JSON's.
    return json.dumps(a.to_json(), sort_keys=True)


def _candidates(model, s) -> dict:
    return {_key(a): a for spec in ACTIONS for a in spec.params(model, s)}


def validate(model, actions: List[Action], probes: Iterable[int] = (), where: str = "trace") -> List[Action]:
    """The trace's actions as the spec's own values; UserError "bad trace at step N" otherwise.

    Steps are numbered from 1, as ``show`` and ``replay`` print them.
    """
    probes = set(probes)
    if len(actions) > MAX_STEPS:
        raise UserError(f"{where}: bad trace: {len(actions):,} steps, over the cap of {MAX_STEPS:,}")
    bad = sorted(p for p in probes if not (isinstance(p, int) and 0 <= p < len(actions)))
    if bad:
        raise UserError(f"{where}: bad trace: probe index {bad[0]!r} is not a step of the trace")
    s = model.init_states()[0]
    out = []
    for i, a in enumerate(actions):
        step = f"{where}: bad trace at step {i + 1}"
        if a.name not in ACTION_SPECS:
            raise UserError(f"{step}: unknown action {a.name!r} (known: {', '.join(ACTION_SPECS)})")
        try:
            key = _key(a)
        except (TypeError, ValueError):
            raise UserError(f"{step}: {a.name}: parameters are not plain values") from None
        if i in probes:
            cand = _candidates(model, s).get(key)
            if cand is None:
                raise UserError(f"{step}: {_short(a)}: no such action in this model (parameters out of range)")
            if model.next_state(s, cand) is not None:
                raise UserError(f"{step}: {cand} is marked as a guard probe but the spec enables it here")
            out.append(cand)
            continue
        enabled = {_key(e): e for e in model.actions(s)}
        cand = enabled.get(key)
        if cand is None:
            if key in _candidates(model, s):
                raise UserError(f"{step}: {_short(a)} is not enabled in the spec here")
            raise UserError(f"{step}: {_short(a)}: no such action in this model (parameters out of range)")
        out.append(cand)
        s = model.next_state(s, cand)
    return out


def _short(a: Action, limit: int = 120) -> str:
    try:
        text = str(a)
    except TypeError:  # parameters no spec action has (a set of mixed types)
        text = f"{a.name}{json.dumps({k: v for k, v in a.params})}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_stored(trace, cfg=None):
    """Validate a stored trace (tiercheck.models.trace.Trace) against the model it names
    (or ``cfg``); returns the (model file, spec Model, validated actions)."""
    from tiercheck.models import model_file
    from tiercheck.spec.model import Model

    mf = model_file.parse(model_file.loads(trace.model_toml, f"{trace.path}: its model"), trace.path)
    probes = trace.meta.get("probes", [])
    if not isinstance(probes, list) or not all(type(p) is int for p in probes):
        raise UserError(f"{trace.path}: corrupt trace (probes must be a list of step indices)")
    model = Model(mf.config if cfg is None else cfg(mf.config))
    return mf, model, validate(model, trace.actions, probes, trace.path), set(probes)


def check_passing(trace):
    """A trace that passes known disagreements (``meta.passes``, tiercheck.conformance.distinct):
    (model, the step of the first one, or None). Up to that step every action is validated
    against the spec and the stored states are the spec's; it is the first step whose stored
    state is not the spec's successor (the implementation's state, from which the run went
    on). Past it, as in ``replay``, only the actions' names are validated."""
    from tiercheck.models import model_file
    from tiercheck.models.trace import state_to_itf
    from tiercheck.models.viewer_data import _plain
    from tiercheck.spec.model import Model

    passes = trace.meta.get("passes")
    if not isinstance(passes, list) or not passes or not all(isinstance(p, str) for p in passes):
        raise UserError(f"{trace.path}: corrupt trace (passes must be a non-empty list of signatures)")
    mf = model_file.parse(model_file.loads(trace.model_toml, f"{trace.path}: its model"), trace.path)
    model = Model(mf.config)
    bad = next((a.name for a in trace.actions if a.name not in ACTION_SPECS), None)
    if bad is not None:
        raise UserError(f"{trace.path}: bad trace: unknown action {bad!r}")
    if len(trace.states) != len(trace.actions) + 1:
        raise UserError(f"{trace.path}: corrupt trace ({len(trace.states)} states for {len(trace.actions)} steps)")
    s = model.init_states()[0]
    for i, a in enumerate(trace.actions):
        enabled = {_key(e): e for e in model.actions(s)}
        cand = enabled.get(_key(a))
        t = model.next_state(s, cand) if cand is not None else None
        if t is None or _plain(state_to_itf(model, t)) != _plain(trace.states[i + 1]):
            return model, i + 1
        s = t
    return model, None

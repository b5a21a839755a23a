"""Small builders for spec unit tests: run named actions from the initial state."""

from __future__ import annotations

from tiercheck.spec.action import Action, act
from tiercheck.spec.config import Config
from tiercheck.spec.model import Model


def model(**kw) -> Model:
    base = dict(requests=((1, 2), (1, 3)), device_pages=3, host_pages=2)
    base.update(kw)
    if "variants" in base:
        base["variants"] = frozenset(base["variants"])
    if "faults" in base:
        base["faults"] = frozenset(base["faults"])
    return Model(Config(**base))


def run(m: Model, *steps, state=None):
    """Apply steps given as (name, params) or Action; every step must be enabled."""
    s = state if state is not None else m.init_states()[0]
    for step in steps:
        a = step if isinstance(step, Action) else act(step[0], **step[1])
        assert a in m.actions(s), f"{a} not enabled; enabled: {[str(x) for x in m.actions(s)]}"
        t = m.next_state(s, a)
        assert t is not None
        s = t
    return s


def page(m: Model, *tokens) -> int:
    return m.pages.index[tuple(tokens)]


def node(m: Model, s, *tokens, rank=0):
    return s.ranks[rank].nodes[page(m, *tokens)]

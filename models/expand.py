"""Expanding one state: its invariants, its successors, and the properties of each step.

This is the whole per-state work of the search, shared by the serial search and the
worker processes. It calls the spec only through its public surface (``actions``, the
action effects, ``constraint``, the property functions), in the order the spec lists the
actions, so a successor's position in ``model.actions(s)`` names the step: traces are
rebuilt by re-executing positions (see tiercheck.models.replay).
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Tuple

from tiercheck.spec.model import ACTION_SPECS


class Step(NamedTuple):
    pos: int  # position of the action in model.actions(s)
    name: int  # index of the action name in model.action_names()
    key: object  # packed successor key (canonical under symmetry); see Expander
    stutter: bool  # the step leaves the state unchanged
    viols: Tuple  # ((property, message), ...) of transition properties it breaks


class Record(NamedTuple):
    viols: Tuple  # ((property, message), ...): invariants the state breaks
    expanded: bool  # False: outside Model.constraint, checked but not expanded
    steps: List[Step]
    frees: bool  # some evict step frees a device page on rank 0 (eviction_progress)


class Expander:
    """Per-process expansion of packed states.

    ``encode(state) -> key`` turns a successor into a key (owner side: exact packed int;
    worker side: packed int or an unresolved tuple, see tiercheck.models.parallel).
    ``canon(state) -> state`` maps a state to its orbit representative (symmetry) or is
    None.
    """

    def __init__(self, model, props, decode: Callable, encode: Callable, canon: Optional[Callable] = None):
        self.m = model
        self.invariants = [p for p in props if p.kind == "invariant"]
        self.transitions = [p for p in props if p.kind == "transition"]
        self.decode = decode
        self.encode = encode
        self.canon = canon
        self.name_id = {n: i for i, n in enumerate(model.action_names())}
        self.effects = {n: ACTION_SPECS[n].effect for n in model.action_names()}

    def expand(self, key, open_props=None) -> Record:
        m = self.m
        s = self.decode(key)
        viols = ()
        for p in self.invariants:
            if open_props is None or p.name in open_props:
                msg = p.fn(m, s)
                if msg:
                    viols += ((p.name, msg),)
        if not m.constraint(s):
            return Record(viols, False, [], False)
        steps = []
        frees = False
        encode, canon, name_id, effects = self.encode, self.canon, self.name_id, self.effects
        transitions = [p for p in self.transitions if open_props is None or p.name in open_props]
        dev0 = s.ranks[0].dev_free
        for pos, a in enumerate(m.actions(s)):
            t = effects[a.name](m, s, a)
            if canon is None:
                tkey = encode(t)
                stutter = tkey == key
            else:
                stutter = t == s
                tkey = key if stutter else encode(canon(t))
            tv = ()
            if not stutter:
                for p in transitions:
                    msg = p.fn(m, s, a, t)
                    if msg:
                        tv += ((p.name, msg),)
                if a.name == "evict" and t.ranks[0].dev_free > dev0:
                    frees = True
            steps.append(Step(pos, name_id[a.name], tkey, stutter, tv))
        return Record(viols, True, steps, frees)

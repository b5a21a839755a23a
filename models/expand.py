"""Expanding one state: its invariants, its successors, and the properties of each step.

This is the whole per-state work of the search, shared by the serial search and the
worker processes. It calls the spec only through its public surface (``actions``, the
action effects, ``constraint``, the property functions), in the order the spec lists the
actions, so a successor's position in ``model.actions(s)`` names the step: traces are
rebuilt by re-executing positions (see tiercheck.models.replay).
"""

from __future__ import annotations

from typing import Callable, Optional

from tiercheck.spec.model import ACTION_SPECS


# A step and a record are plain tuples (they cross process boundaries by the million, and
# plain tuples pickle in C). Fields, by index:
#   step:   (pos, name, key, stutter, viols)
#     pos      position of the action in model.actions(s)
#     name     index of the action name in model.action_names()
#     key      packed successor key (orbit representative's under symmetry)
#     stutter  the step leaves the state unchanged
#     viols    ((property, message), ...) of transition properties it breaks
#   record: (viols, expanded, steps, frees)
#     viols    ((property, message), ...): invariants the state breaks
#     expanded False: outside Model.constraint, checked but not expanded
#     steps    [step, ...]
#     frees    some evict step frees a device page on rank 0 (eviction_progress)
POS, NAME, KEY, STUTTER, TVIOLS = range(5)
VIOLS, EXPANDED, STEPS, FREES = range(4)


def failures(props, m, *args) -> tuple:
    """(name, message) of each property of ``props`` that fails on ``args`` (a state, or
    a step ``s, a, t``): the one loop every engine runs on its states and steps."""
    out = ()
    for p in props:
        msg = p.fn(m, *args)
        if msg:
            out += ((p.name, msg),)
    return out


def steps_from_memo(recs, key, open_props):
    """(steps, frees) of a state ``key`` from the memoised engines' step records, in
    order: (name id, successor key with the bits the step passed through cleared, those
    bits, transition violations, frees). The passed bits are completed from ``key``."""
    steps = []
    frees = False
    for pos, (name_id, partial, passed, tv, fr) in enumerate(recs):
        tkey = partial | (key & passed) if type(partial) is int else partial
        if tkey == key:
            steps.append((pos, name_id, tkey, True, ()))
        else:
            if tv and open_props is not None:
                tv = tuple(v for v in tv if v[0] in open_props)
            steps.append((pos, name_id, tkey, False, tv))
            frees = frees or fr
    return steps, frees


class Expander:
    """Per-process expansion of packed states.

    ``codec`` (tiercheck.models.codec) turns a successor into a key (owner side: exact
    packed int; worker side: packed int or an unresolved tuple) and the equal state made
    of interned rank objects, on which the transition properties run (their per-rank
    memo caches then hit by identity).
    ``canon(state) -> state`` maps a state to its orbit representative (symmetry) or is
    None.
    """

    def __init__(self, model, props, codec, canon: Optional[Callable] = None):
        self.m = model
        self.invariants = [p for p in props if p.kind == "invariant"]
        self.transitions = [p for p in props if p.kind == "transition"]
        self.codec = codec
        self.canon = canon
        self.name_id = {n: i for i, n in enumerate(model.action_names())}
        self.effects = {n: ACTION_SPECS[n].effect for n in model.action_names()}

    def state_checks(self, s):
        """(every invariant violation of ``s``, whether it is inside the constraint): the
        per-state part of an expansion, as the memoised engines file it."""
        m = self.m
        return (failures(self.invariants, m, s), bool(m.constraint(s)))

    def expand(self, key, open_props=None) -> tuple:
        m = self.m
        s, sgids = self.codec.decode_gids(key)
        viols = failures([p for p in self.invariants if open_props is None or p.name in open_props], m, s)
        if not m.constraint(s):
            return (viols, False, [], False)
        steps = []
        frees = False
        codec, canon, name_id, effects = self.codec, self.canon, self.name_id, self.effects
        transitions = [p for p in self.transitions if open_props is None or p.name in open_props]
        dev0 = s.ranks[0].dev_free
        for pos, a in enumerate(m.actions(s)):
            t = effects[a.name](m, s, a)
            if canon is None:
                tkey, t = codec.encode_step(t, s, sgids)
                stutter = tkey == key
            else:
                stutter = t == s
                tkey = key if stutter else codec.encode_canonical(canon(t))[0]
            tv = ()
            if not stutter:
                tv = failures(transitions, m, s, a, t)
                if a.name == "evict" and t.ranks[0].dev_free > dev0:
                    frees = True
            steps.append((pos, name_id[a.name], tkey, stutter, tv))
        return (viols, True, steps, frees)

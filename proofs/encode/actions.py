"""The transition relation: one encoding per entry of spec/model.py ACTIONS, derived from it.

Each spec action's parameter enumeration, guard and effect live in a spec module
(spec/write_path.py ...); their encodings have the same names in the proofs module of the
same name (proofs/encode/write_path.py ...). An action enabled only under a Config switch
the proofs do not model (its ``option``, refused by proofs.scope) is encoded as never
enabled, and so is one that only a refused value of a modelled key enables
(prefetch_stop = "timeout"). ``step(ctx, s, name)`` gives the action's parameters (fresh symbols constrained
to the spec's parameter enumeration), its guard (as ``Model.next_state`` applies it: no
step from a hung or halted state, replicated steps wait for a due ready-count round) and
its effect (the successor state as terms over ``s``).
"""

from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple

from ...spec.action import REPLICATED
from ...spec.config import CONSTANTS, UNMODELLED
from ...spec.model import ACTIONS
from ..sym import and_, eq, not_
from . import cp_planner, eviction, load_path, prefetch, prefetch_end, request_locks, scheduler_evict, storage_path, write_path
from .sync import round_due

MODULES = {m.__name__.rsplit(".", 1)[1]: m for m in (cp_planner, eviction, load_path, prefetch, prefetch_end,
                                                      request_locks, storage_path, write_path)}
# Actions of a refused option that another, modelled key also enables (their guard says so).
ALSO_ENABLED = {"local_access": "victim_order"}
# Actions only a setting the proofs refuse enables (spec/config.py UNMODELLED).
VALUE_REFUSED = {name for u in UNMODELLED if u.proofs for name in u.actions}


class ActionEnc(NamedTuple):
    name: str
    kind: str
    params: Callable  # (ctx, s) -> dict of parameter terms
    guard: Callable  # (ctx, s, params) -> Bool
    effect: Callable  # (ctx, s, params) -> SState


def _off_params(ctx, s):
    return {}


def _off_guard(ctx, s, a):
    return False  # only enabled under an option the proofs refuse (proofs.scope)


def _unchanged(ctx, s, a):
    return s


def _encode(spec, gaps: List[str]):
    off = spec.option and not CONSTANTS[spec.option].proofs and spec.name not in ALSO_ENABLED
    if off or spec.name in VALUE_REFUSED:
        return ActionEnc(spec.name, spec.kind, _off_params, _off_guard, _unchanged)
    module = MODULES.get(spec.effect.__module__.rsplit(".", 1)[1])
    fns = [getattr(module, f.__name__, None) for f in (spec.params, spec.guard, spec.effect)]
    if None in fns:
        gaps.append(f"spec action {spec.name!r} has no encoding (proofs/encode/"
                    f"{spec.effect.__module__.rsplit('.', 1)[1]}.py: {spec.params.__name__}, "
                    f"{spec.guard.__name__}, {spec.effect.__name__})")
        return None
    return ActionEnc(spec.name, spec.kind, *fns)


_GAPS: List[str] = []
ENCODINGS = [e for e in (_encode(a, _GAPS) for a in ACTIONS) if e is not None]
BY_NAME: Dict[str, ActionEnc] = {a.name: a for a in ENCODINGS}


def coverage_gaps():
    """Spec actions without an encoding (tests/proofs checks this is empty: the two
    semantics must list the same actions)."""
    return list(_GAPS)


def waits_for_round(name: str) -> bool:
    """A replicated step waits for a due ready-count round (proofs/case_vacuity.py relies
    on this being the guard's only reading of the digests)."""
    return BY_NAME[name].kind == REPLICATED


class Step(NamedTuple):
    name: str
    params: dict
    guard: object  # Bool term: the step is enabled
    post: object  # SState


def step(ctx, s, name: str) -> Step:
    """Also sets ``ctx.held``: the node the step holds a host reference on only while it
    runs (spec/prefetch.py held_during_step; -1: none), which release_safety ignores,
    and ``ctx.evict_held``: what the step's own eviction holds locked (scheduler_evict)."""
    enc = BY_NAME[name]
    params = enc.params(ctx, s)
    ctx.held = prefetch.held_during_step(ctx, s, params) if name == "prefetch_from_storage" else -1
    ctx.evict_held = scheduler_evict.held_while_evicting(ctx, s, name, params)
    guard = and_(eq(s.hung, 0), eq(s.halted, 0), enc.guard(ctx, s, params))
    if waits_for_round(name):
        guard = and_(guard, not_(round_due(ctx, s)))
    post = enc.effect(ctx, s, params)
    return Step(name, params, guard, post)

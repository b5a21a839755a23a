"""The transition relation: one entry per entry of spec/model.py ACTIONS.

``step(ctx, s, name)`` gives the action's parameters (fresh symbols constrained to the
spec's parameter enumeration), its guard (as ``Model.next_state`` applies it: no step
from a hung or halted state, replicated steps wait for a due ready-count round) and its
effect (the successor state as terms over ``s``).
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple

from ...spec.action import ENV, LOCAL, REPLICATED, SYNC
from ...spec.model import ACTION_SPECS
from ..sym import and_, eq, not_
from . import eviction, load_path, prefetch, storage_path, write_path
from .sync import round_due


class ActionEnc(NamedTuple):
    name: str
    kind: str
    params: Callable  # (ctx, s) -> dict of parameter terms
    guard: Callable  # (ctx, s, params) -> Bool
    effect: Callable  # (ctx, s, params) -> SState


ENCODINGS = [
    ActionEnc("insert", REPLICATED, write_path.insert_params, write_path.insert_guard, write_path.insert),
    ActionEnc("write_dma_done", LOCAL, write_path.write_dma_done_params, write_path.write_dma_done_guard, write_path.write_dma_done),
    ActionEnc("writing_check", SYNC, write_path.writing_check_params, write_path.writing_check_guard, write_path.writing_check),
    ActionEnc("evict", REPLICATED, eviction.evict_params, eviction.evict_guard, eviction.evict),
    ActionEnc("load_back", REPLICATED, load_path.load_back_params, load_path.load_back_guard, load_path.load_back),
    ActionEnc("load_dma_done", LOCAL, load_path.load_dma_done_params, load_path.load_dma_done_guard, load_path.load_dma_done),
    ActionEnc("loading_check", SYNC, load_path.loading_check_params, load_path.loading_check_guard, load_path.loading_check),
    ActionEnc("storage_backup_done", LOCAL, storage_path.storage_backup_done_params, storage_path.storage_backup_done_guard, storage_path.storage_backup_done),
    ActionEnc("drain_storage_control_queues", SYNC, storage_path.drain_params, storage_path.drain_guard, storage_path.drain_storage_control_queues),
    ActionEnc("prefetch_from_storage", REPLICATED, prefetch.prefetch_params, prefetch.prefetch_guard, prefetch.prefetch_from_storage),
    ActionEnc("prefetch_io", LOCAL, prefetch.prefetch_io_params, prefetch.prefetch_io_guard, prefetch.prefetch_io),
    ActionEnc("check_prefetch_progress", SYNC, prefetch.check_prefetch_params, prefetch.check_prefetch_guard, prefetch.check_prefetch_progress),
    ActionEnc("store_lose", ENV, storage_path.store_lose_params, storage_path.store_lose_guard, storage_path.store_lose),
    ActionEnc("registry_skew", ENV, storage_path.registry_skew_params, storage_path.registry_skew_guard, storage_path.registry_skew),
]

def _off_params(ctx, s):
    return {}


def _off_guard(ctx, s, a):
    return False  # only enabled with cp_planner, which the proofs refuse (proofs.scope)


def _unchanged(ctx, s, a):
    return s


ENCODINGS.append(ActionEnc("local_access", LOCAL, _off_params, _off_guard, _unchanged))

BY_NAME: Dict[str, ActionEnc] = {a.name: a for a in ENCODINGS}



def coverage_gaps():
    """Spec actions without an encoding, encodings of no spec action, kind mismatches
    (tests/proofs checks this is empty: the two semantics must list the same actions)."""
    out = [f"spec action {n!r} has no encoding" for n in ACTION_SPECS if n not in BY_NAME]
    out += [f"encoding {n!r} is not a spec action" for n in BY_NAME if n not in ACTION_SPECS]
    out += [f"{n}: kind {BY_NAME[n].kind} != spec {ACTION_SPECS[n].kind}"
            for n in BY_NAME if n in ACTION_SPECS and BY_NAME[n].kind != ACTION_SPECS[n].kind]
    return out


class Step(NamedTuple):
    name: str
    params: dict
    guard: object  # Bool term: the step is enabled
    post: object  # SState


def step(ctx, s, name: str) -> Step:
    enc = BY_NAME[name]
    params = enc.params(ctx, s)
    guard = and_(eq(s.hung, 0), eq(s.halted, 0), enc.guard(ctx, s, params))
    if enc.kind == REPLICATED:
        guard = and_(guard, not_(round_due(ctx, s)))
    post = enc.effect(ctx, s, params)
    return Step(name, params, guard, post)

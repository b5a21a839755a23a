"""The specification as a model: init states, enabled actions, next state, properties.

Shaped like stateright's ``Model`` trait: ``actions(state)`` lists the enabled actions as
plain values, ``next_state(state, action)`` applies one. Each entry of ACTIONS names the
code path it models and gives its parameter enumeration, guard and effect.
"""

from __future__ import annotations

from itertools import combinations
from typing import Callable, Iterable, List, NamedTuple, Optional

from . import cp_planner, eviction, load_path, prefetch, prefetch_end, request_locks, storage_path, write_path
from .action import COUNT, ENV, LOCAL, NODE, OP, PAGE, RANK, RANKS, REPLICATED, REQUEST, SYNC, Action
from .config import Config, build_pages
from .prefetch_end import held_by_prefetches
from .properties import BY_NAME, PROPERTIES
from .state import State, initial_state
from .sync import round_due


class ActionSpec(NamedTuple):
    name: str
    kind: str  # REPLICATED | LOCAL | SYNC | ENV (see tiercheck.spec.action)
    signature: dict  # parameter name -> what it names (REQUEST, NODE, ... in spec.action)
    params: Callable  # (model, state) -> iterable of candidate Actions
    guard: Callable  # (model, state, action) -> bool
    effect: Callable  # (model, state, action) -> State
    option: str = ""  # the Config switch without which it is never enabled


_FAIL = {"fail": RANKS}  # replicated steps whose host allocation may fail on some ranks
ACTIONS: List[ActionSpec] = [
    ActionSpec("insert", REPLICATED, {"req": REQUEST, **_FAIL}, write_path.insert_params, write_path.insert_guard, write_path.insert),
    ActionSpec("write_dma_done", LOCAL, {"rank": RANK}, write_path.write_dma_done_params, write_path.write_dma_done_guard, write_path.write_dma_done),
    ActionSpec("writing_check", SYNC, {}, write_path.writing_check_params, write_path.writing_check_guard, write_path.writing_check),
    ActionSpec("evict", REPLICATED, {"node": NODE, **_FAIL}, eviction.evict_params, eviction.evict_guard, eviction.evict),
    ActionSpec("load_back", REPLICATED, {"node": NODE}, load_path.load_back_params, load_path.load_back_guard, load_path.load_back),
    ActionSpec("load_dma_done", LOCAL, {"rank": RANK}, load_path.load_dma_done_params, load_path.load_dma_done_guard, load_path.load_dma_done),
    ActionSpec("loading_check", SYNC, {}, load_path.loading_check_params, load_path.loading_check_guard, load_path.loading_check),
    ActionSpec("storage_backup_done", LOCAL, {"rank": RANK, "pages": COUNT}, storage_path.storage_backup_done_params, storage_path.storage_backup_done_guard, storage_path.storage_backup_done),
    ActionSpec("drain_storage_control_queues", SYNC, {}, storage_path.drain_params, storage_path.drain_guard, storage_path.drain_storage_control_queues),
    ActionSpec("prefetch_from_storage", REPLICATED, {"req": REQUEST, **_FAIL}, prefetch.prefetch_params, prefetch.prefetch_guard, prefetch.prefetch_from_storage),
    ActionSpec("prefetch_io", LOCAL, {"rank": RANK, "op": OP}, prefetch.prefetch_io_params, prefetch.prefetch_io_guard, prefetch.prefetch_io),
    ActionSpec("check_prefetch_progress", SYNC, {"op": OP}, prefetch.check_prefetch_params, prefetch.check_prefetch_guard, prefetch.check_prefetch_progress),
    ActionSpec("prefetch_timeout", LOCAL, {"rank": RANK, "op": OP}, prefetch_end.timeout_params, prefetch_end.timeout_guard, prefetch_end.prefetch_timeout, option="prefetch_stop"),
    ActionSpec("prefetch_read_fails", ENV, {"rank": RANK, "op": OP}, prefetch_end.read_fails_params, prefetch_end.read_fails_guard, prefetch_end.prefetch_read_fails, option="prefetch_read_fail"),
    ActionSpec("prefetch_revoke", REPLICATED, {"op": OP}, prefetch_end.revoke_params, prefetch_end.revoke_guard, prefetch_end.prefetch_revoke, option="prefetch_revoke"),
    ActionSpec("store_lose", ENV, {"rank": RANK, "page": PAGE}, storage_path.store_lose_params, storage_path.store_lose_guard, storage_path.store_lose),
    ActionSpec("registry_skew", ENV, {"rank": RANK}, storage_path.registry_skew_params, storage_path.registry_skew_guard, storage_path.registry_skew),
    ActionSpec("lock_request", REPLICATED, {"req": REQUEST}, request_locks.lock_request_params, request_locks.lock_request_guard, request_locks.lock_request, option="request_locks"),
    ActionSpec("unlock_request", REPLICATED, {"req": REQUEST}, request_locks.unlock_request_params, request_locks.unlock_request_guard, request_locks.unlock_request, option="request_locks"),
    ActionSpec("local_access", LOCAL, {"rank": RANK, "node": NODE}, cp_planner.local_access_params, cp_planner.local_access_guard, cp_planner.local_access, option="cp_planner"),
]

ACTION_SPECS = {spec.name: spec for spec in ACTIONS}
# Options whose actions a conformance profile draws only when the option is on.
_WORKLOAD_OPTIONS = {
    "request_locks": lambda cfg: cfg.request_locks,
    "prefetch_stop": lambda cfg: cfg.prefetch_stop == "timeout",
    "prefetch_read_fail": lambda cfg: cfg.prefetch_read_fail,
    "prefetch_revoke": lambda cfg: cfg.prefetch_revoke,
}


class Model:
    """One bounded instance of the specification."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.pages = build_pages(cfg.requests, cfg.page_size)
        self._fail_sets = self._make_fail_sets()
        self.caches: dict = {}  # see tiercheck.spec.memo

    # -- the Model interface ------------------------------------------------------------

    def init_states(self) -> List[State]:
        return [initial_state(self.cfg, self.pages)]

    def actions(self, s: State) -> List[Action]:
        out = []
        for spec in ACTIONS:
            out += self.enabled(s, spec)
        return out

    def enabled(self, s: State, spec: ActionSpec) -> List[Action]:
        """The enabled actions of one entry of ACTIONS; ``actions(s)`` lists them entry
        by entry, in ACTIONS order (the checker memoises them entry by entry)."""
        return [a for a in self.candidates(s, spec) if spec.guard(self, s, a)]

    def candidates(self, s: State, spec: ActionSpec) -> List[Action]:
        """The actions of one entry that ``enabled`` puts to their guard, in order (the
        checker memoises each guard and effect on its own footprint)."""
        if s.hung or s.halted:
            return []  # the TP group is stuck or has stopped itself
        if spec.kind == REPLICATED and round_due(self, s):
            return []
        return list(spec.params(self, s))

    def next_state(self, s: State, a: Action) -> Optional[State]:
        """The successor, or None when the action is unknown or not enabled."""
        spec = ACTION_SPECS.get(a.name)
        if spec is None or s.hung or s.halted or not spec.guard(self, s, a):
            return None
        if spec.kind == REPLICATED and round_due(self, s):
            return None
        return spec.effect(self, s, a)

    def constraint(self, s: State) -> bool:
        """TLC's CONSTRAINT: states outside the bounds are checked but not expanded.

        A correct protocol never leaves them; a bug variant can (a double free creates
        pages out of nothing, a leaked reference grows forever), and without the bound such
        a model would have infinitely many states.
        """
        cfg = self.cfg
        for rs in s.ranks:
            if not (0 <= rs.dev_free <= cfg.device_pages and 0 <= rs.host_free <= cfg.host_pages):
                return False
            if sum(rs.relq) + held_by_prefetches(rs) > cfg.host_pages:
                return False
            for n in rs.nodes:
                if n is not None and (n.lock > cfg.max_lock or n.href > cfg.max_lock):
                    return False
        return True

    def successors(self, s: State) -> Iterable:
        for a in self.actions(s):
            yield a, ACTION_SPECS[a.name].effect(self, s, a)

    @property
    def properties(self):
        return PROPERTIES

    def property(self, name: str):
        return BY_NAME[name]

    def kind(self, a: Action) -> str:
        return ACTION_SPECS[a.name].kind

    def action_names(self):
        return [spec.name for spec in ACTIONS]

    def profiled_action_names(self):
        """The actions a conformance swarm profile weighs: all but those of a workload
        option that is off (request_locks, the prefetch endings), so that a model without it draws exactly
        what it drew before the option existed. (local_access stays listed whatever the
        configuration, as it always was.)"""
        return [s.name for s in ACTIONS if s.option not in _WORKLOAD_OPTIONS or _WORKLOAD_OPTIONS[s.option](self.cfg)]

    def action_kind(self, name: str) -> str:
        return ACTION_SPECS[name].kind

    # -- helpers the actions share -------------------------------------------------------

    def fail_sets(self):
        """Ranks whose host allocation may fail in one step (alloc_asymmetry fault)."""
        return self._fail_sets

    def _make_fail_sets(self):
        if not self.cfg.fault("alloc_asymmetry") or self.cfg.ranks < 2:
            return ((),)
        ranks = range(self.cfg.ranks)
        subsets = [c for k in range(1, self.cfg.ranks) for c in combinations(ranks, k)]
        return ((),) + tuple(subsets)

    # -- names for humans ----------------------------------------------------------------

    def page_name(self, p: int) -> str:
        path, ps = self.pages.paths[p], self.pages.page_size
        return "/".join(",".join(str(t) for t in path[i : i + ps]) for i in range(0, len(path), ps))

    def name(self, end: int) -> str:
        """A node is named by its last page's token path, e.g. ``1/2/3``."""
        return self.page_name(end) if end >= 0 else "root"

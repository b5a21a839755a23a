"""The CP owner-lane load-back eviction planner.

Before a load-back under context parallelism, each owner lane may lack free pages
(per-owner deficits). The planner picks device victims greedily, without touching the tree:

- a candidate is an unlocked, device-resident node whose children are all evicted or
  already planned (an evictable leaf "after the plan");
- its gain is the sum over owners of min(pages it frees there, remaining deficit there);
- a candidate with no gain may still earn "ancestor unlock" credit: the gain of the nearest
  device ancestor (walking past evicted ones) that would help, since evicting the subtree
  below it is the way to reach it;
- the best candidate is the smallest (-gain, -unlock credit, tie-break key, id): a strict
  total order over rank-replicated state;
- a planned victim turns its nearest device ancestor into a candidate once that ancestor is
  a leaf after the plan ("ancestor unlock").

It stops when every deficit is covered or no candidate helps. The tree is never mutated;
the plan is executed elsewhere, identically on every rank that holds the same state.

Planners behind one interface (``plan``), all returning the identical plan:
- ``NaivePlanner``: rescans every candidate per victim and recomputes its per-owner
  histogram each time with one device->host sync per owner -- the slow seed code,
  O(victims x candidates x cp_size) syncs.
- ``MemoPlanner``: the seed's fix -- histograms memoised per planning call by node id (they
  cannot change while planning) and read with one ``bincount().tolist()``; still rescans.
- ``FastPlanner``: the same memo and single sync, plus lazy greedy selection: gains only
  shrink as deficits shrink, so a heap of possibly-stale gains yields the best candidate
  after re-checking only the top. O(distinct nodes) syncs, near O((V + C) log C) work.
"""

from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from tiercheck.errors import UserError

from .histogram import counts_bincount, counts_per_owner_syncs
from .layout import check_cp_size, check_page_size
from .node import DeviceNode
from .syncs import SyncCounter
from .tiebreak import (
    KNOWN_VARIANTS, VARIANT_LOCAL_TIEBREAK, TieBreak, local_clock_tiebreak, replicated_tiebreak,
)

Counts = Tuple[int, ...]


@dataclass(frozen=True)
class PlanStats:
    """How a plan was reached (not part of the plan's identity)."""

    iterations: int
    histogram_reads: int
    syncs: int
    initial_candidates: int


@dataclass(frozen=True)
class EvictionPlan:
    victims: Tuple[int, ...]  # node ids, in eviction order
    demote: Tuple[bool, ...]  # per victim: True = host copy exists (demote), False = delete
    planned_freed_by_owner: Tuple[int, ...]
    remaining_deficit_by_owner: Tuple[int, ...]
    stats: Optional[PlanStats] = field(default=None, compare=False)

    @property
    def satisfied(self) -> bool:
        return not any(self.remaining_deficit_by_owner)

    def digest(self) -> str:
        """A short fingerprint ranks can exchange to check they agree on the plan."""
        text = repr((self.victims, self.demote, self.planned_freed_by_owner,
                     self.remaining_deficit_by_owner))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _gain(counts: Counts, deficits: Sequence[int]) -> int:
    return sum([c if c < d else d for c, d in zip(counts, deficits)])


class _PlanState:
    """Mutable state of one planning call (subclasses add their own fields)."""

    def __init__(self, remaining: List[int], pool: Dict[int, DeviceNode], syncs: SyncCounter):
        self.remaining = remaining
        self.pool = pool  # candidate id -> node
        self.planned: Set[int] = set()
        self.memo: Dict[int, Counts] = {}
        self.syncs = syncs
        self.reads = 0


class OwnerLanePlanner:
    """The greedy algorithm; subclasses choose how histograms are read and how the best
    candidate is found."""

    name = "abstract"

    def __init__(self, cp_size: int, page_size: int = 1, *,
                 tiebreak: TieBreak = replicated_tiebreak) -> None:
        self.cp_size = check_cp_size(cp_size)
        self.page_size = check_page_size(page_size)
        self.tiebreak = tiebreak

    # -- eligibility -------------------------------------------------------------------
    @staticmethod
    def _is_victim_base(node: DeviceNode) -> bool:
        return node.parent is not None and node.lock_ref <= 0 and node.value is not None

    @classmethod
    def _is_victim_after_plan(cls, node: DeviceNode, planned: Set[int]) -> bool:
        if not cls._is_victim_base(node):
            return False
        for child in node.children.values():
            if child.value is not None and child.id not in planned:
                return False
        return True

    @classmethod
    def evictable_leaves(cls, root: DeviceNode) -> List[DeviceNode]:
        """Unlocked device nodes with no device-resident child, by id."""
        found, stack = [], [root]
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if cls._is_victim_after_plan(node, set()):
                found.append(node)
        return sorted(found, key=lambda n: n.id)

    # -- pieces shared by every planner ------------------------------------------------
    def _counts(self, node: DeviceNode, st: _PlanState) -> Counts:
        raise NotImplementedError

    def _memo_counts(self, node: DeviceNode, st: _PlanState) -> Counts:
        st.reads += 1
        counts = st.memo.get(node.id)
        if counts is None:
            counts = counts_bincount(node.value, self.page_size, self.cp_size, st.syncs)
            st.memo[node.id] = counts
        return counts

    def _unlock_credit(self, node: DeviceNode, st: _PlanState) -> int:
        ancestor = node.parent
        while ancestor is not None and ancestor.parent is not None:  # never the root
            if ancestor.id in st.planned:
                return 0
            if ancestor.value is None:  # already evicted: look further up
                ancestor = ancestor.parent
                continue
            if not self._is_victim_base(ancestor):
                return 0
            credit = _gain(self._counts(ancestor, st), st.remaining)
            if credit > 0:
                return credit
            ancestor = ancestor.parent
        return 0

    def _admit_unlocked_ancestor(self, victim: DeviceNode, st: _PlanState) -> Optional[DeviceNode]:
        """Make the victim's nearest device ancestor a candidate if the plan leaves it a leaf."""
        ancestor = victim.parent
        while ancestor is not None and ancestor.parent is not None:
            if ancestor.id in st.planned:
                return None
            if self._is_victim_after_plan(ancestor, st.planned):
                st.pool[ancestor.id] = ancestor
                return ancestor
            if ancestor.value is not None:  # still held by another device child
                return None
            ancestor = ancestor.parent
        return None

    def _check_deficits(self, deficits: Sequence[int]) -> List[int]:
        values = list(deficits)
        if len(values) != self.cp_size:
            raise UserError(f"expected {self.cp_size} per-owner deficits, got {len(values)}")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int):
                raise UserError(f"deficits must be integers, got {v!r}")
        return [max(0, v) for v in values]

    # -- hooks -------------------------------------------------------------------------
    def _start(self, st: _PlanState) -> None:
        pass

    def _select(self, st: _PlanState) -> Optional[Tuple[DeviceNode, Counts]]:
        raise NotImplementedError

    def _after_victim(self, st: _PlanState, victim: DeviceNode) -> None:
        self._admit_unlocked_ancestor(victim, st)

    # -- the plan ----------------------------------------------------------------------
    def plan(self, root: DeviceNode, deficits: Sequence[int], *,
             candidates: Optional[Iterable[DeviceNode]] = None,
             syncs: Optional[SyncCounter] = None) -> EvictionPlan:
        """Plan victims for ``deficits`` (pages per owner lane) in the tree under ``root``.

        ``candidates`` defaults to the tree's evictable leaves. The result does not depend
        on their order. Node ids must be unique in the tree.
        """
        syncs = syncs if syncs is not None else SyncCounter()
        syncs_at_start = syncs.count
        pool: Dict[int, DeviceNode] = {}
        for node in (self.evictable_leaves(root) if candidates is None else candidates):
            if pool.setdefault(node.id, node) is not node:
                raise ValueError(f"two candidate nodes share id {node.id}")
        st = _PlanState(self._check_deficits(deficits), pool, syncs)
        initial = len(pool)
        freed = [0] * self.cp_size
        victims: List[DeviceNode] = []
        iterations = 0
        if any(st.remaining):
            self._start(st)
        while any(st.remaining):
            iterations += 1
            pick = self._select(st)
            if pick is None:
                break
            best, counts = pick
            victims.append(best)
            st.planned.add(best.id)
            del st.pool[best.id]
            for lane, count in enumerate(counts):
                freed[lane] += count
                st.remaining[lane] = max(0, st.remaining[lane] - count)
            self._after_victim(st, best)
        return EvictionPlan(
            victims=tuple(v.id for v in victims),
            demote=tuple(bool(v.backuped) for v in victims),
            planned_freed_by_owner=tuple(freed),
            remaining_deficit_by_owner=tuple(st.remaining),
            stats=PlanStats(iterations, st.reads, syncs.count - syncs_at_start, initial),
        )


class _ScanPlanner(OwnerLanePlanner):
    """Finds the best candidate by scanning them all, every iteration (as the seed does)."""

    def _select(self, st):
        best = best_key = best_counts = None
        for node in st.pool.values():
            if not self._is_victim_after_plan(node, st.planned):
                continue
            counts = self._counts(node, st)
            gain = _gain(counts, st.remaining)
            unlock = 0
            if gain <= 0:
                unlock = self._unlock_credit(node, st)
                if unlock <= 0:
                    continue
            key = (-gain, -unlock, self.tiebreak(node), node.id)
            if best_key is None or key < best_key:
                best, best_key, best_counts = node, key, counts
        return None if best is None else (best, best_counts)


class NaivePlanner(_ScanPlanner):
    """Rescans, and recomputes every histogram with one sync per owner (the slow seed code)."""

    name = "naive"

    def _counts(self, node, st):
        st.reads += 1
        return counts_per_owner_syncs(node.value, self.page_size, self.cp_size, st.syncs)


class MemoPlanner(_ScanPlanner):
    """The seed's fix: rescans, but each node's histogram is read once (one sync)."""

    name = "memo"
    _counts = OwnerLanePlanner._memo_counts


class FastPlanner(OwnerLanePlanner):
    """Memoised single-sync histograms plus lazy greedy selection from a heap.

    Heap entries are (-gain, tie-break key, id) with a gain that may be stale. Deficits only
    shrink, so a fresh gain is never larger than a stale one: if the top entry's gain is
    still current, no other candidate can beat it. Candidates that are not yet leaves after
    the plan wait outside the heap; only a planned child can change that.
    """

    name = "fast"
    _counts = OwnerLanePlanner._memo_counts

    def _start(self, st):
        st.eligible, st.waiting, st.heap, st.tb = {}, {}, [], {}
        for node in st.pool.values():
            if self._is_victim_after_plan(node, st.planned):
                self._enter(st, node)
            else:
                st.waiting[node.id] = node

    def _tiebreak(self, st, node):
        key = st.tb.get(node.id)
        if key is None:
            key = st.tb[node.id] = self.tiebreak(node)
        return key

    def _enter(self, st, node):
        st.eligible[node.id] = node
        gain = _gain(self._counts(node, st), st.remaining)
        heapq.heappush(st.heap, (-gain, self._tiebreak(st, node), node.id))

    def _select(self, st):
        heap = st.heap
        while heap:
            neg_stale, key, node_id = heap[0]
            node = st.eligible.get(node_id)
            if node is None:  # planned earlier: drop the dead entry
                heapq.heappop(heap)
                continue
            counts = self._counts(node, st)
            gain = _gain(counts, st.remaining)
            if gain != -neg_stale:
                heapq.heapreplace(heap, (-gain, key, node_id))
                continue
            if gain > 0:
                return node, counts
            break  # the top is fresh with no gain, so no candidate has any gain
        # No candidate frees a needed page: fall back to ancestor-unlock credit (rare path).
        best = best_key = None
        for node in st.eligible.values():
            unlock = self._unlock_credit(node, st)
            if unlock > 0:
                key = (-unlock, self._tiebreak(st, node), node.id)
                if best_key is None or key < best_key:
                    best, best_key = node, key
        return None if best is None else (best, self._counts(best, st))

    def _after_victim(self, st, victim):
        del st.eligible[victim.id]
        admitted = self._admit_unlocked_ancestor(victim, st)
        if admitted is not None and admitted.id not in st.eligible:
            st.waiting.pop(admitted.id, None)
            self._enter(st, admitted)


PLANNERS = {cls.name: cls for cls in (NaivePlanner, MemoPlanner, FastPlanner)}


def make_planner(kind: str = "fast", *, cp_size: int, page_size: int = 1,
                 variants: Iterable[str] = ()) -> OwnerLanePlanner:
    """Build a planner by name, with bug variants switched on by name (default: none)."""
    if kind not in PLANNERS:
        raise UserError(f"unknown planner {kind!r}; known: {', '.join(sorted(PLANNERS))}")
    variants = frozenset(variants)
    unknown = variants - KNOWN_VARIANTS
    if unknown:
        raise UserError(f"unknown planner variant(s) {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(sorted(KNOWN_VARIANTS))}")
    tiebreak = local_clock_tiebreak if VARIANT_LOCAL_TIEBREAK in variants else replicated_tiebreak
    return PLANNERS[kind](cp_size, page_size, tiebreak=tiebreak)

"""Context-parallel load-back (seed 004 header): load_back plans its own device evictions
with tiercheck.impl.cp's owner-lane planner, and a per-rank local access clock.

Every rank plans on its own replica, so the victim order must be a strict total order over
replicated state: the cache's victim order (replicated LRU clock or token path) is handed
to the planner as ``access_seq``/``id``. The per-rank local access clock (``local_clock``:
end pages, least recent first, moved by ``local_access`` -- a probe or metrics walk that
only this rank makes) reaches the planner as ``last_access_time``, which only the
``planner-local-tiebreak`` bug variant reads.

Owner lanes (``cp_lanes``): the device pool is striped over cp_lanes owners and a page's
lane is its position on its token path modulo cp_lanes (CP stripes a sequence's pages
round-robin). Each lane has an even share of the pool; a load-back is short on a lane when
its pages there outnumber the lane's free pages, and the planner covers every lane's
deficit. The planner reads lanes from token locations, so the view hands each page the
logical page ``1 + lane + cp_lanes * slot`` (its lane under the CP layout's
``(page - 1) mod cp``, distinct per slot).
"""

from __future__ import annotations

import torch

from tiercheck.impl.cp import CpNode, SyncCounter, make_planner

from .tree import RESIDENT, Node


class CpLoadBack:
    # -- the per-rank local access clock ----------------------------------------------------

    def local_access(self, path) -> int:
        """This rank alone touches a node: it becomes the most recent entry of the local
        clock, and entries of nodes gone from the tree are dropped. Returns 1, or 0 when
        there is no such node or it already is the most recent (nothing would change)."""
        node = self._by_path(path)
        if node is None:
            return 0
        if self.cfg.victim_order == "lru":  # the local touch moves this rank's wall clock
            wall = self.wall_order()
            if wall and wall[-1] == node.end:
                return 0
            self._wall_touch(node)
            return 1
        live = [e for e in self.local_clock if self.tree.node_at(e) is not None]
        if live and live[-1] == node.end:
            return 0
        self.local_clock = [e for e in live if e != node.end] + [node.end]
        return 1

    # -- owner lanes --------------------------------------------------------------------------

    def lane_capacity(self) -> list[int]:
        q, r = divmod(self.cfg.device_pages, self.cfg.cp_lanes)
        return [q + (1 if lane < r else 0) for lane in range(self.cfg.cp_lanes)]

    def _node_lanes(self, node: Node) -> list[int]:
        """Lane of each page of ``node``: its path position (0-based) mod cp_lanes."""
        # The path is in tokens: its depth in pages is its length over the page size.
        first = len(self.tree.path(node)) // self.cfg.layout.page_size - len(node)
        return [(first + k) % self.cfg.cp_lanes for k in range(len(node))]

    def lane_free(self) -> list[int]:
        used = [0] * self.cfg.cp_lanes
        for node in self.tree.nodes():
            if node.dev_slots is not None:
                for lane in self._node_lanes(node):
                    used[lane] += 1
        return [c - u for c, u in zip(self.lane_capacity(), used)]

    def lane_deficits(self, lanes: list[int]) -> list[int]:
        """Per lane, the pages an allocation on ``lanes`` (one entry per page) lacks; one
        lane: the shortfall of the whole pool."""
        if self.cfg.cp_lanes == 1:
            return [max(0, len(lanes) - self.device_pool.available())]
        need = [0] * self.cfg.cp_lanes
        for lane in lanes:
            need[lane] += 1
        return [max(0, n - f) for n, f in zip(need, self.lane_free())]

    def chain_lanes(self, chain: list[Node]) -> list[int]:
        return [lane for x in chain for lane in self._node_lanes(x)]

    # -- planning ---------------------------------------------------------------------------

    def _cp_planner(self):
        planner = getattr(self, "_cp_planner_obj", None)
        if planner is None:
            planner = self._cp_planner_obj = make_planner(
                "fast", cp_size=self.cfg.cp_lanes, page_size=self.layout.page_size,
                variants=self.cfg.variants & {"planner-local-tiebreak"},
            )
        return planner

    def _freeable(self, node: Node) -> bool:
        """A victim must free its device copy without a host write: demoted when backed up,
        deleted when write-through and childless (never orphaning host-only children)."""
        return node.host == RESIDENT or (not self.cfg.write_back and not node.children)

    def _planner_view(self, protected: set[int]) -> tuple[CpNode, dict[int, Node]]:
        """The tree as the planner reads it. Nodes it must not choose (on the load's path,
        locked, or not freeable) are pinned (lock_ref 1); ids and access_seq follow the
        replicated victim order; last_access_time is the local clock position (-1: never)."""
        order = sorted(self.tree.nodes(), key=self._order)
        ids = {id(n): i for i, n in enumerate(order)}
        local = {e: float(i) for i, e in enumerate(self.local_clock)}
        ps, cp = self.layout.page_size, self.cfg.cp_lanes
        dev = self.device_pool.device
        root = CpNode(-1)
        by_id: dict[int, Node] = {}
        stack = [(self.tree.root, root)]
        while stack:
            real, view = stack.pop()
            for child in real.children.values():
                i = ids[id(child)]
                value = None
                if child.dev_slots is not None:
                    logical = [1 + lane + cp * s for lane, s in zip(self._node_lanes(child), child.dev_slots)]
                    locs = [q * ps + k for q in logical for k in range(ps)]
                    value = torch.tensor(locs, dtype=torch.int64, device=dev)
                pinned = child.lock_ref > 0 or id(child) in protected or not self._freeable(child)
                v = CpNode(i, value, lock_ref=int(pinned), backuped=child.host == RESIDENT,
                           access_seq=i, last_access_time=local.get(child.end, -1.0))
                view.add_child(v)
                by_id[i] = child
                stack.append((child, v))
        return root, by_id

    def _cp_make_room(self, node: Node, deficits: list[int]) -> bool:
        """Plan victims that cover every lane's deficit and evict them (all or nothing:
        nothing is evicted when the plan cannot cover it). True when room is made."""
        protected = {id(n) for n in self.tree.path_to_root(node)}
        root, by_id = self._planner_view(protected)
        syncs = SyncCounter()
        plan = self._cp_planner().plan(root, deficits, syncs=syncs)
        self.cp_last_plan = [self.tree.path(by_id[i]) for i in plan.victims]
        if not plan.satisfied:
            return False
        for i in plan.victims:
            self._evict_on_rank(by_id[i])
        return True

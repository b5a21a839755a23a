"""Context-parallel load-back (seed 004 header): load_back plans its own device evictions
with tiercheck.impl.cp's owner-lane planner, and a per-rank local access clock.

Every rank plans on its own replica, so the victim order must be a strict total order over
replicated state: the cache's victim order (replicated LRU clock or token path) is handed
to the planner as ``access_seq``/``id``. The per-rank local access clock (``local_clock``:
end pages, least recent first, moved by ``local_access`` -- a probe or metrics walk that
only this rank makes) reaches the planner as ``last_access_time``, which only the
``planner-local-tiebreak`` bug variant reads.

The HiCache device pool is one owner lane here (cp_size 1): the deficit is the pages the
load is short of. The owner-lane striping itself is tiercheck.impl.cp's business.
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

    # -- planning ---------------------------------------------------------------------------

    def _cp_planner(self):
        planner = getattr(self, "_cp_planner_obj", None)
        if planner is None:
            planner = self._cp_planner_obj = make_planner(
                "fast", cp_size=1, page_size=self.layout.page_size,
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
        ps = self.layout.page_size
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
                    locs = [s * ps + k for s in child.dev_slots for k in range(ps)]
                    value = torch.tensor(locs, dtype=torch.int64, device=dev)
                pinned = child.lock_ref > 0 or id(child) in protected or not self._freeable(child)
                v = CpNode(i, value, lock_ref=int(pinned), backuped=child.host == RESIDENT,
                           access_seq=i, last_access_time=local.get(child.end, -1.0))
                view.add_child(v)
                by_id[i] = child
                stack.append((child, v))
        return root, by_id

    def _cp_make_room(self, node: Node, total: int) -> bool:
        """Plan victims that free the pages ``total`` lacks and evict them (all or nothing:
        nothing is evicted when the plan cannot cover the deficit). True when room is made."""
        deficit = total - self.device_pool.available()
        protected = {id(n) for n in self.tree.path_to_root(node)}
        root, by_id = self._planner_view(protected)
        syncs = SyncCounter()
        plan = self._cp_planner().plan(root, [deficit], syncs=syncs)
        self.cp_last_plan = [self.tree.path(by_id[i]) for i in plan.victims]
        if not plan.satisfied:
            return False
        for i in plan.victims:
            self._evict_on_rank(by_id[i])
        return True

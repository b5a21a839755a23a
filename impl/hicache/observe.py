"""Observing one rank: snapshot() (plain data, comparable across ranks and runs),
verify() (every resident copy's bytes, and pool ownership), metrics()."""

from __future__ import annotations

from tiercheck.impl.kvdata import expected_pages, verify_pages
from tiercheck.impl.storage import codes, rank_key

from . import metrics as mt


class Inspect:
    def _p(self, h: str) -> tuple:
        return self.reg.path[h]

    def snapshot(self, store: bool = True) -> dict:
        """Plain data: nodes by end path; pools; durable pages; queues with this rank's
        done counts; prefetches; release queue; mirror-release and reclaim state; what the
        rank's store holds (``store=False`` skips the storage query)."""
        p = self._p
        lru = self.cfg.victim_order == "lru"
        nodes = {}
        for n in self.tree.nodes():
            nodes[p(n.end)] = {
                "start": p(n.start),
                "pages": len(n),
                "parent": p(n.parent.end) if n.parent is not self.tree.root else None,
                "dev": n.dev,
                "host": n.host,
                "lock_ref": n.lock_ref,
                "host_ref": n.host_ref,
                "hit_count": n.hit_count,
                "load_back_pending": n.lbp,
                "released": n.released,
                # slot ids relative to their pool (device slots from 0, host slots from 0)
                "dev_slots": self._offsets(self.device_pool, n.dev_slots),
                "host_slots": self._offsets(self.host_pool, n.host_slots),
            }
        return {
            "rank": self.rank,
            "nodes": dict(sorted(nodes.items())),
            "dev_free": self.device_pool.available(),
            "host_free": self.host_pool.available(),
            "durable": sorted(p(h) for h in self.durable),
            # the durable LRU, least recently marked first: (page, drain rounds since marked)
            "durable_lru": [(p(h), self.drain_round - r) for h, r in self.durable.items()],
            "wq": [(p(o.pages[0]), p(o.pages[-1])) for o in self.wq],
            "wdone": self._wdone(),
            "lq": [(p(o.pages[0]), p(o.anchor_end)) for o in self.lq],
            "ldone": self._ldone(),
            "sq": [(p(o.pages[0]), p(o.pages[-1])) for o in self.sq],
            "sdone": self._sdone(),
            "sstored": self._sstored(),  # what each finished backup really stored
            "pq": [
                (o.req, p(o.anchor_end) if o.anchor_end else None, o.k, len(o.pages)) for o in self.pq
            ],
            "pdone": [o.done if o.settled and o.done is not None else -1 for o in self.pq],
            "relq": [len(s) for s in self.relq],
            "plan": [p(e) for e in self.plan],
            "mismatch": self.mismatch,
            "closed": self.closed,
            "dups": [p(e) for e in self.dups],
            "victims": [p(e) for e in self.victims],
            "last_victims": [p(e) for e in self.last_victims],
            # the reclaim digest as the next ready-count round puts it on the wire: [x, -x]
            # in digest_bits-wide integers ([] when this rank does not track one)
            "digest_pair": self._digest_fields(),
            "digest_bits": self.cfg.wire_bits,
            "reclaimed": [p(e) for e in self.reclaimed],  # the last 64 reclaim victims
            # per-rank local access order (CP), or under LRU this rank's wall-clock order
            "clock": [p(e) for e in (self.wall_order() if lru else self.local_clock)],
            # the replicated LRU order (victim_order "lru"), least recent first
            "lru": [p(n.end) for n in sorted(self.tree.nodes(), key=self._order_lru)] if lru else [],
            "cp_last_plan": list(self.cp_last_plan),
            "running": sorted((list(r), p(e)) for r, e in self.running.items()),
            "store": self._store_contents() if store else None,
            "dev_free_slots": self._offsets(self.device_pool, self.device_pool.allocator.free_slots()),
            "host_free_slots": self._offsets(self.host_pool, self.host_pool.allocator.free_slots()),
            "pq_slots": [[] if o.freed else self._offsets(self.host_pool, o.slots) for o in self.pq],
            # per prefetch: timed out 1, terminated 2, revoked 4, freed early 8
            "pflags": [o.timed_out | o.terminated << 1 | o.revoked << 2 | o.freed << 3 for o in self.pq],
            "relq_slots": [self._offsets(self.host_pool, s) for s in self.relq],
        }

    @staticmethod
    def _offsets(pool, slots):
        return None if slots is None else [s - pool.base for s in slots]

    def _store_contents(self) -> list[tuple] | None:
        """Pages whose key (this rank's namespace) the store holds, among known pages."""
        if not self.cfg.storage:
            return None
        known = list(self.reg.path)
        if not known:
            return []
        res = self.backend.batch_exists([rank_key(h, self.rank) for h in known])
        return sorted(self.reg.path[h] for h, r in zip(known, res) if r == codes.EXISTS)

    def metrics_dict(self) -> dict:
        ps = self.layout.page_size
        used = self.host_pool.num_pages - self.host_pool.available()
        return self.metrics.as_dict(
            {mt.HOST_USED: used * ps, mt.HOST_TOTAL: self.host_pool.num_pages * ps}
        )

    # -- verify ---------------------------------------------------------------------------

    def verify(self, check_store: bool = True) -> list[str]:
        """Problems found, [] when every resident copy holds the right bytes and every
        allocated slot has exactly one owner."""
        out: list[str] = []
        dev_owned: list[int] = []
        host_owned: list[int] = []
        for n in self.tree.nodes():
            name = self._p(n.end)
            if n.lock_ref < 0 or n.host_ref < 0:
                out.append(f"node {name}: lock_ref {n.lock_ref}, host_ref {n.host_ref}")
            if n.dev != "absent":
                dev_owned += n.dev_slots or []
            if n.host != "absent":
                host_owned += n.host_slots or []
            if n.dev == "resident":
                out += self._wrong_bytes(name, "device", self.device_pool, n.dev_slots, n.pages)
            if n.host == "resident":
                out += self._wrong_bytes(name, "host", self.host_pool, n.host_slots, n.pages)
            if n.dev != "resident" and n.host != "resident":
                out.append(f"node {name}: no usable copy (device {n.dev}, host {n.host})")
        for op in self.pq:
            host_owned += op.slots
        for slots in self.relq:
            host_owned += slots
        out += self._ownership("device", self.device_pool, dev_owned)
        out += self._ownership("host", self.host_pool, host_owned)
        if check_store and self.cfg.storage:
            out += self._verify_store()
        return [f"rank {self.rank}: {m}" for m in out]

    def _wrong_bytes(self, name, pool_name: str, pool, slots, pages) -> list[str]:
        """One line naming the pool and, per bad slot, the page it should hold."""
        bad = set(verify_pages(pool, slots, pages, self.content_rank))
        if not bad:
            return []
        where = ", ".join(f"page {'/'.join(map(str, self._p(h)))} (slot {s})"
                          for s, h in zip(slots, pages) if s in bad)
        return [f"node {name}: wrong bytes in the {pool_name} pool: {where}"]

    @staticmethod
    def _ownership(what: str, pool, owned: list[int]) -> list[str]:
        out = []
        seen: set[int] = set()
        dup = sorted({s for s in owned if s in seen or seen.add(s)})
        if dup:
            out.append(f"{what} slots {dup} have more than one owner")
        allocated = set(pool.allocator.allocated_slots())
        leaked = sorted(allocated - seen)
        if leaked:
            out.append(f"{what} slots {leaked} are allocated but owned by nobody (leak)")
        freed = sorted(seen - allocated)
        if freed:
            out.append(f"{what} slots {freed} are owned but free (use after free)")
        try:
            pool.allocator.check()
        except Exception as exc:  # noqa: BLE001 -- reported, not raised
            out.append(f"{what} pool: {exc}")
        return out

    def _verify_store(self) -> list[str]:
        """The bytes of every page this rank stored, and every durable page (in the
        namespace reads use) present unless the store was told to lose it."""
        out = []
        inflight = {h for o in self.sq if o.ack is None for h in o.pages}
        check = sorted(self.stored - inflight)
        if check:
            got = expected_pages(self.layout, check, self.content_rank)
            outs = [g.clone() for g in got]
            for t in outs:
                t.fill_(-9.0)
            res = self.backend.batch_get([rank_key(h, self.rank) for h in check], outs)
            for h, r, o, g in zip(check, res, outs, got):
                if r < 0:
                    continue  # gone (store eviction / loss): a miss, never served wrong
                if not bool((o.view(-1) == g.view(-1)).all()):
                    out.append(f"store: page {self._p(h)} holds wrong bytes")
        durable = sorted(h for h in self.durable if h not in self.lost)
        if durable:
            res = self.backend.batch_exists([rank_key(h, self.source_rank) for h in durable])
            missing = [self._p(h) for h, r in zip(durable, res) if r == codes.ABSENT]
            if missing:
                out.append(f"store: durable pages {missing} are not in the store")
        return out

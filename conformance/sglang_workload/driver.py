"""Serve a traffic shape on one SGLang HiCache through its scheduler-facing entry points.

Per request, what SGLang's scheduler does: ``match_prefix``; a storage prefetch of what
neither tier holds (``prefetch_from_storage``, then ``check_prefetch_progress`` each
step until done, ``pop_prefetch_loaded_span``); ``load_back`` of the host hit; device
slots (``evict`` with SGLang's LRU when short), the KV rows, ``insert`` and
``flush_pending_backups``; the request's prefix stays locked while it runs
(``decode_steps`` steps). Every step ends with ``check_hicache_events`` (the fused
ready-count all-reduce, write/load acks, the storage drain). Requests run
``concurrency`` at a time.

Measurements are observation only (wrappers that count and return what SGLang
returned): D->H backups admitted / rejected (``_execute_kv_backup`` returning host
slots / None), tokens the storage thread wrote, prefetch tokens found in storage vs
loaded, and host-pool occupancy after every step.
"""

from __future__ import annotations

import threading
from array import array
import time
from dataclasses import dataclass, field

import torch

from .engine import Engine
from .traffic import Traffic


@dataclass
class Counters:
    backup_admitted: int = 0  # tokens
    backup_rejected: int = 0
    stored_tokens: int = 0  # tokens the storage thread wrote (completed_tokens of each op)
    prefetch_requested: int = 0  # tokens asked from storage (beyond device + host match)
    prefetch_hit: int = 0  # of those, found in storage
    prefetch_loaded: int = 0  # of those, brought into the host pool and used
    prompt: int = 0
    device_hit: int = 0
    host_hit: int = 0
    computed: int = 0
    deferred: int = 0  # admissions retried for want of device room
    steps: int = 0
    # (step, used, mirror, host_only, writing, releasable): host tokens by what they hold;
    # mirror = host copy of a device-resident node, releasable = of those, release candidates
    occupancy: list = field(default_factory=list)


class Observer:
    """Counting wrappers on one engine's cache (they never change a result)."""

    def __init__(self, eng: Engine, c: Counters):
        self.eng, self.c = eng, c
        cache, cc = eng.cache, eng.cc
        backup = cache._execute_kv_backup

        def counted_backup(node_id, device_value, *args, **kwargs):
            out = backup(node_id, device_value, *args, **kwargs)
            if out is None:
                c.backup_rejected += len(device_value)
            else:
                c.backup_admitted += len(device_value)
            return out

        cache._execute_kv_backup = counted_backup
        if cc.enable_storage and not eng.buffer_mode:
            lock = threading.Lock()
            page_backup = cc._page_backup

            def counted_page_backup(operation):
                out = page_backup(operation)
                with lock:
                    c.stored_tokens += operation.completed_tokens
                return out

            cc._page_backup = counted_page_backup

    def sample(self, step: int) -> None:
        eng = self.eng
        mirror = host_only = writing = releasable = 0
        mr = getattr(eng.cache, "mirror_release", None)  # the patch's mechanism, when on
        for x, _ in eng.nodes():
            cd = x.component_data[eng.FULL]
            if cd.host_value is None:
                continue
            n = len(cd.host_value)
            if x.write_through_pending_id is not None:
                writing += n
            elif cd.value is not None:
                mirror += n
                if mr is not None and mr._is_candidate(x):
                    releasable += n
            else:
                host_only += n
        used = eng.host_capacity - eng.host_pool.available_size()
        self.c.occupancy.append((step, used, mirror, host_only, writing, releasable))


@dataclass
class Running:
    node: object
    lock: object
    left: int


class Driver:
    def __init__(self, eng: Engine, concurrency: int = 2, decode_steps: int = 4,
                 prefetch_wait_steps: int = 2000):
        self.eng = eng
        self.c = Counters()
        self.obs = Observer(eng, self.c)
        self.concurrency = concurrency
        self.decode_steps = decode_steps
        self.prefetch_wait_steps = prefetch_wait_steps
        self.running: list[Running] = []
        self.keys: dict[str, int] = {}  # L3 key -> its page's token (for the store check)
        self._rid = 0

    # -- one scheduler iteration -------------------------------------------------------

    def step(self) -> None:
        self.eng.cache.check_hicache_events()
        self.c.steps += 1
        self.obs.sample(self.c.steps)

    def _finish_some(self) -> None:
        still = []
        for r in self.running:
            r.left -= 1
            if r.left <= 0:
                self.eng.cache.dec_lock_ref(r.node, r.lock)
            else:
                still.append(r)
        self.running = still

    def run(self, rounds) -> Counters:
        self.round_steps = []
        for rnd in rounds:
            self.round_steps.append(-self.c.steps)
            for req in rnd:
                while len(self.running) >= self.concurrency:
                    self.step()
                    self._finish_some()
                while not self.admit(req.full, len(req.prompt)):
                    self.c.deferred += 1
                    if not self.running:
                        raise RuntimeError("a request does not fit the device pool with nothing running")
                    self.step()
                    self._finish_some()
            self.round_steps[-1] += self.c.steps
        while self.running:
            self.step()
            self._finish_some()
        self.settle()
        return self.c

    def settle(self, max_steps: int = 3000) -> None:
        """Steps until every write and storage backup has acked (the storage thread may
        still be writing when the traffic ends)."""
        cache = self.eng.cache
        for _ in range(max_steps):
            busy = cache.ongoing_write_through or cache.ongoing_backup or cache.ongoing_load_back
            if not busy:
                return
            self.step()
            time.sleep(0.002)

    # -- admission -----------------------------------------------------------------------

    def _match(self, tokens):
        from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams

        return self.eng.cache.match_prefix(MatchPrefixParams(key=self.eng.key(tokens)))

    def _prefetch(self, tokens, m) -> None:
        from sglang.srt.mem_cache.base_prefix_cache import CacheRequestHandle

        cache = self.eng.cache
        matched = m.device_prefix_len + m.host_hit_length
        rest = array("q", tokens[matched:])  # SGLang keys are int64 arrays
        if not rest:
            return
        self._rid += 1
        handle = CacheRequestHandle(f"r{self._rid}", 0)
        self.c.prefetch_requested += len(rest)
        anchor = m.last_host_node
        if not (cache.is_backuped(anchor) or cache.is_root(anchor)):
            return  # SGLang's scheduler skips L3 when the host prefix is not contiguous
        cache.prefetch_from_storage(handle, anchor, rest, cache.get_last_hash_value(anchor), None,
                                    matched_prefix_tokens=array("q", tokens[:matched]))
        info = cache.ongoing_prefetch.get(handle)
        op = info.operation if info is not None else None
        for _ in range(self.prefetch_wait_steps):
            if cache.check_prefetch_progress(handle):
                break
            self.step()
            time.sleep(0.001)
        else:
            cache.release_aborted_request(handle)
        if op is not None:
            self.c.prefetch_hit += op.storage_hit_count
        loaded, _ = cache.pop_prefetch_loaded_span(handle)
        self.c.prefetch_loaded += loaded
        cache.finish_storage_prefetch_admission(handle, fulfilled_tokens=loaded, reason=None)

    def admit(self, full, prompt_len: int) -> bool:
        """Prefill ``full`` (the prompt and its output, inserted at once) and keep it
        running; False when the device has no room (nothing changed then)."""
        from sglang.srt.mem_cache.base_prefix_cache import InsertParams

        eng, cache, c = self.eng, self.eng.cache, self.c
        m = self._match(full)
        if eng.setup.storage:
            self._prefetch(full[:prompt_len], m)
            m = self._match(full)
        host_hit = 0
        if m.host_hit_length > 0:
            if cache.load_back(m.best_match_node):
                host_hit = m.host_hit_length
                cache.ready_to_load_host_cache()
            m = self._match(full)
        dev = m.device_prefix_len
        anchor = m.last_device_node
        hold = cache.inc_lock_ref(anchor).to_dec_params()  # the prefix survives the eviction below
        try:
            slots = eng.alloc(len(full) - dev)
        finally:
            cache.dec_lock_ref(anchor, hold)
        if slots is None:
            return False
        prefix = cache.path_device_indices(anchor).to(torch.int64)
        assert len(prefix) == dev, (len(prefix), dev)
        eng.write_kv(slots, full[dev:])
        cache.insert(InsertParams(key=eng.key(full), value=torch.cat([prefix, slots]), prev_prefix_len=dev))
        cache.flush_pending_backups()
        node = self._match(full).last_device_node
        self.running.append(Running(node, cache.inc_lock_ref(node).to_dec_params(), self.decode_steps))
        for k, t in zip(eng.page_keys(full), full):
            self.keys.setdefault(k, t)
        pre = min(dev, prompt_len)
        c.prompt += prompt_len
        c.device_hit += max(0, pre - host_hit)
        c.host_hit += min(host_hit, pre)
        c.computed += max(0, prompt_len - dev)
        return True


def serve(eng: Engine, t: Traffic, concurrency: int = 2, decode_steps: int = 4) -> Driver:
    d = Driver(eng, concurrency, decode_steps)
    d.run(t.rounds())
    return d

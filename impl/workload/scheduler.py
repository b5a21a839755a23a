"""A continuous-batching scheduler over the HiCache driver API.

Up to ``concurrency`` requests are in flight. Each scheduler step:
  1. admit waiting requests: match_prefix; when the cached prefix is short and storage is
     on, start a prefetch from storage (the request waits until it is retired);
  2. check_prefetch_progress of every prefetch in flight (wait_complete: retired once
     every rank's read finished); the tokens it brought count as storage hits;
  3. decode: one step per output token (or ``decode_steps``); a finished request inserts
     prompt + output (cache_finished_req) and drops the lock its prefill took;
  4. prefill ready requests up to ``max_prefill_tokens`` computed tokens per step (at
     least one request; SGLang's max_prefill_tokens): match again, load back the host part of the hit
     (H->D, the load evicts device pages itself when needed), insert the prompt (the
     insert evicts LRU device leaves under pressure; write-through stages to host);
  5. one sync round (check_events: writing_check, loading_check, storage drain);
  6. the forward pass: a ForwardModel sleeps for the step's GPU time.
Counted per request: tokens served from device, host, storage, and computed.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field

from tiercheck.errors import UserError
from tiercheck.impl.hicache import DeviceFullError, ProtocolError
from tiercheck.impl.hicache import metrics as mt

from .sessions import Request


@dataclass(frozen=True)
class ForwardModel:
    """GPU time of a step, as a sleep: ``prefill_us`` per computed prompt token and
    ``step_us`` per step with a request running. Sleeping (not CPU work) leaves the cores
    to the copy and storage threads, as a GPU computing would. Zero: no forward time."""

    prefill_us: float = 0.0
    step_us: float = 0.0

    def __post_init__(self) -> None:
        if self.prefill_us < 0 or self.step_us < 0:
            raise UserError("forward model: times must be non-negative")

    def seconds(self, computed_tokens: int, running: bool) -> float:
        return (computed_tokens * self.prefill_us + (self.step_us if running else 0.0)) * 1e-6


@dataclass
class RoundStats:
    requests: int = 0
    prompt_tokens: int = 0
    device_hit: int = 0  # tokens
    host_hit: int = 0  # tokens loaded back from the host pool (not brought by a prefetch)
    storage_hit: int = 0  # tokens prefetched from storage and loaded back
    computed: int = 0  # prompt tokens the forward pass computed
    prefetches: int = 0
    prefetch_wasted: int = 0  # prefetched tokens not loaded back (the load failed)
    load_back_failed: int = 0
    device_full_retries: int = 0
    steps: int = 0
    wall_s: float = 0.0
    forward_s: float = 0.0  # modelled GPU time slept (part of wall_s)
    round_s: list = field(default_factory=list)  # seconds of every sync round (check_events)

    @property
    def cache_s(self) -> float:
        """Wall time without the modelled forward pass."""
        return self.wall_s - self.forward_s

    def pct(self, what: str) -> float:
        return 100.0 * getattr(self, what) / max(self.prompt_tokens, 1)


class _Live:
    __slots__ = ("req", "state", "storage", "left")

    def __init__(self, req: Request) -> None:
        self.req = req
        self.state = "ready"
        self.storage = 0  # tokens its prefetch brought into the host pool
        self.left = 0  # decode steps left


class Scheduler:
    """Drives one cache (a HiCacheGroup). ``sampler``: called after every step with
    (step, seconds since the first step); ``round_hook``: wraps every check_events call
    (for the overhead measurement), default plain."""

    MAX_STUCK_STEPS = 200

    def __init__(self, group, concurrency: int = 8, decode_steps: int | None = None,
                 forward: ForwardModel | None = None, sampler=None, round_hook=None,
                 max_prefill_tokens: int | None = None) -> None:
        if concurrency < 1:
            raise UserError(f"scheduler: concurrency must be at least 1, got {concurrency}")
        if decode_steps is not None and decode_steps < 1:
            raise UserError(f"scheduler: decode_steps must be at least 1, got {decode_steps}")
        if max_prefill_tokens is not None and max_prefill_tokens < 1:
            raise UserError(f"scheduler: max_prefill_tokens must be at least 1, got {max_prefill_tokens}")
        self.max_prefill_tokens = max_prefill_tokens
        self.g = group
        self.ps = group.cfg.layout.page_size
        self.concurrency = concurrency
        self.decode_steps = decode_steps
        self.forward = forward or ForwardModel()
        self.sampler = sampler
        self.round_hook = round_hook
        self.prefetching = group.cfg.storage and group.cfg.prefetch
        self.step_no = 0
        self.t0: float | None = None

    # -- the driver API, with the counters read on rank 0 ---------------------------------

    def _counter(self, key: str) -> int:
        return self.g.metrics()[0].get(key, 0)

    @staticmethod
    def _agreed(results: list, what: str):
        if any(r != results[0] for r in results[1:]):
            raise ProtocolError(f"scheduler: ranks answered {what} differently: {results}")
        return results[0]

    # -- running a round -------------------------------------------------------------------

    def run(self, requests: list[Request]) -> RoundStats:
        st = RoundStats()
        waiting = collections.deque(requests)
        live: list[_Live] = []
        pf: list[_Live] = []  # prefetches in flight, in the order of the ranks' queues
        stuck = 0
        start = time.perf_counter()
        if self.t0 is None:
            self.t0 = start
        while waiting or live:
            before = (len(waiting), len(live), st.requests)
            computed = self._step(st, waiting, live, pf)
            fwd = self.forward.seconds(computed, bool(live))
            if fwd:
                time.sleep(fwd)
                st.forward_s += fwd
            st.steps += 1
            self.step_no += 1
            if self.sampler is not None:
                self.sampler(self.step_no, time.perf_counter() - self.t0)
            progressed = (len(waiting), len(live), st.requests) != before or computed
            stuck = 0 if progressed or pf else stuck + 1
            if stuck > self.MAX_STUCK_STEPS:
                raise ProtocolError(f"scheduler: no progress for {stuck} steps "
                                    f"({len(live)} requests in flight)")
        st.wall_s = time.perf_counter() - start
        return st

    def _step(self, st: RoundStats, waiting, live: list[_Live], pf: list[_Live]) -> int:
        while waiting and len(live) < self.concurrency:
            lv = _Live(waiting.popleft())
            live.append(lv)
            st.requests += 1
            st.prompt_tokens += len(lv.req.prompt)
            self._admit(lv, st, pf)
        for lv in list(pf):
            self._progress(lv, pf)
        computed = 0
        for lv in list(live):
            if lv.state == "decode":
                lv.left -= 1
                if lv.left <= 0:
                    self.g.insert(lv.req.full)  # cache_finished_req
                    self._agreed(self.g.lock_request(lv.req.prompt, -1), "dec_lock_ref")
                    live.remove(lv)
        budget = self.max_prefill_tokens
        for lv in live:
            if lv.state != "ready":
                continue
            if budget is not None and budget <= 0:
                break  # the step's prefill batch is full (SGLang's max_prefill_tokens)
            done = self._prefill(lv, st)
            computed += done
            if budget is not None:
                # At least one request per step, as SGLang's PrefillAdder (chunked prefill).
                budget -= max(done, 1)
        self._sync_round(st)
        return computed

    def _admit(self, lv: _Live, st: RoundStats, pf: list[_Live]) -> None:
        if not self.prefetching:
            return
        m = self._agreed(self.g.match_prefix(lv.req.prompt), "match_prefix")
        if (m["device_pages"] + m["host_pages"]) * self.ps >= len(lv.req.prompt):
            return
        op = self._agreed(self.g.prefetch_from_storage(lv.req.prompt), "prefetch_from_storage")
        if op is None:
            return
        if op != len(pf):
            raise ProtocolError(f"scheduler: prefetch queue index {op}, expected {len(pf)}")
        lv.state = "prefetch"
        pf.append(lv)
        st.prefetches += 1

    def _progress(self, lv: _Live, pf: list[_Live]) -> None:
        before = self._counter(mt.PREFETCHED)
        if self._agreed(self.g.check_prefetch_progress(pf.index(lv)), "check_prefetch_progress"):
            lv.storage = self._counter(mt.PREFETCHED) - before
            pf.remove(lv)
            lv.state = "ready"

    def _prefill(self, lv: _Live, st: RoundStats) -> int:
        prompt = lv.req.prompt
        m = self._agreed(self.g.match_prefix(prompt), "match_prefix")
        host = m["host_pages"] * self.ps
        if m["last_host_node"] is not None:
            if not self._agreed(self.g.load_back(m["last_host_node"]), "load_back"):
                st.load_back_failed += 1
                host = 0  # recomputed by the insert (un-evict)
        try:
            new_pages = self._agreed(self.g.insert(prompt), "insert")
        except DeviceFullError:
            st.device_full_retries += 1
            return 0  # stays ready: retried next step, after this step's sync round
        from_storage = min(lv.storage, host)
        st.prefetch_wasted += lv.storage - from_storage
        st.device_hit += m["device_pages"] * self.ps
        st.storage_hit += from_storage
        st.host_hit += host - from_storage
        computed = new_pages * self.ps
        st.computed += computed
        # The running request holds its prefix on the device until it finishes (its KV
        # is being attended to): locked nodes are neither evicted nor released.
        if not self._agreed(self.g.lock_request(prompt, +1), "inc_lock_ref"):
            raise ProtocolError("scheduler: no node ends at the inserted prompt")
        lv.state = "decode"
        lv.left = self.decode_steps or max(1, len(lv.req.output))
        return computed

    def _sync_round(self, st: RoundStats) -> None:
        t = time.perf_counter()
        if self.round_hook is None:
            self.g.check_events()
        else:
            self.round_hook(self.g)
        st.round_s.append(time.perf_counter() - t)

    def drain(self, timeout: float = 120.0) -> None:
        """Let every copy, backup and release in flight finish (between rounds)."""
        self.g.flush(timeout=timeout)

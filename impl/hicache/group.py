"""R ranks behind one driver-facing API; each method performs exactly one protocol step.

Kinds (as in the specification): *replicated* steps run on every rank (the scheduler
issues them everywhere), *sync* steps are collective rounds, *local* steps are one rank's
own timing (a copy or storage op finishing there), *env* steps are the outside world.
LockstepHiCache runs the ranks as threads of this process meeting at lock-step
collectives; GlooHiCache (impl/hicache/gloo.py) runs them as real gloo processes. Both
answer the same calls with the same results.
"""

from __future__ import annotations

from tiercheck.impl.lockstep import LockstepGroup

from .config import HiCacheConfig
from .rank import HiCacheRank
from .storage_setup import backend_for

REPLICATED, SYNC, LOCAL, ENV = "replicated", "sync", "local", "env"

# Driver-facing step -> (kind, rank method). The specification's action names.
ACTIONS = {
    "insert": (REPLICATED, "insert"),
    "write_dma_done": (LOCAL, "write_dma_done"),
    "writing_check": (SYNC, "writing_check"),
    "evict": (REPLICATED, "evict_node"),
    "load_back": (REPLICATED, "load_back"),
    "load_dma_done": (LOCAL, "load_dma_done"),
    "loading_check": (SYNC, "loading_check"),
    "storage_backup_done": (LOCAL, "storage_backup_done"),
    "drain_storage_control_queues": (SYNC, "drain_storage_control_queues"),
    "prefetch_from_storage": (REPLICATED, "prefetch_from_storage"),
    "prefetch_io": (LOCAL, "prefetch_io"),
    "check_prefetch_progress": (SYNC, "check_prefetch_progress"),
    "prefetch_timeout": (LOCAL, "prefetch_timeout"),
    "prefetch_read_fails": (ENV, "prefetch_read_fails"),
    "prefetch_revoke": (REPLICATED, "prefetch_revoke"),
    "store_lose": (ENV, "store_lose"),
    "registry_skew": (ENV, "registry_skew"),
    "local_access": (LOCAL, "local_access"),
    "lock_request": (REPLICATED, "lock_running"),
    "unlock_request": (REPLICATED, "unlock_running"),
}

# Rank methods a group may call (the gloo command loop refuses anything else).
CALLABLE = frozenset(
    {m for _, m in ACTIONS.values()}
    | {"evict", "match_prefix", "check_events", "snapshot", "verify", "metrics_dict",
       "storage_fault", "insert_need", "pending", "lock_request"}
)


def run_on_rank(rank: HiCacheRank, method: str, args=(), kwargs=None, fail: bool = False):
    """One step on one rank; ``fail``: its host allocations fail during the step."""
    if method not in CALLABLE:
        raise ValueError(f"not a HiCache step: {method!r}")
    rank.set_host_alloc_fault(fail)
    try:
        return getattr(rank, method)(*args, **(kwargs or {}))
    finally:
        rank.set_host_alloc_fault(False)


class HiCacheGroup:
    """The driver API. Subclasses provide _replicated (every rank, collectives bound) and
    _local (one rank, no collective)."""

    cfg: HiCacheConfig
    world_size: int

    # -- replicated and sync steps ------------------------------------------------------------

    def insert(self, tokens, fail_ranks=()):
        """insert(req): returns per rank the device pages the insert allocated."""
        return self._replicated("insert", (list(tokens),), fail_ranks=fail_ranks)

    def writing_check(self):
        return self._replicated("writing_check")

    def evict_node(self, path, fail_ranks=()):
        """The spec's evict(node): evict the leaf whose last page ends at token ``path``."""
        return self._replicated("evict_node", (tuple(path),), fail_ranks=fail_ranks)

    def evict(self, num_tokens: int):
        """Production eviction: free ``num_tokens`` by victim order (LRU)."""
        return self._replicated("evict", (num_tokens,))

    def load_back(self, path):
        return self._replicated("load_back", (tuple(path),))

    def loading_check(self):
        return self._replicated("loading_check")

    def drain_storage_control_queues(self):
        return self._replicated("drain_storage_control_queues")

    def prefetch_from_storage(self, tokens, fail_ranks=()):
        """Returns per rank the prefetch's index in the queue, or None if not started."""
        return self._replicated("prefetch_from_storage", (list(tokens),), fail_ranks=fail_ranks)

    def check_prefetch_progress(self, op: int):
        return self._replicated("check_prefetch_progress", (op,))

    def prefetch_revoke(self, op: int):
        """The scheduler revokes prefetch ``op`` on every rank (terminate_prefetch); the
        next drain round retires it once every rank's read has settled."""
        return self._replicated("prefetch_revoke", (op,))

    def match_prefix(self, tokens):
        return self._replicated("match_prefix", (list(tokens),))

    def lock_request(self, path, delta: int):
        """A running request holds (+1) / drops (-1) its prefix on the device (the
        scheduler's inc_lock_ref / dec_lock_ref); per rank, whether a node ends at path."""
        return self._replicated("lock_request", (tuple(path),), {"delta": delta})

    def lock_running(self, tokens):
        """The spec's lock_request(req): the request starts running and locks its matched
        device prefix; per rank, the pages locked."""
        return self._replicated("lock_running", (list(tokens),))

    def unlock_running(self, tokens):
        """The spec's unlock_request(req): the running request finishes."""
        return self._replicated("unlock_running", (list(tokens),))

    def check_events(self):
        """One scheduler iteration's rounds: writing_check, loading_check, storage drain."""
        return self._replicated("check_events")

    def flush(self, timeout: float = 60.0) -> None:
        """Run scheduler iterations until no copy, backup or release is in flight (auto
        mode: the engines and storage threads finish on their own). Gives up with a
        TimeoutError naming the busy ranks once ``timeout`` seconds (60 by default) passed."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            self.check_events()
            busy = self._replicated("pending")
            stuck = [r for r, p in enumerate(busy) if any(p[k] for k in ("wq", "lq", "sq", "relq"))]
            if not stuck:
                return
            if self.cfg.manual or time.monotonic() > deadline:
                raise TimeoutError(f"flush: work still in flight on rank(s) {stuck} after {timeout:g}s: {busy}")
            time.sleep(0.002)

    # -- local steps (one rank's timing) and the environment -------------------------------

    def write_dma_done(self, rank: int):
        return self._local(rank, "write_dma_done")

    def load_dma_done(self, rank: int):
        return self._local(rank, "load_dma_done")

    def storage_backup_done(self, rank: int, pages: int | None = None):
        return self._local(rank, "storage_backup_done", (pages,))

    def prefetch_io(self, rank: int, op: int):
        return self._local(rank, "prefetch_io", (op,))

    def prefetch_timeout(self, rank: int, op: int):
        """Manual mode: the rank's timer for prefetch ``op`` fires (timeout policy)."""
        return self._local(rank, "prefetch_timeout", (op,))

    def prefetch_read_fails(self, rank: int, op: int):
        """Fault injection: the rank's read for prefetch ``op`` fails midway."""
        return self._local(rank, "prefetch_read_fails", (op,))

    def store_lose(self, rank: int, path):
        return self._local(rank, "store_lose", (tuple(path),))

    def registry_skew(self, rank: int):
        return self._local(rank, "registry_skew")

    def local_access(self, rank: int, path):
        """One rank alone touches the node ending at ``path`` (its local access clock)."""
        return self._local(rank, "local_access", (tuple(path),))

    def storage_fault(self, rank: int, method: str, *args, **kwargs):
        return self._local(rank, "storage_fault", (method,) + args, kwargs)

    # -- generic dispatch (for drivers that hold actions as data) ---------------------------

    def apply(self, name: str, **params):
        """One step by its specification name, with implementation-level parameters:
        insert/prefetch_from_storage(tokens, fail=ranks), evict/load_back(node=path),
        *_done(rank[, pages]), prefetch_io/prefetch_timeout/prefetch_read_fails(rank, op),
        check_prefetch_progress/prefetch_revoke(op),
        store_lose(rank, page=path), registry_skew(rank), local_access(rank, node=path)."""
        if name not in ACTIONS:
            raise ValueError(f"unknown step {name!r} (known: {', '.join(ACTIONS)})")
        fail = tuple(params.get("fail", ()))
        if name == "insert":
            return self.insert(params["tokens"], fail)
        if name == "prefetch_from_storage":
            return self.prefetch_from_storage(params["tokens"], fail)
        if name in ("lock_request", "unlock_request"):
            return getattr(self, ACTIONS[name][1])(params["tokens"])
        if name == "evict":
            return self.evict_node(params["node"], fail)
        if name == "load_back":
            return self.load_back(params["node"])
        if name in ("writing_check", "loading_check", "drain_storage_control_queues"):
            return getattr(self, name)()
        if name in ("check_prefetch_progress", "prefetch_revoke"):
            return getattr(self, name)(params["op"])
        if name == "storage_backup_done":
            return self.storage_backup_done(params["rank"], params.get("pages"))
        if name in ("prefetch_io", "prefetch_timeout", "prefetch_read_fails"):
            return getattr(self, name)(params["rank"], params["op"])
        if name == "store_lose":
            return self.store_lose(params["rank"], params["page"])
        if name == "local_access":
            return self.local_access(params["rank"], params["node"])
        return getattr(self, name)(params["rank"])

    # -- observation ----------------------------------------------------------------------

    def snapshot(self, store: bool = True) -> list[dict]:
        return [self._local(r, "snapshot", (store,)) for r in range(self.world_size)]

    def verify(self, check_store: bool = True) -> list[str]:
        out = []
        for r in range(self.world_size):
            out += self._local(r, "verify", (check_store,))
        return out

    def metrics(self) -> list[dict]:
        return [self._local(r, "metrics_dict") for r in range(self.world_size)]

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LockstepHiCache(HiCacheGroup):
    """R ranks in this process; each replicated/sync step runs them as threads that meet at
    lock-step collectives (a rank that skips one makes its peers raise RankMissingError
    naming the sync point). ``storage``: a factory (FileStorage, MooncakeStorage, or
    callable rank -> backend) or one shared StorageBackend instance."""

    def __init__(self, cfg: HiCacheConfig, world_size: int = 1, storage=None, *, timeout: float = 10.0):
        self.cfg = cfg
        self.world_size = world_size
        self._group = LockstepGroup(world_size, timeout=timeout)
        self.ranks: list[HiCacheRank] = []
        try:
            for r in range(world_size):
                backend, owned = backend_for(storage, r)
                self.ranks.append(HiCacheRank(cfg, r, world_size, backend, owns_backend=owned))
        except BaseException:
            self.close()
            raise

    def _replicated(self, method, args=(), kwargs=None, fail_ranks=()):
        fail_ranks = frozenset(fail_ranks)

        def body(handle):
            rank = self.ranks[handle.rank]
            rank.coll = handle
            try:
                return run_on_rank(rank, method, args, kwargs, handle.rank in fail_ranks)
            finally:
                rank.coll = None

        return self._group.run(body)

    def _local(self, rank: int, method, args=(), kwargs=None):
        if not 0 <= rank < self.world_size:
            raise ValueError(f"no rank {rank} (world size {self.world_size})")
        return run_on_rank(self.ranks[rank], method, args, kwargs)

    def close(self) -> None:
        for r in self.ranks:
            r.close()
        self.ranks = []
        self._group.close()

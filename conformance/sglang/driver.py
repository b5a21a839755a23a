"""The conformance driver for upstream SGLang HiCache (UnifiedRadixCache.init_hicache).

One rank runs in this process ("lockstep"); TP ranks run as real torch.distributed gloo
processes ("gloo"), each a command loop around one ``SGLangRank``, with the cache's own
collectives on the gloo WORLD group as its ``tp_cache_group``. The gloo processes are
started once and reused by every driver (a fresh cache per driver, node ids restarted),
since importing sglang takes tens of seconds.

sglang is imported lazily: the rest of tiercheck works without it, and a driver built
without the lane installed is a one-line UserError. Which spec features the adapter
drives is docs/sglang.md; which 0.5.23 behaviours the spec options model, and the
findings, docs/findings/.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import queue as queue_mod
import tempfile
import threading
import time
import traceback

from tiercheck.errors import UserError
from tiercheck.spec.action import LOCAL
from tiercheck.spec.model import Model

from ..refinement import concretize, refine

UNSUPPORTED = {
    "mirror_release": "no supported release has mirror release (PR #33862 is not merged)",
    "cp_planner": "the CP load-back planner is not part of HiCache's UnifiedRadixCache",
    "slots": "slot identities are not read from SGLang's allocators",
    "request_locks": "lock_request / unlock_request are not mapped",
    "insert_evicts": "the lane's insert is driven only with device room (separate evict steps)",
    "load_back_evicts": "the lane's load_back is driven only with device room (separate evict steps)",
}


def require_lane() -> str:
    """The installed release, if a shim drives it (no sglang import: that happens in the
    rank, after the fork point)."""
    import importlib.metadata as md

    from .shims import installed, select

    try:
        version = md.version("sglang")
    except md.PackageNotFoundError:
        installed()  # raises the one-line "needs a lane" error
        raise
    select(version)
    return version


def check_supported(cfg, version: str | None = None) -> None:
    from .shims import select

    if version is not None and select(version).core == "hrc":
        from .core_hrc import check_supported as hrc_supported

        hrc_supported(cfg, version)
    for flag, why in UNSUPPORTED.items():
        if getattr(cfg, flag):
            raise UserError(f"--impl sglang: model has {flag} = true, which the adapter cannot drive: {why}")
    if cfg.page_size != 1 or cfg.victim_order != "path":
        raise UserError("--impl sglang: the lane runs page_size = 1 with the spec's page-order victims; "
                        f"the model has page_size = {cfg.page_size}, victim_order = {cfg.victim_order!r}")
    if cfg.prefetch:
        _check_prefetch(cfg, version)
    if cfg.policy == "write_back" and not cfg.duplicate_reclaim:
        raise UserError("--impl sglang: SGLang always reclaims host duplicates under write_back: "
                        "set duplicate_reclaim = true")


def _check_prefetch(cfg, version):
    from .shims import select

    # The pipeline the adapter maps: CacheRequestHandle, the hit and completion votes, the
    # timeout policy's MAX vote (0.5.20 onwards; shims.Shim.no_prefetch says why not).
    why = select(version).no_prefetch if version is not None else None
    if why is not None:
        raise UserError(f"--impl sglang: prefetch is not mapped on SGLang {version}: {why}")
    if not cfg.prefetch_at_hit:
        raise UserError("--impl sglang: SGLang takes prefetch host slots when the storage hit query "
                        "returns: set prefetch_at_hit = true")
    if cfg.write_back:
        raise UserError("--impl sglang: prefetch is mapped under write_through (under write_back the "
                        "prefetch step's fused round would also check the reclaim digest, a sync point "
                        "the spec's prefetch step does not have)")
    if cfg.host_pages >= 4:
        raise UserError("--impl sglang: prefetch needs host_pages <= 3 (at most one prefetch in flight: "
                        "SGLang's one read thread cannot cut a read queued behind another)")


def _params(model, action) -> dict:
    """Spec parameters -> what SGLangRank's do_<action> takes (the refinement's action half,
    less what the driver itself routes: the failing ranks and the acting rank)."""
    p = concretize(model, action)
    p.pop("fail", None)
    p.pop("rank", None)
    return p


class SGLangDriver:
    name = "sglang"

    def __init__(self, cfg, backend: str = "lockstep", timeout: float = 30.0, spec_cfg=None):
        """``spec_cfg``: the spec's constants when they differ from the ones SGLang is
        built with (an option switched off to show the difference it models)."""
        self.version = require_lane()
        check_supported(cfg, self.version)
        self.model = Model(spec_cfg or cfg)
        self.hung = ""
        self._tmp = tempfile.TemporaryDirectory(prefix="tiercheck-sglang-l3-") if cfg.storage else None
        store = self._tmp.name if self._tmp else None
        self._local = None
        self._gloo = None
        if backend == "lockstep":
            if cfg.ranks != 1:
                raise UserError("--impl sglang: TP ranks need real processes (SGLang's collectives "
                                "are torch.distributed): use --backend gloo")
            from .shims import rank_class

            self._local = rank_class(self.version)(cfg, 0, 1, None, store)
        else:
            self._gloo = gloo_ranks(cfg.ranks, timeout)
            self._gloo.call(range(cfg.ranks), "build", cfg, store)

    # -- the Driver protocol ------------------------------------------------------------

    def apply(self, action) -> None:
        if self.hung or self._halted():
            return
        m = self.model
        kind = m.action_kind(action.name)
        params = _params(m, action)
        fail = set(action.get("fail", ()))
        if kind == LOCAL or action.name in ("store_lose", "registry_skew"):
            ranks = [action["rank"]]
        else:
            ranks = list(range(m.cfg.ranks))
        try:
            if action.name == "check_prefetch_progress":
                # Whether every rank's read ran decides how the step ends (acks drained or cut).
                params["all_read"] = all(self._call(ranks, "prefetch_read_done", params["op"]))
            self._call(ranks, "apply", action.name, params, fail)
        except _Hung:
            self.hung = action.name

    def state(self):
        snaps = self._call(range(self.model.cfg.ranks), "snapshot")
        halted = next((s["halted"] for s in snaps if s.get("halted")), "")
        return refine(self.model, snaps, hung=self.hung, halted=halted)

    def verify(self):
        if self.hung:
            return []
        return [x for problems in self._call(range(self.model.cfg.ranks), "verify") for x in problems]

    def close(self) -> None:
        try:
            if self._local is not None:
                self._local.close()
            elif self._gloo is not None and not self.hung:
                self._gloo.call(range(self.model.cfg.ranks), "drop")
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()

    def path_counts(self, reset: bool = False) -> list:
        """Per rank: how often each upstream protocol path ran (conformance.sglang.paths)."""
        return self._call(range(self.model.cfg.ranks), "path_counts", reset)

    # -- plumbing ---------------------------------------------------------------------------

    def _halted(self) -> bool:
        if self._local is not None:
            return bool(self._local.halted)
        return False  # gloo ranks report it through their snapshots; apply is a no-op there

    def _call(self, ranks, method, *args):
        if self._local is not None:
            return [_dispatch(self._local, method, args, 0)]
        return self._gloo.call(ranks, method, *args)


class _Hung(Exception):
    """A collective did not complete on some rank."""


def _dispatch(rank, method, args, index):
    if method == "apply":
        name, params, fail = args
        if rank.halted:
            return None
        return rank.apply(name, params, fail=index in fail)
    return getattr(rank, method)(*args)


# --- gloo ranks ---------------------------------------------------------------------------

_STOP = None


def _serve(group, inqs, outqs):
    """The command loop of one gloo rank: one SGLangRank at a time."""
    import importlib.metadata as md

    import torch.distributed as dist

    from .shims import rank_class

    SGLangRank = rank_class(md.version("sglang"))
    r, world = group.rank, group.world_size
    holder = None
    outqs[r].put(("ready", None, None))
    try:
        while True:
            msg = inqs[r].get()
            if msg is _STOP:
                return "closed"
            method, args = msg
            try:
                if method == "build":
                    if holder is not None:
                        holder.close()
                    cfg, store = args
                    holder = SGLangRank(cfg, r, world, dist.group.WORLD, store)
                    result = None
                elif method == "drop":
                    if holder is not None:
                        holder.close()
                    holder, result = None, None
                else:
                    result = _dispatch(holder, method, args, r)
                outqs[r].put(("ok", result, None))
            except BaseException as exc:  # noqa: BLE001 -- shipped to the driver
                outqs[r].put(("err", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        if holder is not None:
            holder.close()


class GlooRanks:
    """R forked gloo processes (sglang already imported in the parent), reused by drivers."""

    def __init__(self, world: int, timeout: float):
        from tiercheck.impl.torchdist import spawn_gloo

        self.world = world
        self.timeout = timeout
        ctx = mp.get_context("fork")
        self._inqs = [ctx.Queue() for _ in range(world)]
        self._outqs = [ctx.Queue() for _ in range(world)]
        self._error = None
        self.broken = False

        def launch():
            try:
                spawn_gloo(world, _serve, self._inqs, self._outqs, timeout=7 * 24 * 3600.0,
                           collective_timeout=timeout, start_method="fork")
            except BaseException as exc:  # noqa: BLE001 -- reported by the next call
                self._error = exc

        self._thread = threading.Thread(target=launch, name="sglang-gloo", daemon=True)
        self._thread.start()
        for r in range(world):
            if self._recv(r, 120.0)[0] != "ready":
                raise RuntimeError(f"sglang gloo rank {r} did not start")

    def _recv(self, rank, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._outqs[rank].get(timeout=0.1)
            except queue_mod.Empty:
                pass
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.broken = True
                raise _Hung(f"sglang gloo rank {rank} gone or silent ({self._error})")

    def call(self, ranks, method, *args):
        ranks = list(ranks)
        for r in ranks:
            self._inqs[r].put((method, args))
        results, errors = [], []
        for r in ranks:
            kind, value, tb = self._recv(r, 2 * self.timeout + 60)
            if kind == "err":
                errors.append((r, value, tb))
            results.append(value)
        if errors:
            r, msg, tb = errors[0]
            if any(word in msg for word in ("Timed out", "timed out", "Connection closed")):
                self.broken = True
                raise _Hung(msg)
            raise RuntimeError(f"sglang rank {r}: {msg}\n{tb}")
        return results

    def close(self):
        for q in self._inqs:
            q.put(_STOP)
        self._thread.join(timeout=30)


_POOLS: dict = {}


def gloo_ranks(world: int, timeout: float) -> GlooRanks:
    pool = _POOLS.get(world)
    if pool is None or pool.broken:
        if pool is not None:
            pool.close()
        # Import sglang (and apply the CPU patches) before forking: every rank inherits it.
        from . import patches

        patches.apply()
        import importlib
        import importlib.metadata as md

        from .shims import cache_module

        importlib.import_module(cache_module(md.version("sglang")))

        pool = _POOLS[world] = GlooRanks(world, timeout)
    return pool


@atexit.register
def _close_pools():
    for pool in _POOLS.values():
        try:
            pool.close()
        except Exception:  # noqa: BLE001 -- best effort at exit
            pass

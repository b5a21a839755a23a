"""TorchDistGroup: the collective interface over torch.distributed (gloo on CPU, NCCL on CUDA),
and spawn_gloo(), a launcher that runs a function on R real gloo processes on loopback.

Each rank writes "<call>|<sync point>" to the shared TCPStore before entering a collective (a
few microseconds), so that on a timeout or a peer exit the error can name the sync point, the
missing ranks and where they are; the launcher hosts the store, so it outlives any rank.
"""

from __future__ import annotations

import datetime
import gc
import multiprocessing as mp
import pickle
import queue as queue_mod
import time
import traceback

import torch
import torch.distributed as dist

from tiercheck.impl.collective import (
    Collective,
    CollectiveError,
    CollectiveTimeoutError,
    RankMissingError,
)

LOOPBACK = "127.0.0.1"
SETUP_TIMEOUT = 30.0  # seconds for the ranks to connect (store, process group), not for collectives


class TorchDistGroup(Collective):
    """Collectives over an initialised torch.distributed process group.

    store/prefix: the TCPStore shared by the ranks (spawn_gloo passes it); without it a
    missing rank still raises, but the error cannot say which ranks are missing.
    """

    def __init__(self, *, group=None, store=None, prefix: str = "tiercheck", timeout: float = 30.0):
        super().__init__()
        if not dist.is_initialized():
            raise ValueError("TorchDistGroup: torch.distributed is not initialised")
        self.pg = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.backend = dist.get_backend(group)
        self.device = (
            torch.device("cuda", torch.cuda.current_device())
            if self.backend == "nccl"
            else torch.device("cpu")
        )
        self.store = store
        self.prefix = prefix
        self.timeout = timeout
        self._desc = ""

    def _key(self, what: str, rank: int) -> str:
        return f"{self.prefix}/{what}/{rank}"

    def _arrive(self, call: int, desc: str) -> None:
        self._desc = desc
        if self.store is not None:
            self.store.set(self._key("progress", self.rank), f"{call}|{desc}")

    def _min_reduce(self, frame: list[int], call: int, index: int, desc: str) -> list[int]:
        t = torch.tensor(frame, dtype=torch.int64, device=self.device)
        try:
            work = dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.pg, async_op=True)
            if self.device.type == "cuda":
                # NCCL: poll, so a missing rank raises here instead of hanging the host thread.
                deadline = time.monotonic() + self.timeout
                while not work.is_completed():
                    if time.monotonic() > deadline:
                        raise self._missing(call, desc, None)
                    time.sleep(0.0005)
            elif work.wait(timeout=datetime.timedelta(seconds=self.timeout)) is False:
                raise self._missing(call, desc, None)
        except CollectiveError:
            raise
        except RuntimeError as exc:  # gloo: "Operation timed out!", "Connection closed by peer"
            raise self._missing(call, desc, exc) from exc
        return t.tolist()

    def _read(self, what: str, rank: int) -> str | None:
        key = self._key(what, rank)
        try:
            if self.store is None or not self.store.check([key]):
                return None
            return self.store.get(key).decode()
        except RuntimeError:
            return None

    def _missing(self, call: int, desc: str, exc: BaseException | None) -> CollectiveError:
        timed_out = exc is None or "timed out" in str(exc).lower()
        why = f"timed out after {self.timeout:g}s" if timed_out else "failed"
        cause = "" if exc is None else f" [{str(exc).splitlines()[0][:200]}]"
        if self.store is None:
            cls = CollectiveTimeoutError if timed_out else RankMissingError
            return cls(f"rank {self.rank}: collective {desc} (call #{call}) {why}; "
                       f"missing ranks unknown (no store){cause}")
        missing, detail = [], []
        for r in range(self.world_size):
            if r == self.rank:
                continue
            progress = self._read("progress", r)
            status = self._read("status", r) or "running"
            last_call = int(progress.split("|", 1)[0]) if progress else -1
            if last_call < call:
                missing.append(r)
                last = (f"last sync point {progress.split('|', 1)[1]} (call #{last_call})"
                        if progress else "no collective yet")
                detail.append(f"rank {r}: {last}, {status}")
        if not missing:
            return CollectiveError(f"rank {self.rank}: collective {desc} (call #{call}) {why}{cause}")
        cls = CollectiveTimeoutError if timed_out else RankMissingError
        return cls(f"rank {self.rank}: collective {desc} (call #{call}) {why}: rank(s) {missing} "
                   f"did not arrive ({'; '.join(detail)}){cause}")

    def _peer_sync_points(self, call: int) -> dict[int, str]:
        if self.store is None:
            descs: list = [None] * self.world_size
            dist.all_gather_object(descs, self._desc, group=self.pg)
            return dict(enumerate(descs))
        # Every rank wrote its progress before entering the reduction that just completed.
        out = {}
        for r in range(self.world_size):
            progress = self._read("progress", r)
            if progress and int(progress.split("|", 1)[0]) == call:
                out[r] = progress.split("|", 1)[1]
        return out


class RemoteError(RuntimeError):
    """A rank's exception that could not be pickled back to the launcher."""


def _child_main(rank, world_size, port, fn, args, collective_timeout, results) -> None:
    setup = datetime.timedelta(seconds=max(SETUP_TIMEOUT, collective_timeout))
    store = dist.TCPStore(LOOPBACK, port, world_size, is_master=False, timeout=setup)
    status = "finished"
    try:
        # Connecting the ranks waits for processes that are still starting: on a loaded
        # machine that takes seconds, so it gets the setup timeout; every collective is
        # bounded by collective_timeout itself (TorchDistGroup._min_reduce).
        dist.init_process_group(
            "gloo", store=dist.PrefixStore("pg", store), rank=rank, world_size=world_size, timeout=setup,
        )
        group = TorchDistGroup(store=store, timeout=collective_timeout)
        msg = ("ok", fn(group, *args), None)
    except BaseException as exc:  # noqa: BLE001 -- shipped to the launcher
        status = f"failed ({type(exc).__name__})"
        msg = ("err", exc, traceback.format_exc())
    # Status goes to the store before the connections close, so peers can name this rank.
    try:
        store.set(f"tiercheck/status/{rank}", status)
    except RuntimeError:
        pass
    try:
        pickle.dumps(msg)
    except Exception as exc:  # noqa: BLE001
        msg = ("err", RemoteError(f"rank {rank}: unpicklable result or error: {exc}"), msg[2])
    results.put((rank,) + msg)
    if dist.is_initialized():
        dist.destroy_process_group()


def spawn_gloo(
    world_size: int,
    fn,
    *args,
    timeout: float = 60.0,
    collective_timeout: float = 10.0,
    start_method: str | None = None,
    on_start=None,
) -> list:
    """Run fn(group: TorchDistGroup, *args) on ``world_size`` gloo processes on 127.0.0.1.

    Returns the per-rank results; if any rank fails, re-raises the first failure (a root cause
    in preference to the CollectiveErrors it provoked). Processes still alive after
    ``timeout`` seconds are killed and reported. start_method defaults to "fork" (fast) unless
    CUDA is initialised in this process; fn and its results must pickle under "spawn".
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    if start_method is None:
        fork_ok = "fork" in mp.get_all_start_methods() and not torch.cuda.is_initialized()
        start_method = "fork" if fork_ok else "spawn"
    ctx = mp.get_context(start_method)
    # The launcher hosts the store: it survives ranks that exit or crash.
    store = dist.TCPStore(LOOPBACK, 0, world_size + 1, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=30))
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_child_main, daemon=True, name=f"gloo-rank{r}",
                    args=(r, world_size, store.port, fn, args, collective_timeout, results))
        for r in range(world_size)
    ]
    # Garbage of this process (an earlier group's store or process group) collected in a
    # forked child would run C++ destructors that join threads the child does not have:
    # collect it here, before the fork (std::system_error "Invalid argument", an abort).
    gc.collect()
    for p in procs:
        p.start()
    if on_start is not None:
        on_start(procs)  # the caller may need to kill a stalled rank (GlooHiCache.close)
    got: dict[int, tuple] = {}
    failures: list[tuple[int, BaseException, str]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < world_size and time.monotonic() < deadline:
            try:
                rank, kind, value, tb = results.get(timeout=0.1)
            except queue_mod.Empty:
                dead = [r for r, p in enumerate(procs) if r not in got and not p.is_alive()]
                if dead:
                    time.sleep(0.2)  # let a just-exited rank's message arrive
                    while True:
                        try:
                            rank, kind, value, tb = results.get_nowait()
                        except queue_mod.Empty:
                            break
                        got[rank] = (kind, value, tb)
                        if kind == "err":
                            failures.append((rank, value, tb))
                    for r in dead:
                        if r not in got:
                            err = RemoteError(f"gloo rank {r} exited with code {procs[r].exitcode} "
                                              "without a result")
                            got[r] = ("err", err, "")
                            failures.append((r, err, ""))
                continue
            got[rank] = (kind, value, tb)
            if kind == "err":
                failures.append((rank, value, tb))
        missing = [r for r in range(world_size) if r not in got]
        if missing and not failures:
            raise RemoteError(f"spawn_gloo: rank(s) {missing} gave no result within {timeout:g}s")
    finally:
        for p in procs:
            p.join(timeout=5.0 if not failures else 1.0)
        for p in procs:
            if p.is_alive():
                p.kill()  # only our own children
                p.join()
        results.close()
    if failures:
        root = next((f for f in failures if not isinstance(f[1], CollectiveError)), failures[0])
        rank, exc, tb = root
        if hasattr(exc, "add_note"):
            exc.add_note(f"(raised on gloo rank {rank})\n{tb}".rstrip())
        raise exc
    return [got[r][1] for r in range(world_size)]

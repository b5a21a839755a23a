"""Faults whose verdict the implementation must get right: which error it reports, which
rank it refuses, which bad bytes its checks catch.

No spec trace reaches these guards: the spec has no rank that raises, no rank outside the
group, no bytes going bad under a copy or in the store. Each scenario injects one such
fault on top of the real components (real gloo ranks, the file store, the torch pools)
and returns "" when the implementation's verdict is the right one, else what went wrong:

- a gloo step where one rank raises (the root cause) and its peer then times out in the
  collective the first rank never reached (the consequence): the driver must report the
  root cause, with the raising rank's own frame;
- a gloo step where one rank fails at once with an error of two lines, the first longer
  than 300 characters, while its peer is stopped: the stall report must stay one line
  and quote the failure by its type and first line, cut at 300 characters (GlooHiCache's
  documented form);
- a one-rank step for a rank outside the lock-step group, above or below it: refused by
  name, never an IndexError;
- a host page corrupted under a load-back with ``verify_loads`` on: the load's ack must
  fail naming the node and device slots (and with it off, the ack goes through and the
  self-check names the pool and page);
- a store page rewritten with other bytes after its backup was acked but before the ack
  was drained: the self-check must read it (only pages still being written are skipped).
"""

from __future__ import annotations

import tempfile

import torch

from tiercheck.impl.hicache import FileStorage
from tiercheck.impl.hicache.errors import ProtocolError
from tiercheck.impl.storage import rank_key
from tiercheck.models import model_file
from tiercheck.spec.model import Model

from .crash import describe_crash
from .reference import ReferenceDriver, impl_config
from .runner import replay
from .situations import first_path


class StoreUnreachable(OSError):
    """The injected root cause (module level: it travels pickled from a gloo rank)."""


class _ExistsRaises:
    """A backend whose exists query raises; everything else goes to the real store."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def batch_exists(self, keys):
        raise StoreUnreachable(f"injected: the store is unreachable for {len(keys)} key(s)")


class RaisingStorage(FileStorage):
    """The file store; on rank 1 its exists query raises (a rank's own error, not a
    collective's)."""

    def make(self, rank: int):
        backend = super().make(rank)
        return _ExistsRaises(backend) if rank == 1 else backend


# The frame the root cause must be reported at: rank 1's own call into its store.
ROOT_CAUSE_FRAME = "impl/hicache/prefetch.py"


def gloo_root_cause() -> str:
    """wt-prefetch-2r on gloo: prefetch_from_storage asks the store whether the first
    page exists before its hit-query round; rank 1's store raises, so rank 1 fails at
    once and rank 0 times out in the round rank 1 never reached. The driver must raise
    rank 1's error (the cause), not rank 0's CollectiveError (which the reference
    adapter takes for a hang), and the crash report must point at rank 1's own frame.
    (Called through the group: the spec has no prefetch before a page is stored, and
    the implementation asks the store all the same.)"""
    from tiercheck.impl.hicache.gloo import GlooHiCache

    cfg = model_file.load("wt-prefetch-2r").config
    step = "prefetch_from_storage([1, 2])"
    with tempfile.TemporaryDirectory(prefix="tiercheck-fault-") as tmp:
        group = GlooHiCache(impl_config(cfg), cfg.ranks, RaisingStorage(tmp), collective_timeout=2.0)
        try:
            group.prefetch_from_storage([1, 2])
            return f"{step} returned with rank 1's store raising"
        except Exception as exc:  # noqa: BLE001 -- the verdict is the problem text
            report = describe_crash(exc, step)
        finally:
            group.close()
    if not report.startswith("StoreUnreachable: ") or f"at {ROOT_CAUSE_FRAME}:" not in report \
            or "on gloo rank 1," not in report:
        return f"the root cause is not reported at rank 1's own frame: {report}"
    return ""


def stall_beside_a_long_failure(stopped: int = 1) -> str:
    """wt-2r on gloo, rank ``stopped`` SIGSTOPped; the step reaches the other rank with a
    keyword argument whose name holds a newline, so that rank fails at once with a
    TypeError of two lines, the first over 300 characters. After the grace (one
    collective timeout + 5 s) the driver names the stopped rank as stalled, in one line
    giving the grace and quoting the failed rank's error: its type and first line, cut at
    300 characters. (The driver polls the ranks in turn, so a failure is seen whichever
    rank stopped: with rank 0 stopped, a driver that kept polling rank 0 would see none
    and report a plain timeout at its deadline.)"""
    import os
    import signal

    from tiercheck.impl.hicache.errors import RemoteRankError

    failed = 1 - stopped
    cfg = model_file.load("wt-2r").config
    # The driver's deadline well past the grace: a report at the deadline is the wrong one.
    driver = ReferenceDriver(cfg, backend="gloo", timeout=2.0, driver_timeout=30.0)
    procs = list(driver.group._procs)
    bad = {"k" * 400 + "\nsecond line of the error": 1}
    try:
        os.kill(procs[stopped].pid, signal.SIGSTOP)
        try:
            driver.group._replicated("writing_check", (), bad)
            return f"a step rank {failed} rejects returned with rank {stopped} stopped"
        except RemoteRankError as exc:
            msg, cause = str(exc), exc.__cause__
    finally:
        driver.close()
    if not msg.startswith(f"gloo rank(s) [{stopped}] stalled in writing_check"):
        return f"a stopped rank {stopped} beside a failed rank {failed} is not named as stalled: {msg[:200]}"
    if "\n" in msg:
        return f"the stall report is not one line: {msg!r}"[:300]
    grace = 2.0 + 5.0  # GlooHiCache's documented grace after a failure: one collective timeout + 5 s
    if f"stalled in writing_check: no answer {grace:g}s after rank {failed} failed" not in msg:
        return f"the stall report does not give the documented grace ({grace:g}s): {msg[:160]}"
    first = str(cause).splitlines()[0] if isinstance(cause, TypeError) else ""
    if len(first) <= 300 or not msg.endswith(f"rank {failed} failed (TypeError: {first[:300]})"):
        return f"the stall report does not quote rank {failed}'s error by its first line cut at 300 characters: ...{msg[-160:]}"
    alive = [p.name for p in procs if p.is_alive()]
    return f"rank processes {alive} still alive after close()" if alive else ""


def out_of_range_rank() -> str:
    """A one-rank step for a rank the lock-step group does not have (wt-2r: ranks 0 and
    1), on either side of it and beyond its end: refused by name, as the gloo group
    refuses rank 3 (process_faults' silent rank)."""
    cfg = model_file.load("wt-2r").config
    driver = ReferenceDriver(cfg)
    try:
        for rank in (3, 2, -1):
            try:
                driver.group.apply("write_dma_done", rank=rank)
                return f"write_dma_done ran on rank {rank} of a 2-rank group"
            except Exception as exc:  # noqa: BLE001 -- the verdict is the problem text
                if str(exc) != f"no rank {rank} (world size 2)":
                    return f"a step for rank {rank} of 2 is not refused by name: {type(exc).__name__}: {exc}"
    finally:
        driver.close()
    return ""


def _load_submitted(s, a, t) -> bool:
    return a.name == "load_back" and len(t.ranks[0].lq) > len(s.ranks[0].lq)


def _corrupted_load(verify_loads: bool):
    """wt-1r: the shortest trace to a load-back, its first host page overwritten before
    the copy runs, the copy run: (loading_check's error or None, the self-check), or
    what went wrong before the fault."""
    cfg = model_file.load("wt-1r").config
    model = Model(cfg)
    trace = first_path(model, _load_submitted)
    driver = ReferenceDriver(cfg, overrides={"verify_loads": verify_loads})
    try:
        out = replay(driver, trace)
        if out.mismatch is not None:
            return f"before the fault: {out.mismatch.message}"
        rank = driver.group.ranks[0]
        host = rank.h2d.op(rank.lq[-1].op_id).src_slots
        rank.host_pool.page(host[0]).fill_(7.25)  # bad bytes under the pending H->D copy
        driver.group.load_dma_done(0)  # the copy carries them to the device
        try:
            driver.group.loading_check()
            err = None
        except ProtocolError as exc:
            err = str(exc)
        return err, driver.group.verify()
    finally:
        driver.close()


def corrupted_load_back() -> str:
    """A host page corrupted under a load-back: with verify_loads on, loading_check must
    refuse the load naming the node and the device slots; with it off, the load is acked
    as delivered and the self-check names the host pool's page."""
    got = _corrupted_load(True)
    if isinstance(got, str):
        return got
    err, _checks = got
    if err is None or "load-back of" not in err or "delivered wrong bytes in device slots" not in err:
        return f"with verify_loads on, a load-back that delivered wrong bytes was acked (loading_check: {err})"
    got = _corrupted_load(False)
    if isinstance(got, str):
        return got
    err, checks = got
    if err is not None:
        return f"with verify_loads off, loading_check verified the load: {err}"
    if not any("wrong bytes in the host pool: page" in c for c in checks):
        return f"the self-check does not name the corrupted host page: {checks}"
    return ""


def _stored_whole(model):
    """storage_backup_done storing every page of its backup (its ack not drained yet)."""
    def goal(s, a, t) -> bool:
        if a.name != "storage_backup_done":
            return False
        rs = s.ranks[0]
        return a["pages"] == len(model.pages.chain(*rs.sq[len(rs.sdone)]))
    return goal


def put_other_bytes(rank, page: str) -> None:
    """The store holds other bytes under ``rank``'s key of ``page`` (a corruption, or a
    write not finished)."""
    key = [rank_key(page, rank.rank)]
    rank.backend.delete(key)
    rank.backend.batch_put(key, [torch.full_like(rank.host_pool.page(rank.host_pool.base), 7.25)])


def store_rewritten_before_drain() -> str:
    """wt-storage-1r: a backup acked, its ack not yet drained, the page rewritten in the
    store with other bytes: the self-check must report it (it skips only pages whose
    backup is still in flight, whose bytes may not be in the store yet)."""
    cfg = model_file.load("wt-storage-1r").config
    model = Model(cfg)
    trace = first_path(model, _stored_whole(model))
    driver = ReferenceDriver(cfg)
    try:
        out = replay(driver, trace)
        if out.mismatch is not None:
            return f"before the fault: {out.mismatch.message}"
        rank = driver.group.ranks[0]
        if not rank.sq or rank.sq[0].ack is None or not rank.stored:
            return "the trace left no acked, undrained backup"
        put_other_bytes(rank, sorted(rank.stored)[0])
        problems = driver.verify()
    finally:
        driver.close()
    if not any("holds wrong bytes" in p for p in problems):
        return f"a page rewritten in the store before its ack was drained is not reported: {problems}"
    return ""


def scenarios():
    """(name, run) per fault."""
    return [
        ("gloo error from its root cause", gloo_root_cause),
        ("stall beside a long failure", stall_beside_a_long_failure),
        ("one-rank step outside the group", out_of_range_rank),
        ("host page corrupted under a load-back", corrupted_load_back),
        ("store page rewritten before its ack is drained", store_rewritten_before_drain),
    ]

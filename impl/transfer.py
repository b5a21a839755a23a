"""The transfer engine: D->H (backup) and H->D (load-back) page copies with FIFO completion.

Op ids are 0, 1, 2, ... per engine, and ops finish in submission order (one copy stream), so
"which ops are done" is always a prefix: op i is done iff i < completed(). That prefix count is
what writing_check / loading_check need.

Two engines with the same interface:
- CudaTransferEngine: copies on a dedicated CUDA stream, one event per op as its ack (queried
  without blocking), pinned host memory; optionally a deliberate delay queued on the copy stream
  before each copy to widen race windows.
- DeferredTransferEngine (CPU): an op is validated and recorded at submit time, but its bytes are
  copied only when it completes. A slot freed or reused before completion therefore shows up as
  wrong bytes, as on a GPU. The caller controls completion: "manual" (complete_next /
  complete_through / complete_all) or "auto" (every query first completes everything pending).

Neither engine is thread-safe: one engine per rank scheduler (use two for separate backup and
load-back streams, as SGLang does).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

from tiercheck.impl.pools import KVPool, SlotError

D2H = "d2h"
H2D = "h2d"


@dataclass(frozen=True)
class TransferOp:
    op_id: int
    kind: str  # D2H or H2D
    src_slots: tuple[int, ...]
    dst_slots: tuple[int, ...]


class TransferEngine(ABC):
    """Common part: validation, op ids, FIFO bookkeeping. Subclasses move the bytes."""

    def __init__(self, device_pool: KVPool, host_pool: KVPool) -> None:
        if device_pool.layout != host_pool.layout:
            raise ValueError("transfer engine: device and host pools have different layouts")
        self.device_pool = device_pool
        self.host_pool = host_pool
        self._ops: list[TransferOp] = []  # every submitted op, index == op id
        self._done = 0  # ops [0, _done) have completed
        self._polled = 0  # ops [0, _polled) were already returned by poll()

    # -- submission ------------------------------------------------------------------------
    def submit_d2h(self, dev_slots, host_slots, **kw) -> int:
        """Copy device pages -> host pages (backup). Returns the op id."""
        return self._submit(D2H, self.device_pool, dev_slots, self.host_pool, host_slots, **kw)

    def submit_h2d(self, host_slots, dev_slots, **kw) -> int:
        """Copy host pages -> device pages (load-back). Returns the op id."""
        return self._submit(H2D, self.host_pool, host_slots, self.device_pool, dev_slots, **kw)

    def _submit(self, kind, src_pool, src, dst_pool, dst, **kw) -> int:
        what = f"submit_{kind}"
        src = src_pool.allocator.require_allocated(src, what)
        dst = dst_pool.allocator.require_allocated(dst, what)
        if len(src) != len(dst):
            raise ValueError(f"{what}: {len(src)} source slots but {len(dst)} destination slots")
        if len(set(dst)) != len(dst):
            raise SlotError(f"{what}: a destination slot appears twice")
        op = TransferOp(len(self._ops), kind, tuple(src), tuple(dst))
        self._ops.append(op)
        self._launch(op, **kw)
        return op.op_id

    # -- completion ------------------------------------------------------------------------
    # What HiCache uses: completed() / poll() (writing_check, loading_check) and wait(op)
    # (a blocking write-back); op ``k`` is done iff ``k < completed()``.
    def completed(self) -> int:
        """Number of ops finished: ops 0 .. completed()-1 are done. Never blocks."""
        self._advance()
        return self._done

    def poll(self) -> list[int]:
        """Ids of ops finished since the previous poll(), in FIFO order. Never blocks."""
        done = self.completed()
        ids = list(range(self._polled, done))
        self._polled = done
        return ids

    def wait(self, op_id: int) -> None:
        """Block until op ``op_id`` (and every op before it) is done."""
        self._check_id(op_id)
        self._wait_through(op_id)

    def op(self, op_id: int) -> TransferOp:
        self._check_id(op_id)
        return self._ops[op_id]

    def _check_id(self, op_id: int) -> None:
        if not 0 <= op_id < len(self._ops):
            raise ValueError(f"unknown transfer op id {op_id} ({len(self._ops)} submitted)")

    @abstractmethod
    def _launch(self, op: TransferOp, **kw) -> None: ...

    @abstractmethod
    def _advance(self) -> None:
        """Move self._done forward over finished ops (non-blocking)."""

    @abstractmethod
    def _wait_through(self, op_id: int) -> None: ...


class DeferredTransferEngine(TransferEngine):
    """CPU engine: bytes move when an op completes, not when it is submitted."""

    MODES = ("manual", "auto")

    def __init__(self, device_pool: KVPool, host_pool: KVPool, *, mode: str = "auto") -> None:
        if mode not in self.MODES:
            raise ValueError(f"transfer engine mode must be one of {self.MODES}, got {mode!r}")
        super().__init__(device_pool, host_pool)
        self.mode = mode

    def _launch(self, op: TransferOp, **kw) -> None:
        if kw:
            raise TypeError(f"DeferredTransferEngine: unsupported options {sorted(kw)}")

    def _pools(self, op: TransferOp) -> tuple[KVPool, KVPool]:
        if op.kind == D2H:
            return self.device_pool, self.host_pool
        return self.host_pool, self.device_pool

    def _copy(self, op: TransferOp) -> None:
        # Copies whatever the slots hold NOW: if a slot was freed/reused since submit, the
        # wrong bytes travel (or land on the new owner's page), exactly the GPU failure mode.
        src_pool, dst_pool = self._pools(op)
        if op.src_slots:
            src = torch.tensor([s - src_pool.base for s in op.src_slots], dtype=torch.int64)
            dst = torch.tensor([s - dst_pool.base for s in op.dst_slots], dtype=torch.int64)
            dst_pool.data[dst.to(dst_pool.device)] = src_pool.data[src.to(src_pool.device)].to(dst_pool.device)

    def complete_next(self) -> int | None:
        """Complete the oldest pending op; its id, or None when nothing is pending."""
        if self._done == len(self._ops):
            return None
        op = self._ops[self._done]
        self._copy(op)
        self._done += 1
        return op.op_id

    def complete_through(self, op_id: int) -> list[int]:
        """Complete every pending op up to and including ``op_id`` (FIFO); their ids."""
        self._check_id(op_id)
        ids = []
        while self._done <= op_id:
            ids.append(self.complete_next())
        return ids

    def complete_all(self) -> list[int]:
        return self.complete_through(len(self._ops) - 1) if self._ops else []

    def _advance(self) -> None:
        if self.mode == "auto":
            self.complete_all()

    def _wait_through(self, op_id: int) -> None:
        # Waiting lets the "stream" catch up to op_id, in either mode.
        self.complete_through(op_id)


class CudaTransferEngine(TransferEngine):
    """Copies on a dedicated stream; an event recorded after each op is its ack.

    delay_cycles > 0 queues torch.cuda._sleep(delay_cycles) on the copy stream before every
    copy (or per op: submit_*(..., delay_cycles=n)), so that a slot freed or reused too early
    is overwritten / read before the copy runs and shows up as wrong bytes.
    """

    def __init__(self, device_pool: KVPool, host_pool: KVPool, *, delay_cycles: int = 0) -> None:
        super().__init__(device_pool, host_pool)
        if device_pool.device.type != "cuda":
            raise ValueError("CudaTransferEngine needs a device pool on CUDA")
        if not host_pool.data.is_pinned():
            raise ValueError("CudaTransferEngine needs a pinned host pool (async copies)")
        self.delay_cycles = delay_cycles
        self.stream = torch.cuda.Stream(device=device_pool.device)
        self._events: list[torch.cuda.Event] = []

    def _launch(self, op: TransferOp, *, delay_cycles: int | None = None) -> None:
        src_pool, dst_pool = (
            (self.device_pool, self.host_pool) if op.kind == D2H else (self.host_pool, self.device_pool)
        )
        delay = self.delay_cycles if delay_cycles is None else delay_cycles
        producer = torch.cuda.current_stream(self.device_pool.device)
        with torch.cuda.stream(self.stream):
            # The copy must see everything the compute stream wrote into the pages so far.
            self.stream.wait_stream(producer)
            if delay > 0:
                torch.cuda._sleep(delay)
            for s0, d0, n in _runs(op.src_slots, op.dst_slots, src_pool.base, dst_pool.base):
                dst_pool.data[d0 : d0 + n].copy_(src_pool.data[s0 : s0 + n], non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.stream)
        self._events.append(event)

    def _advance(self) -> None:
        while self._done < len(self._events) and self._events[self._done].query():
            self._done += 1

    def _wait_through(self, op_id: int) -> None:
        self._events[op_id].synchronize()
        self._advance()

    def fence(self, op_id: int) -> None:
        """Make the current (compute) stream wait for op ``op_id`` without blocking the host:
        needed before kernels read pages loaded by an H->D op that completed() has not seen."""
        self._check_id(op_id)
        torch.cuda.current_stream(self.device_pool.device).wait_event(self._events[op_id])


def _runs(src, dst, src_base, dst_base):
    """Group (src, dst) slot pairs into runs consecutive on both sides: (src_row, dst_row, n)."""
    runs = []
    for s, d in zip(src, dst):
        s, d = s - src_base, d - dst_base
        if runs and runs[-1][0] + runs[-1][2] == s and runs[-1][1] + runs[-1][2] == d:
            runs[-1][2] += 1
        else:
            runs.append([s, d, 1])
    return [tuple(r) for r in runs]


def make_engine(
    device_pool: KVPool, host_pool: KVPool, *, mode: str = "auto", delay_cycles: int = 0
) -> TransferEngine:
    """mode "auto": the CUDA engine when the device pool is on CUDA, else the deferred engine
    completing on every query. mode "manual": the deferred engine on any device, completed by
    the caller (a GPU completes its own copies, so caller-ordered completion needs deferral)."""
    if mode not in DeferredTransferEngine.MODES:
        raise ValueError(f"transfer engine mode must be one of {DeferredTransferEngine.MODES}, got {mode!r}")
    if device_pool.device.type == "cuda" and mode == "auto":
        return CudaTransferEngine(device_pool, host_pool, delay_cycles=delay_cycles)
    if delay_cycles:
        raise ValueError("delay_cycles needs the CUDA engine (a CUDA device pool and mode='auto')")
    return DeferredTransferEngine(device_pool, host_pool, mode=mode)

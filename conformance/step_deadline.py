"""A step of the implementation that never returns is a finding, not a stuck CI job.

Conformance runs each implementation step (apply, then the snapshot and self-check)
under a deadline: past it, the step is interrupted where it loops and reported like a
crash, with the implementation's innermost frame (tiercheck.conformance.crash). The
deadline is SIGALRM, so it applies in the main thread of a Unix process (where the
conformance loops run); elsewhere a step runs unguarded. A timer someone else set
(a test harness's) is kept: whichever fires first wins, and the outer one is re-armed
with what is left of it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager

from tiercheck.errors import UserError

ENV = "TIERCHECK_STEP_TIMEOUT"
DEFAULT_SECONDS = 120.0  # steps take milliseconds; a gloo step's own timeouts end well before this


class StepTimeout(Exception):
    """The implementation did not return from a step within the deadline. ``frames``: the
    stack of the thread it is stuck in (a lock-step rank's worker thread, when the main
    thread was only waiting for it), innermost last, for crash.implementation_frame."""

    def __init__(self, message: str, frames=()):
        super().__init__(message)
        self.frames = list(frames)


# Where a thread blocks waiting for another (innermost frame in one of these standard
# library modules): the main thread there is waiting for a worker, not stuck itself.
_WAITS = ("threading.py", "queue.py", os.path.join("concurrent", "futures", "_base.py"), "selectors.py")


def _waits(frame) -> bool:
    return frame is not None and frame.f_code.co_filename.endswith(_WAITS)


def _stuck_thread(main_frame):
    """(ident, name, stack) of the thread the step is stuck in: another thread busy in
    implementation code (its innermost frame there: an idle worker waits in the standard
    library), else, where the main thread is only waiting (in a standard-library wait),
    one with implementation frames waiting, else the main thread. (An idle worker that
    another driver left behind is not blamed for the main thread's own loop.)"""
    from .crash import in_implementation  # crash imports nothing of this module

    names = {t.ident: t.name for t in threading.enumerate()}
    main = threading.main_thread().ident
    busy, waiting = [], []
    for ident, frame in sys._current_frames().items():
        stack = traceback.extract_stack(frame)
        if ident == main or ident in _reported or not any(in_implementation(f.filename) for f in stack):
            continue
        found = (ident, names.get(ident, f"thread {ident}"), stack)
        (busy if in_implementation(stack[-1].filename) else waiting).append(found)
    found = busy or (waiting if _waits(main_frame) else [])
    return found[0] if found else (main, threading.main_thread().name, traceback.extract_stack(main_frame))


def _interrupt(ident: int) -> None:
    """Raise StepTimeout in another thread too (CPython: at its next bytecode), so a
    spinning worker unwinds instead of burning a core for the rest of the process; a
    thread blocked in native code stays, and is not reported again."""
    _reported.add(ident)
    try:
        import ctypes

        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(StepTimeout))
    except (ImportError, AttributeError):  # not CPython: the thread is left running
        pass


_reported: set[int] = set()  # threads an earlier deadline named (and tried to stop)


def step_seconds() -> float | None:
    """The deadline in seconds from TIERCHECK_STEP_TIMEOUT (0 turns it off), else the default."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise UserError(f"{ENV}={raw!r}: expected a number of seconds >= 0 (0 turns the deadline off)")
    return value or None


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextmanager
def step_deadline(limit: float | None):
    """Run the body under ``limit`` seconds (None: no deadline; read it once per run with
    step_seconds(), outside the code whose errors count as the implementation's)."""
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0] if _can_alarm() else 0.0
    if limit is None or not _can_alarm() or 0 < outer_left <= limit:
        yield  # no deadline, or an outer timer fires first anyway
        return

    def fire(signum, frame):
        ident, name, stack = _stuck_thread(frame)
        where = ""
        if ident != threading.main_thread().ident:
            _interrupt(ident)
            where = f"; still running in thread {name}"
        raise StepTimeout(f"the implementation did not return within {limit:g} s ({ENV}){where}", stack)

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - started), 1e-3))

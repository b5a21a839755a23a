"""An implementation crash, described so that it points at the bug: the exception, the
innermost frame of the implementation's own code (file:line, function) and the action
being performed."""

from __future__ import annotations

import os
import re
import sysconfig
import traceback
from pathlib import Path

_CONFORMANCE = str(Path(__file__).resolve().parent)
_IMPL = str(Path(__file__).resolve().parent.parent / "impl")
_STDLIB = {str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "platstdlib")}
_SITE = {str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("purelib", "platlib")}


def _within(path: str, roots) -> bool:
    return any(path == r or path.startswith(r + os.sep) for r in roots)


# GlooHiCache re-raises a rank's error in the driver with the rank's formatted traceback
# as a note (the traceback itself does not survive pickling): impl/hicache/gloo.py _call.
_REMOTE = re.compile(r"\(raised on gloo rank (\d+)\)\n")
_FRAME = re.compile(r'^  File "([^"]+)", line (\d+), in (\S+)$', re.M)


def remote_frames(exc: BaseException) -> tuple[int | None, list[traceback.FrameSummary]]:
    """(gloo rank, the frames of its traceback) for an error a gloo rank raised, else
    (None, []). Only the last traceback of the note: the error's own, not its context's."""
    for note in getattr(exc, "__notes__", ()):
        m = _REMOTE.match(note)
        if m:
            text = note[m.end():].rsplit("Traceback (most recent call last):", 1)[-1]
            return int(m.group(1)), [traceback.FrameSummary(f, int(line), name, lookup_line=False)
                                     for f, line, name in _FRAME.findall(text)]
    return None, []


def implementation_frame(exc: BaseException, roots=()) -> traceback.FrameSummary | None:
    """The innermost frame in the implementation: under ``roots`` (a driver's
    ``source_roots``) or tiercheck.impl; failing that, the innermost frame outside
    conformance, the standard library and third-party packages; failing that, the last.
    For an error from a gloo rank, the frames are that rank's (not the driver's re-raise);
    for a step that timed out, the stuck thread's (step_deadline.StepTimeout.frames)."""
    frames = getattr(exc, "frames", None) or remote_frames(exc)[1] or traceback.extract_tb(exc.__traceback__)
    resolved = [(f, str(Path(f.filename).resolve())) for f in frames]
    own = [str(Path(r).resolve()) for r in roots] + [_IMPL]
    for f, path in reversed(resolved):
        if _within(path, own):
            return f
    for f, path in reversed(resolved):
        if not _within(path, [_CONFORMANCE, *_STDLIB, *_SITE]):
            return f
    return frames[-1] if frames else None


def in_implementation(filename: str) -> bool:
    """Whether a frame's file is implementation code: tiercheck.impl, or anything outside
    conformance, the standard library and third-party packages (an adapter's target)."""
    path = str(Path(filename).resolve())
    return _within(path, [_IMPL]) or not _within(path, [_CONFORMANCE, *_STDLIB, *_SITE])


def short_path(filename: str) -> str:
    """A path relative to the tiercheck tree or the current folder, else the file name."""
    path = Path(filename).resolve()
    for base in (Path(_IMPL).parent, Path.cwd()):
        try:
            return str(path.relative_to(base))
        except ValueError:
            continue
    return path.name


def describe_crash(exc: BaseException, action, driver=None) -> str:
    f = implementation_frame(exc, getattr(driver, "source_roots", ()))
    where = f" at {short_path(f.filename)}:{f.lineno} in {f.name}()" if f else ""
    rank = remote_frames(exc)[0]
    if rank is not None:
        where += f" on gloo rank {rank}"
    return f"{type(exc).__name__}: {exc}{where}, raised by {action}"

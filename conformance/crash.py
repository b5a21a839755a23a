"""An implementation crash, described so that it points at the bug: the exception, the
innermost frame of the implementation's own code (file:line, function) and the action
being performed."""

from __future__ import annotations

import os
import sysconfig
import traceback
from pathlib import Path

_CONFORMANCE = str(Path(__file__).resolve().parent)
_IMPL = str(Path(__file__).resolve().parent.parent / "impl")
_STDLIB = {str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "platstdlib")}
_SITE = {str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("purelib", "platlib")}


def _within(path: str, roots) -> bool:
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def implementation_frame(exc: BaseException, roots=()) -> traceback.FrameSummary | None:
    """The innermost frame in the implementation: under ``roots`` (a driver's
    ``source_roots``) or tiercheck.impl; failing that, the innermost frame outside
    conformance, the standard library and third-party packages; failing that, the last."""
    frames = traceback.extract_tb(exc.__traceback__)
    resolved = [(f, str(Path(f.filename).resolve())) for f in frames]
    own = [str(Path(r).resolve()) for r in roots] + [_IMPL]
    for f, path in reversed(resolved):
        if _within(path, own):
            return f
    for f, path in reversed(resolved):
        if not _within(path, [_CONFORMANCE, *_STDLIB, *_SITE]):
            return f
    return frames[-1] if frames else None


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
    return f"{type(exc).__name__}: {exc}{where}, raised by {action}"

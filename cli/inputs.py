"""The validation layer: every input is checked before any work starts.

Files are read only when they are regular files under a size cap (a FIFO would block, a
device like /dev/zero never ends, a directory is not a file); output paths are checked to be
writable up front, so minutes of work never end in "cannot write"; command-line numbers
are bounded by argparse types. Every refusal is a one-line UserError (exit 2) naming the
input and, for a cap, the cap.
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

from tiercheck.errors import UserError

MODEL_BYTES = 1 << 20  # a model file is a few hundred bytes; 1 MiB is far beyond any real one
TRACE_BYTES = 256 << 20  # the longest counterexamples and tours are a few MiB


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_text(path, what: str, limit: int) -> str:
    """The text of a regular file of at most ``limit`` bytes, or a one-line UserError."""
    p = Path(path)
    try:
        st = p.stat()  # stat never blocks, unlike opening a FIFO
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: not a {what} ({_kind(st.st_mode)})")
    if st.st_size > limit:
        raise UserError(f"{path}: {what} is {st.st_size:,} bytes, over the {limit:,}-byte cap")
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)  # the file may have grown since stat
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UserError(f"{path}: {what} is over the {limit:,}-byte cap")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: {what} is not UTF-8 text (byte {exc.start})") from None


def _writable_dir(d: Path, flag: str, path) -> None:
    """``d`` exists as a writable directory, or can be created under a writable one."""
    probe = d
    while not probe.exists():
        if probe.is_symlink():
            raise UserError(f"{flag} {path}: {probe} is a dangling link")
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"{flag} {path}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: {probe} is not writable")


def output_file(path, flag: str) -> Path:
    """Check, before any work, that a file can be written at ``path`` (missing folders
    are creatable; the writer creates them; nothing is created on a refusal)."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{flag} {path}: is a directory (a file is expected)")
    if p.exists() and not os.access(p, os.W_OK):
        raise UserError(f"{flag} {path}: exists and is not writable")
    if p.exists():
        _not_blocking(p, flag, path)
    _writable_dir(p.parent, flag, path)
    return p


def _not_blocking(p: Path, flag: str, path) -> None:
    """An existing output that is not a regular file: a FIFO, a socket or a block device
    is refused (writing to a FIFO nobody reads blocks forever, and a reader that comes and
    goes cannot be checked up front); character devices such as /dev/null are fine."""
    mode = p.stat().st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISBLK(mode):
        raise UserError(f"{flag} {path}: is {_kind(mode)} (a file is expected)")


def output_dir(path, flag: str) -> Path:
    """Check, before any work, that ``path`` is, or can be created as, a writable directory."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(f"{flag} {path}: exists and is not a directory")
    _writable_dir(p, flag, path)
    return p


def write_atomic(path, text: str) -> None:
    """Write ``text`` via a temporary file renamed into place; no .tmp is left on failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# --- command-line numbers ------------------------------------------------------------------


def int_in(lo: int, hi: int | None = None):
    """An argparse type: an integer in [lo, hi] (hi None: no upper bound)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            bound = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
            raise argparse.ArgumentTypeError(f"must be an integer {bound}, got {v}")
        return v

    parse.__name__ = "integer"
    return parse


def positive_float(hi: float | None = None):
    """An argparse type: a finite number > 0 (and <= hi)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (v > 0 and v != float("inf")) or (hi is not None and v > hi):
            bound = f"(0, {hi:g}]" if hi is not None else "> 0"
            raise argparse.ArgumentTypeError(f"must be a number {bound}, got {text}")
        return v

    parse.__name__ = "number"
    return parse


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def memory_size(text: str) -> int:
    """An argparse type: a byte count like 512M, 4G or 0.5 (a fraction of this machine's memory)."""
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    try:
        if "." in t and t[-1:].isdigit() and float(t) < 1:
            frac = float(t)
            if frac <= 0:
                raise ValueError
            return int(frac * machine_memory())
        unit = t[-1:] if t[-1:] in _UNITS and not t[-1:].isdigit() else ""
        v = float(t[: len(t) - len(unit)]) * _UNITS[unit]
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"not a memory size (like 512M, 4G or 0.5): {text!r}") from None
    if v < 64 << 20:
        raise argparse.ArgumentTypeError(f"must be at least 64M, got {text}")
    return int(v)


def machine_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30

"""Headless Debian Chromium for the viewer tests (apt-get install -y chromium): the DOM
after the page's scripts ran, and screenshots. Every run gets a fresh profile and no
network (the page must not need any)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--disable-extensions",
]


def executable():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(args, timeout):
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        cmd = [executable(), *FLAGS, f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def dump_dom(url: str, timeout: float = 120) -> str:
    proc = _run(["--virtual-time-budget=5000", "--dump-dom", url], timeout)
    if proc.returncode != 0 or "<html" not in proc.stdout:
        raise RuntimeError(f"chromium --dump-dom failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def screenshot(url: str, out: Path, size=(1400, 900), timeout: float = 120) -> Path:
    out = Path(out)
    proc = _run(["--virtual-time-budget=5000", f"--window-size={size[0]},{size[1]}", f"--screenshot={out}", url], timeout)
    if proc.returncode != 0 or not out.is_file():
        raise RuntimeError(f"chromium --screenshot failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return out

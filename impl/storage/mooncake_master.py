"""Run a real ``mooncake_master`` on loopback: start on free ports, wait until healthy,
and kill (SIGKILL) / pause (SIGSTOP, SIGCONT) / restart it for fault tests.

The master keeps object metadata in memory only, so a restart loses every object: that
is one of the ways an acked page vanishes from L3.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

from tiercheck.errors import UserError

HOST = "127.0.0.1"


def find_master_binary() -> str | None:
    """The real master binary: the one inside the mooncake package (the console script on
    PATH is a Python wrapper that execs it), else ``mooncake_master`` on PATH."""
    spec = importlib.util.find_spec("mooncake")  # does not import the package
    for d in (spec.submodule_search_locations or []) if spec else []:
        p = os.path.join(d, "mooncake_master")
        if os.path.isfile(p):
            return p
    return shutil.which("mooncake_master")


def free_port() -> int:
    """A port that was free a moment ago (``--rpc_port=0`` does NOT pick a random port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def master_health(url: str, timeout: float = 1.0) -> dict | None:
    """The master's /health answer, or None when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return json.loads(r.read().decode("utf-8", "replace"))
    except (OSError, ValueError, urllib.error.URLError):
        return None


def wait_master_healthy(url: str, timeout: float = 10.0, proc: subprocess.Popen | None = None) -> bool:
    """Poll /health until it reports service_ready (False on timeout or if ``proc`` died).

    Call this before a client's setup(): setup against a master that is not up retries
    for about 90 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        h = master_health(url, timeout=0.5)
        if h and h.get("service_ready") is True:
            return True
        time.sleep(0.02)
    return False


def _die_with_parent():
    # In the child before exec: SIGKILL the master if the parent thread dies (no orphans).
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class MooncakeMaster:
    """One master process bound to 127.0.0.1. Ports are picked free unless given."""

    def __init__(self, binary: str | None = None, rpc_port: int | None = None,
                 metrics_port: int | None = None, extra_args: tuple[str, ...] = ()) -> None:
        self.binary = binary or find_master_binary()
        if not self.binary:
            raise UserError("mooncake_master not found: pip install "
                            "mooncake-transfer-engine-non-cuda==0.3.13.post1")
        self._fixed_ports = rpc_port is not None and metrics_port is not None
        self.rpc_port = rpc_port
        self.metrics_port = metrics_port
        self.extra_args = tuple(extra_args)
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self._logdir = tempfile.mkdtemp(prefix="tiercheck-mooncake-master-")
        self.log_path = os.path.join(self._logdir, "master.log")
        self.starts = 0

    @property
    def address(self) -> str:
        """``host:port`` of the RPC endpoint, as a client's master_server_addr."""
        return f"{HOST}:{self.rpc_port}"

    @property
    def health_url(self) -> str:
        return f"http://{HOST}:{self.metrics_port}/health"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _argv(self) -> list[str]:
        return [self.binary, f"--rpc_address={HOST}", f"--rpc_port={self.rpc_port}",
                f"--metrics_host={HOST}", f"--metrics_port={self.metrics_port}",
                "--enable_http_metadata_server=false", *self.extra_args]

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
            return lines[-1] if lines else "(empty log)"
        except OSError:
            return "(no log)"

    def start(self, timeout: float = 15.0) -> "MooncakeMaster":
        """Launch and wait for /health service_ready. Retries on fresh ports if a picked
        port was taken in the meantime."""
        if self.alive():
            raise RuntimeError(f"mooncake master already running on {self.address}")
        attempts = 1 if self._fixed_ports else 3
        for _ in range(attempts):
            if not self._fixed_ports:
                self.rpc_port, self.metrics_port = free_port(), free_port()
            os.makedirs(self._logdir, exist_ok=True)
            log = open(self.log_path, "ab")
            main = threading.current_thread() is threading.main_thread()
            self.proc = subprocess.Popen(self._argv(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent if main else None)
            log.close()
            self.paused = False
            if wait_master_healthy(self.health_url, timeout, self.proc):
                self.starts += 1
                return self
            self._reap(signal.SIGKILL)
        raise RuntimeError(f"mooncake master did not become healthy on {self.address} "
                           f"within {timeout:.0f}s: {self._log_tail()} (log {self.log_path})")

    def _reap(self, sig: int) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if self.paused and sig != signal.SIGKILL:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.paused = False

    def kill(self) -> None:
        """SIGKILL: clients' calls then fail with RPC_FAIL (-900) after a few seconds."""
        self._reap(signal.SIGKILL)

    def pause(self) -> None:
        """SIGSTOP: clients' calls block (up to ~30 s, then RPC_TIMEOUT -901)."""
        if not self.alive():
            raise RuntimeError("mooncake master is not running")
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def restart(self, timeout: float = 15.0) -> "MooncakeMaster":
        """Kill (if alive) and start again on the same ports: all metadata is lost."""
        self._reap(signal.SIGKILL)
        fixed, self._fixed_ports = self._fixed_ports, True
        try:
            return self.start(timeout)
        finally:
            self._fixed_ports = fixed

    def stop(self) -> None:
        """Terminate the master and remove its log."""
        self._reap(signal.SIGTERM)
        shutil.rmtree(self._logdir, ignore_errors=True)

    def __enter__(self) -> "MooncakeMaster":
        return self.start() if not self.alive() else self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "paused" if self.paused else ("up" if self.alive() else "down")
        return f"MooncakeMaster({self.address}, {state})"

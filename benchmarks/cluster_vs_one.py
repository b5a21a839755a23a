"""One model checked in one process and on a local Dask cluster, side by side: counts,
wall time, CPU seconds and peak memory of each run's whole process tree (Linux /proc,
sampled every half second), and the load average.

    python benchmarks/cluster_vs_one.py wt-storage-2r               # --cluster local:2
    python benchmarks/cluster_vs_one.py wt-mirror-1r --workers 3

The results are in docs/cluster.md ("Measured").
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _children() -> dict:
    out: dict = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out.setdefault(int(fields[1]), []).append(int(d))
    return out


def _tree(pid: int) -> list:
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _sample(pid: int):
    """(CPU seconds, resident bytes) of one process, (0, 0) once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0.0, 0
    return (int(fields[11]) + int(fields[12])) / TICK, rss


def measure(argv) -> dict:
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cpu: dict = {}
    peak_sum = peak_one = 0
    while proc.poll() is None:
        samples = {p: _sample(p) for p in _tree(proc.pid)}
        for p, (c, _r) in samples.items():
            cpu[p] = max(cpu.get(p, 0.0), c)
        rss = [r for _c, r in samples.values()]
        peak_sum, peak_one = max(peak_sum, sum(rss)), max(peak_one, max(rss, default=0))
        time.sleep(0.5)
    out = proc.stdout.read()
    found = re.search(r"([\d,]+) distinct states, ([\d,]+) transitions", out)
    return {
        "rc": proc.returncode,
        "counts": found.group(0) if found else out.strip().splitlines()[-1:],
        "wall_s": round(time.monotonic() - t0, 1),
        "cpu_s": round(sum(cpu.values()), 1),
        "peak_rss_mb_all": peak_sum >> 20,
        "peak_rss_mb_largest": peak_one >> 20,
        "verdicts": sorted(set(re.findall(r"^\s+\w+\s+(holds|violated|unknown|not checked.*)$", out, re.M))),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--workers", type=int, default=2, help="Dask worker processes (default 2)")
    args = ap.parse_args()
    if not os.path.isdir("/proc"):
        print("cluster_vs_one: needs Linux /proc to sample the process trees", file=sys.stderr)
        return 2
    base = [sys.executable, "-m", "tiercheck.cli", "check", args.model, "--quiet"]
    for label, argv in (("one process", base), (f"--cluster local:{args.workers}", base + ["--cluster", f"local:{args.workers}"])):
        load = open("/proc/loadavg").read().split()[:3]
        print(f"{label:22} {measure(argv)}  load before {' '.join(load)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

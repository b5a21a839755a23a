"""Checker throughput and memory on shipped models: the packed-state engine with 1..N
workers against a reference breadth-first search over full states (the design the
checker had before: a dict of State objects, a deque, the same spec and properties).

    python benchmarks/checker_scale.py                       # default model set
    python benchmarks/checker_scale.py --models wt-mirror-2r --workers 1,2 --no-reference

Each configuration runs in its own process (clean caches, its own peak RSS, workers
included). Printed per run: distinct states, transitions, seconds, distinct states per
second, peak RSS. The machine's other load is printed too: on a shared machine, compare
runs from the same invocation only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import deque

DEFAULT_MODELS = ["wt-mirror-1r", "wb-reclaim-storage-1r", "wt-storage-2r", "wt-mirror-mla-2r"]


def _reference(m, props):
    """The pre-packing design: full states in a dict, FIFO queue, same checks."""
    inv = [p for p in props if p.kind == "invariant"]
    trans = [p for p in props if p.kind == "transition"]
    index, queue, transitions = {}, deque(), 0
    for s in m.init_states():
        index.setdefault(s, len(index))
        queue.append(s)
    while queue:
        s = queue.popleft()
        for p in inv:
            p.fn(m, s)
        if not m.constraint(s):
            continue
        for a, t in m.successors(s):
            transitions += 1
            if t == s:
                continue
            for p in trans:
                p.fn(m, s, a, t)
            if t not in index:
                index[t] = len(index)
                queue.append(t)
    return len(index), transitions


def one(model_name: str, engine: str, workers: int, max_states) -> dict:
    from tiercheck.models import model_file
    from tiercheck.models.checker import Checker, resolve_property
    from tiercheck.spec.model import Model

    mf = model_file.load(model_name)
    m = Model(mf.config)
    safety = [p for p in mf.properties if resolve_property(p).kind in ("invariant", "transition")]
    t0 = time.monotonic()
    c0 = time.process_time()
    if engine == "reference":
        distinct, transitions = _reference(m, [resolve_property(p) for p in safety])
        complete = True
    else:
        res = Checker(m, safety, workers=workers, max_states=max_states).run()
        distinct, transitions, complete = res.distinct, res.transitions, res.complete
    secs = time.monotonic() - t0
    rss = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    return {
        "model": model_name,
        "engine": engine,
        "workers": workers,
        "distinct": distinct,
        "transitions": transitions,
        "complete": complete,
        "seconds": round(secs, 2),
        "owner_cpu_s": round(time.process_time() - c0, 2),
        "states_per_s": round(distinct / max(secs, 1e-9)),
        "peak_rss_mb": rss // 1024,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    ap.add_argument("--no-reference", action="store_true", help="skip the reference search")
    ap.add_argument("--max-states", type=int, default=None)
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--one", nargs=3, metavar=("MODEL", "ENGINE", "WORKERS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], int(args.one[2]), args.max_states)))
        return 0
    workers = [int(w) for w in args.workers.split(",")]
    rows = []
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    hdr = f"{'model':<26} {'engine':<10} {'w':>2} {'distinct':>10} {'transitions':>12} {'seconds':>9} {'states/s':>9} {'peak MB':>8}"
    print(hdr, flush=True)
    for name in args.models.split(","):
        configs = ([] if args.no_reference else [("reference", 1)]) + [("packed", w) for w in workers]
        for engine, w in configs:
            cmd = [sys.executable, __file__, "--one", name, engine, str(w)]
            if args.max_states:
                cmd += ["--max-states", str(args.max_states)]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{name}: {engine} x{w} failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(r)
            print(
                f"{r['model']:<26} {r['engine']:<10} {r['workers']:>2} {r['distinct']:>10,} {r['transitions']:>12,} "
                f"{r['seconds']:>9.1f} {r['states_per_s']:>9,} {r['peak_rss_mb']:>8,}",
                flush=True,
            )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

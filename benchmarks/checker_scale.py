"""Checker throughput and memory on shipped models, engine against engine, from one run.

Engines: ``reference``, a breadth-first search over full states (a dict of State
objects, a deque, the same spec and properties: the design before packed keys);
``before``, the packed-state search as it was before the footprint memos (plain
expansion of every state, garbage collector running: ``Checker(engine="plain",
pause_gc=False)``); ``plain``, the same with the collector paused; ``fields``, the first
memo (tiercheck.models.footprint); ``memo``, the default engine
(tiercheck.models.element_memo). Each with 1..N workers.

    python benchmarks/checker_scale.py                       # default model set
    python benchmarks/checker_scale.py --models wt-mirror-2r --engines before,fields,memo --workers 1 --max-states 150000
    python benchmarks/checker_scale.py --models wt-mirror-2r --engines memo --workers 2   # the whole model
    python benchmarks/checker_scale.py --models benchmarks/models/wt-mirror-loss-2r.toml --engines memo --workers 1 --no-reference --anchor
        # the scale run (issue 16's 10^7 states), printed under the anchor's row
    python benchmarks/checker_scale.py --models wt-mirror-2r --engines memo@d850133,memo --workers 1 --no-reference
        # the default engine against its element_memo.py at an earlier commit (git show), like for like

Checked: the model's safety properties, or with ``--graph`` all its default properties
(the graph kept and progress/liveness decided, as the anchor did).
With wt-mirror-2r among the models, the issue's anchor (``tiercheck check wt-mirror-2r
--workers 2`` before any of this: 1,169,398 states in 897 s) is printed first, and every
complete run of that model is compared with it.

Each configuration runs in its own process (clean caches, its own peak RSS, workers
included). Printed per run: distinct states, transitions, wall seconds, CPU seconds
(checker and workers), distinct states per wall second and per CPU second, peak RSS;
then each engine's speed-up over the first one listed, on the same model and workers.
On a shared machine wall time depends on the other load (printed, from the load
average, at start and end); CPU seconds much less, so the ratios are given for both.
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
# Issue 16's measurement, before the memo engines (models/CHECKER.md "Measured"): the CPU
# seconds were not recorded, so only distinct states per wall second compare.
ANCHOR = {"model": "wt-mirror-2r", "engine": "anchor", "workers": 2, "distinct": 1_169_398, "transitions": 8_210_612,
          "complete": True, "seconds": 897.0, "cpu_s": None, "states_per_s": 1_304, "states_per_cpu_s": None,
          "peak_rss_mb": 696}
ENGINES = {"before": ("plain", False), "plain": ("plain", True), "fields": ("fields", True), "memo": ("memo", True)}  # engine, pause_gc


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


def _engine_at(engine: str) -> None:
    """Register ``memo@REV``: the element memo as models/element_memo.py was at git
    revision REV of this repository, loaded beside the current modules."""
    import importlib.util
    import tempfile

    from tiercheck.models import checker

    rev = engine.split("@", 1)[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = subprocess.run(["git", "-C", root, "show", f"{rev}:models/element_memo.py"], capture_output=True, text=True, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"element_memo_{rev}", f.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    os.unlink(f.name)
    checker.ENGINES[engine] = mod.ElementMemoExpander
    ENGINES[engine] = (engine, True)


def one(model_name: str, engine: str, workers: int, max_states, graph: bool = False) -> dict:
    from tiercheck.models import model_file
    from tiercheck.models.checker import Checker, resolve_property
    from tiercheck.spec.model import Model

    mf = model_file.load(model_name)
    m = Model(mf.config)
    if "@" in engine:
        _engine_at(engine)
    safety = [p for p in mf.properties if resolve_property(p).kind in ("invariant", "transition")]
    checked = list(mf.properties) if graph else safety
    t0 = time.monotonic()
    c0 = time.process_time()
    if engine == "reference":
        distinct, transitions = _reference(m, [resolve_property(p) for p in safety])
        complete = True
    else:
        engine_name, pause_gc = ENGINES[engine]
        res = Checker(m, checked, workers=workers, max_states=max_states, engine=engine_name, pause_gc=pause_gc).run()
        distinct, transitions, complete = res.distinct, res.transitions, res.complete
    secs = time.monotonic() - t0
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - c0 + kids.ru_utime + kids.ru_stime
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
        "cpu_s": round(cpu, 2),
        "states_per_s": round(distinct / max(secs, 1e-9)),
        "states_per_cpu_s": round(distinct / max(cpu, 1e-9)),
        "peak_rss_mb": rss // 1024,
    }


def speedups(rows):
    """Each engine against the first engine run on the same model and workers, and each
    complete run of the anchor's model against the anchor."""
    out, base = [], {}
    for r in rows:
        if r["engine"] == "anchor":
            continue
        if r["model"] == ANCHOR["model"] and r["complete"]:
            same = (r["distinct"], r["transitions"]) == (ANCHOR["distinct"], ANCHOR["transitions"])
            out.append(
                f"{r['model']} x{r['workers']}: {r['engine']} vs the anchor (x{ANCHOR['workers']}): "
                f"{r['states_per_s'] / ANCHOR['states_per_s']:.1f}x distinct states per wall second "
                f"({'equal counts' if same else 'COUNTS DIFFER'})"
            )
        k = (r["model"], r["workers"])
        if k not in base:
            base[k] = r
            continue
        b = base[k]
        same = "equal counts" if (r["distinct"], r["transitions"]) == (b["distinct"], b["transitions"]) else "COUNTS DIFFER"
        out.append(
            f"{r['model']} x{r['workers']}: {r['engine']} vs {b['engine']}: "
            f"{r['states_per_s'] / max(b['states_per_s'], 1):.1f}x states/s, "
            f"{r['states_per_cpu_s'] / max(b['states_per_cpu_s'], 1):.1f}x states per CPU second ({same})"
        )
    return out


def _print_row(r) -> None:
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    print(
        f"{r['model']:<26} {r['engine']:<10} {r['workers']:>2} {r['distinct']:>10,} {r['transitions']:>12,} "
        f"{r['seconds']:>8.1f} {num(r['cpu_s'], '.1f'):>8} {r['states_per_s']:>9,} {num(r['states_per_cpu_s'], ','):>9} "
        f"{r['peak_rss_mb']:>8,}",
        flush=True,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    ap.add_argument("--engines", default="reference,memo", help=f"comma-separated, from reference,{','.join(ENGINES)}")
    ap.add_argument("--no-reference", action="store_true", help="skip the reference search")
    ap.add_argument("--max-states", type=int, default=None)
    ap.add_argument("--graph", action="store_true",
                    help="check the model's progress and liveness properties too (the graph is kept, as in the anchor)")
    ap.add_argument("--anchor", action="store_true", help="print the anchor's row first whatever the models (side by side)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--one", nargs=3, metavar=("MODEL", "ENGINE", "WORKERS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], int(args.one[2]), args.max_states, args.graph)))
        return 0
    workers = [int(w) for w in args.workers.split(",")]
    engines = [e for e in args.engines.split(",") if not (args.no_reference and e == "reference")]
    unknown = [e for e in engines if e != "reference" and e not in ENGINES and not e.startswith("memo@")]
    if unknown:
        ap.error(f"unknown engines {unknown}")
    rows = []
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    hdr = (
        f"{'model':<26} {'engine':<10} {'w':>2} {'distinct':>10} {'transitions':>12} {'wall s':>8} {'cpu s':>8} "
        f"{'states/s':>9} {'st/cpu-s':>9} {'peak MB':>8}"
    )
    print(hdr, flush=True)
    if args.anchor and ANCHOR["model"] not in args.models.split(","):
        _print_row(ANCHOR)
    for name in args.models.split(","):
        if name == ANCHOR["model"]:
            rows.append(ANCHOR)
            _print_row(ANCHOR)
        configs = [(e, 1) for e in engines if e == "reference"] + [(e, w) for w in workers for e in engines if e != "reference"]
        for engine, w in configs:
            cmd = [sys.executable, __file__, "--one", name, engine, str(w)]
            if args.max_states:
                cmd += ["--max-states", str(args.max_states)]
            if args.graph:
                cmd += ["--graph"]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{name}: {engine} x{w} failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(r)
            _print_row(r)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    for line in speedups(rows):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

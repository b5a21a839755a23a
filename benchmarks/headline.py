"""The engines' headline figures from one run, each beside its anchor and goal.

    python benchmarks/headline.py              # wt-mirror-2r whole, TLC vs tiercheck, the unbounded audit
    python benchmarks/headline.py --quick      # the same three on small inputs (a few minutes)

Three measurements, one after the other, each in the way its own script measures it:

1. the checker on wt-mirror-2r with its default properties (the graph kept, progress and
   liveness decided), 2 workers, as the anchor (``tiercheck check wt-mirror-2r --workers 2``
   before the memo engines: 1,169,398 states in 897 s) ran it (benchmarks/checker_scale.py);
2. TLC on the TLA+ twin against tiercheck on the same models and properties, equal
   distinct counts required (benchmarks/tlc_vs_tiercheck.py);
3. the proof audit with pages unbounded (benchmarks/prove_unbounded.py).

Then one table: figure, measured, anchor, goal, met or not. On a shared machine the wall
figures follow the load (printed at every stage); the CPU figures are printed beside them.
Exits 1 when a run fails, a count differs or an obligation is not proved; a goal that is
not met is reported, not an error (the figures are what they are).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import checker_scale  # noqa: E402  (the benchmarks folder is not a package)
import tlc_vs_tiercheck  # noqa: E402

CHECK_GOAL = 10.0  # issue 16: >= 10x the anchor's distinct states per second
TLC_GOAL = 2.0  # tiercheck >= 2x the fair TLC
AUDIT_GOAL_S = 30.0  # the unbounded audit under 30 s on 2 cores


def _load() -> str:
    return f"load average {os.getloadavg()[0]:.1f}"


def check_stage(model: str, workers: int) -> dict:
    """The checker in a fresh process (its own peak RSS), all default properties."""
    cmd = [sys.executable, str(HERE / "checker_scale.py"), "--one", model, "memo", str(workers), "--graph"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"checker on {model} failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def tlc_stage(models, workers: int, timeout: float) -> list:
    return [tlc_vs_tiercheck.bench(m, workers, timeout) for m in models]


def audit_stage(workers: int) -> dict:
    from tiercheck.proofs.audit import run_audit

    audit = run_audit(workers=workers, unbounded=True)
    return {
        "obligations": len(audit.obligations),
        "failed": len(audit.failed),
        "any_pages": sum(r.pages == "any" for r in audit.obligations),
        "wall": audit.wall,
        "cpu": audit.cpu,
        "workers": audit.workers,
    }


def verdicts(check: dict, tlc: list, audit: dict) -> list:
    """Rows of (figure, measured, anchor, goal, met)."""
    a = checker_scale.ANCHOR
    rows = []
    same = (check["distinct"], check["transitions"]) == (a["distinct"], a["transitions"])
    ratio = check["states_per_s"] / a["states_per_s"]
    rows.append((
        f"check {check['model']} x{check['workers']}, default properties",
        f"{check['distinct']:,} states in {check['seconds']:.0f} s ({check['states_per_s']:,}/s; "
        f"{check['cpu_s']:.0f} cpu-s; {check['peak_rss_mb']:,} MB)",
        f"{a['distinct']:,} in {a['seconds']:.0f} s ({a['states_per_s']:,}/s)" if check["model"] == a["model"] else "-",
        f">= {CHECK_GOAL:.0f}x the anchor's states/s",
        (f"{ratio:.1f}x: {'yes' if ratio >= CHECK_GOAL else 'no'}" + ("" if same else " (counts differ from the anchor's)"))
        if check["model"] == a["model"] else "n/a (another model)",
    ))
    for r in tlc:
        wall, cpu = r["tc_rate"] / r["tlc_rate"], r["tc_cpu_rate"] / r["tlc_cpu_rate"]
        rows.append((
            f"tiercheck / TLC on {r['model']} ({r['tlc']:,} states both)" if r["tlc"] == r["tiercheck"]
            else f"tiercheck / TLC on {r['model']} (COUNTS DIFFER: {r['tlc']:,} vs {r['tiercheck']:,})",
            f"{r['tc_rate']:,.0f} vs {r['tlc_rate']:,.0f} states/s ({wall:.1f}x wall, {cpu:.1f}x cpu)",
            "TLC on the same twin, same run",
            f">= {TLC_GOAL:.0f}x",
            f"{'yes' if min(wall, cpu) >= TLC_GOAL else 'wall ' + ('yes' if wall >= TLC_GOAL else 'no') + ', cpu ' + ('yes' if cpu >= TLC_GOAL else 'no')}",
        ))
    rows.append((
        f"tiercheck prove --unbounded ({audit['workers']} workers)",
        f"{audit['obligations'] - audit['failed']}/{audit['obligations']} proved, {audit['any_pages']} for any pages, "
        f"{audit['wall']:.1f} s wall, {audit['cpu']:.1f} cpu-s",
        "39 s, 520 obligations, pages <= 2 (issue 16)",
        f"< {AUDIT_GOAL_S:.0f} s, all for any pages",
        f"time {'yes' if audit['wall'] < AUDIT_GOAL_S else 'no'}, "
        f"any pages {audit['any_pages']}/{audit['obligations']}",
    ))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small inputs: wt-mirror-1r for the checker, wt-storage-1r for TLC (a smoke run, not the figures)")
    ap.add_argument("--model", help="checker model (default wt-mirror-2r, the anchor's)")
    ap.add_argument("--workers", type=int, default=2, help="checker workers, TLC workers and proof workers (default 2)")
    ap.add_argument("--tlc-models", nargs="+", help=f"default {' '.join(tlc_vs_tiercheck.DEFAULT_MODELS)}")
    ap.add_argument("--timeout", type=float, default=3600, help="per TLC / tiercheck run, seconds")
    ap.add_argument("--json", metavar="FILE", help="also write every measurement as JSON")
    args = ap.parse_args(argv)
    model = args.model or ("wt-mirror-1r" if args.quick else checker_scale.ANCHOR["model"])
    tlc_models = args.tlc_models or (["wt-storage-1r"] if args.quick else tlc_vs_tiercheck.DEFAULT_MODELS)
    print(f"{os.cpu_count()} CPUs; {_load()} at start", flush=True)
    try:
        print(f"1/3 checker: {model}, {args.workers} workers, default properties ...", flush=True)
        check = check_stage(model, args.workers)
        print(f"    {check['distinct']:,} states, {check['seconds']:.1f} s; {_load()}", flush=True)
        print(f"2/3 TLC vs tiercheck: {' '.join(tlc_models)} ...", flush=True)
        tlc = tlc_stage(tlc_models, args.workers, args.timeout)
        print(f"    done; {_load()}", flush=True)
        print(f"3/3 the unbounded proof audit, {args.workers} workers ...", flush=True)
        audit = audit_stage(args.workers)
        print(f"    done; {_load()}", flush=True)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"headline: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    rows = verdicts(check, tlc, audit)
    print()
    print("| figure | measured | anchor | goal | met |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"check": check, "tlc": tlc, "audit": audit}, indent=1))
    counts_differ = any(r["tlc"] != r["tiercheck"] for r in tlc)
    return 1 if counts_differ or audit["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""Mutation score of the conformance suite, with cosmic-ray (the `bench` extra).

Every mutant of the implementation (default: impl/hicache/ and impl/transfer.py) is run
against the conformance suite (benchmarks/mutation_suite.py: the default campaign plus
the shipped generated tours; not the unit tests). Prints killed / survived / equivalent
per file, the survivors by file:line, and the score killed / (killed + survived), with
equivalent mutants (judged by hand, listed in benchmarks/mutation_equivalent.txt as
file:line:operator) left out.

cosmic-ray edits the files in place while it runs: use a clean checkout and do not run
anything else from it meanwhile. A full run is hours (each mutant runs the suite):

    python benchmarks/mutation.py --budget 60                      # everything (nightly)
    python benchmarks/mutation.py --module impl/transfer.py --sample 20 --seed 0 --budget 20
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = Path(__file__).resolve().parent / "mutation_equivalent.txt"
# Code the CPU-only suite cannot reach (CUDA engines): FILE:FIRST-LAST per line. Its
# mutants are left out of a run here and counted as "needs CUDA"; run it on a GPU machine.
NEEDS_CUDA = Path(__file__).resolve().parent / "mutation_needs_cuda.txt"
DEFAULT_MODULES = ("impl/hicache", "impl/transfer.py")

try:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult
except ImportError:  # pragma: no cover
    sys.exit("benchmarks/mutation.py needs cosmic-ray: pip install 'tiercheck[bench]'")


def cosmic_ray() -> str:
    """The cosmic-ray command of this interpreter's environment, else the one on PATH."""
    here = Path(sys.executable).parent / "cosmic-ray"
    return str(here) if here.exists() else "cosmic-ray"


def config(modules, budget: float, seed: int, timeout: float) -> str:
    paths = ", ".join(f'"{m}"' for m in modules)
    return (
        "[cosmic-ray]\n"
        f"module-path = [{paths}]\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{sys.executable} benchmarks/mutation_suite.py --budget {budget} --seed {seed}"\n\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )


def _ranges(path: Path):
    out = []
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()] if path.exists() else []
    for line in lines:
        if line:
            f, span = line.rsplit(":", 1)
            lo, hi = span.split("-")
            out.append((f, int(lo), int(hi)))
    return out


def needs_cuda(m) -> bool:
    f = Path(m.module_path).as_posix()
    return any(f == rf and lo <= m.start_pos[0] <= hi for rf, lo, hi in _ranges(NEEDS_CUDA))


def sample(db_path: Path, n, seed: int) -> int:
    """Keep ``n`` random pending mutants (None: all) outside the CUDA-only code; mark the
    rest skipped. Returns how many there were to draw from."""
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        items = sorted(db.pending_work_items, key=lambda w: w.job_id)
        cuda = {w.job_id for w in items if needs_cuda(w.mutations[0]) and not torch_cuda()}
        items_ok = [w for w in items if w.job_id not in cuda]
        n = len(items_ok) if n is None else min(n, len(items_ok))
        keep = set(w.job_id for w in random.Random(seed).sample(items_ok, n))
        for w in items:
            if w.job_id not in keep:
                db.set_result(w.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
        return len(items_ok)


def torch_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def equivalents() -> set:
    if not EQUIVALENT.exists():
        return set()
    lines = (line.split("#")[0].strip() for line in EQUIVALENT.read_text().splitlines())
    return {line for line in lines if line}


def report(db_path: Path) -> int:
    eq = equivalents()
    per_file: dict = {}
    survivors = []
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        items = {w.job_id: w for w in db.work_items}
        for job_id, result in db.results:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            m = items[job_id].mutations[0]
            where = f"{Path(m.module_path).as_posix()}:{m.start_pos[0]}"
            key = f"{where}:{m.operator_name}"
            c = per_file.setdefault(Path(m.module_path).as_posix(), Counter())
            if key in eq or where in eq:
                c["equivalent"] += 1
            elif needs_cuda(m) and result.test_outcome == TestOutcome.SURVIVED:
                c["needs CUDA"] += 1
            elif result.test_outcome == TestOutcome.SURVIVED:
                c["survived"] += 1
                survivors.append(key)
            elif result.test_outcome == TestOutcome.INCOMPETENT:
                c["incompetent"] += 1
            else:
                c["killed"] += 1
    head = f"{'file':36} {'killed':>6} {'survived':>8} {'equivalent':>10} {'incompetent':>11} {'needs CUDA':>10}"
    print(head)
    print("-" * len(head))
    tot = Counter()
    for f, c in sorted(per_file.items()):
        tot.update(c)
        print(f"{f:36} {c['killed']:>6} {c['survived']:>8} {c['equivalent']:>10} {c['incompetent']:>11} "
              f"{c['needs CUDA']:>10}")
    scored = tot["killed"] + tot["survived"]
    print(f"{'total':36} {tot['killed']:>6} {tot['survived']:>8} {tot['equivalent']:>10} {tot['incompetent']:>11} "
          f"{tot['needs CUDA']:>10}")
    if scored:
        print(f"\nscore: {tot['killed']}/{scored} = {100 * tot['killed'] / scored:.1f}% of non-equivalent mutants killed")
    if survivors:
        print("\nsurvivors (file:line:operator):")
        for s in sorted(survivors):
            print(f"  {s}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", action="append", default=[], help="file or folder to mutate (default: %s)"
                    % ", ".join(DEFAULT_MODULES))
    ap.add_argument("--budget", type=float, default=60.0, help="seconds of default campaign per mutant")
    ap.add_argument("--sample", type=int, default=None, help="run only N mutants, drawn with --seed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant before it counts as killed")
    ap.add_argument("--session", default=None, help="session file to create or resume (default: a temporary one)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tiercheck-mutation-"))
    session = Path(args.session) if args.session else work / "session.sqlite"
    if not args.report_only:
        cfg = work / "cosmic-ray.toml"
        cfg.write_text(config(args.module or DEFAULT_MODULES, args.budget, args.seed, args.timeout))
        if not session.exists():
            subprocess.run([cosmic_ray(), "init", str(cfg), str(session)], cwd=ROOT, check=True)
            total = sample(session, args.sample, args.seed)
            print(f"running {min(args.sample or total, total)} of {total} mutants (seed {args.seed})", flush=True)
        subprocess.run([cosmic_ray(), "exec", str(cfg), str(session)], cwd=ROOT, check=True)
    return report(session)


if __name__ == "__main__":
    sys.exit(main())

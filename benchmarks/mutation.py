"""Mutation score of the conformance suite, with cosmic-ray (the `bench` extra).

Mutants of the implementation (default: impl/hicache/ and impl/transfer.py) are run
against the conformance suite (benchmarks/mutation_suite.py: a fixed-count default
campaign plus the shipped generated tours; not the unit tests), one cosmic-ray session.
Before any mutant runs, the session is classified without running anything:
  - equivalent by rule: a mutant inside an annotation of a module with
    ``from __future__ import annotations`` (never evaluated);
  - invalid: the mutated module does not compile (left out);
  - needs CUDA: code only a CUDA device runs (benchmarks/mutation_needs_cuda.txt), left
    out of a CPU run;
  - not reached: a mutant on a line that no unit of the suite executes (the suite's line
    map, mutation_suite.py --map, traced once on the unmutated code) cannot change what
    the suite sees, so it is recorded as survived without running the suite.
The rest (or a sample of ``--sample`` of them, stratified by file) runs through
``cosmic-ray exec`` with ``--timeout`` seconds per mutant; each runs only the suite's
units that execute its line (mutation_suite.py --select), cheapest first. The report
prints killed / timed out / survived / not reached / equivalent per file, the survivors
by file:line:operator and the score killed / (killed + survived); a timed-out mutant is
listed apart (a hang, or a survivor slower than the timeout on a loaded machine).
Equivalent mutants judged by hand are listed with their reason in
benchmarks/mutation_equivalent.txt.

cosmic-ray edits the files in place while it runs: use a clean checkout whose editable
install is the one this interpreter imports, and do not run anything else from it.

    python benchmarks/mutation.py --sample 400 --seed 0 --session mut.sqlite   # a stratified sample
    python benchmarks/mutation.py --session mut.sqlite                        # everything (hours)
    python benchmarks/mutation.py --session mut.sqlite --report-only
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import random
import subprocess
import sys
import tempfile
import warnings
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = Path(__file__).resolve().parent / "mutation_suite.py"
EQUIVALENT = Path(__file__).resolve().parent / "mutation_equivalent.txt"
# Code the CPU-only suite cannot reach (CUDA engines): FILE:FIRST-LAST per line.
NEEDS_CUDA = Path(__file__).resolve().parent / "mutation_needs_cuda.txt"
DEFAULT_MODULES = ("impl/hicache", "impl/transfer.py")

# Why a mutant did not run (the output of its SKIPPED or pre-set result).
NOT_SAMPLED = "not sampled"
NOT_SAMPLED_REACHED = "not sampled: reached"  # --sample-reached: outside a sample of the reached mutants
CUDA = "needs CUDA"
ANNOTATION = "equivalent: inside an annotation, never evaluated"
NOT_REACHED = "not reached: no part of the suite executes this line"
INVALID = "invalid: the mutated module does not compile"
GONE = "gone: the mutated code is no longer in the implementation"  # --rerun-survivors on changed code

try:
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult
except ImportError:  # pragma: no cover
    sys.exit("benchmarks/mutation.py needs cosmic-ray: pip install 'tiercheck[bench]'")


def cosmic_ray() -> str:
    """The cosmic-ray command of this interpreter's environment, else the one on PATH."""
    here = Path(sys.executable).parent / "cosmic-ray"
    return str(here) if here.exists() else "cosmic-ray"


def suite_argv(examples: int, seeds: int, budget) -> list:
    if budget is not None:
        return ["--budget", str(budget)]
    return ["--examples", str(examples), "--seeds", str(seeds)]


def map_path(session: Path) -> Path:
    return session.with_name(session.name + ".map.json")


def config(modules, argv, timeout: float, select=None) -> str:
    """The session's cosmic-ray config; ``select``: the suite's line map (run only the
    units that execute the mutated line)."""
    paths = ", ".join(f'"{m}"' for m in modules)
    cmd = " ".join([sys.executable, "benchmarks/mutation_suite.py", *argv] + (["--select", str(select)] if select else []))
    return (
        "[cosmic-ray]\n"
        f"module-path = [{paths}]\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{cmd}"\n\n'
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


def annotation_spans(path: Path) -> list:
    """((line, col), (end_line, end_col)) of every annotation in ``path``, if the module
    defers them (``from __future__ import annotations``); else none (they run)."""
    tree = ast.parse((ROOT / path).read_text())
    deferred = any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
                   and any(a.name == "annotations" for a in n.names) for n in tree.body)
    if not deferred:
        return []
    spans = []
    for n in ast.walk(tree):
        ann = []
        if isinstance(n, ast.arg):
            ann = [n.annotation]
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            ann = [n.returns]
        elif isinstance(n, ast.AnnAssign):
            ann = [n.annotation]
        spans += [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)) for a in ann if a is not None]
    return spans


# Operators whose mutants may not compile: a `*` replaced (cosmic-ray also mutates the
# bare `*` of a keyword-only signature) and a unary operator replaced (`** -1` ->
# `** not 1`); the others swap one operator, number or keyword for another of the same
# kind. Checking only these (mutating a module with parso takes ~0.1 s a mutant, ~8
# CPU-minutes for all) classifies a session in seconds; a mutant that still did not
# compile would come back from cosmic-ray as incompetent, in the report.
MAY_NOT_COMPILE = ("core/ReplaceBinaryOperator_Mul_", "core/ReplaceUnaryOperator_")


def compiles(m) -> bool:
    """Whether the mutant is Python at all (cosmic-ray also mutates the bare ``*`` of a
    keyword-only signature into ``&``, ``-``, ...)."""
    if not m.operator_name.startswith(MAY_NOT_COMPILE):
        return True
    op = get_operator(m.operator_name)(**(getattr(m, "operator_args", None) or {}))
    code = mutate_code((ROOT / m.module_path).read_text(), op, m.occurrence)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `x is "literal"` mutants compile, with a warning
        try:
            compile(code or "", str(m.module_path), "exec")
        except SyntaxError:
            return False
    return True


def in_annotation(m, spans_of) -> bool:
    f = Path(m.module_path).as_posix()
    lo, hi = tuple(m.start_pos), tuple(m.end_pos)
    return any(a <= lo and hi <= b for a, b in spans_of(f))


def build_map(path: Path, argv) -> dict:
    """Write the suite's per-unit line map of the unmutated code (mutation_suite.py --map)
    and return file -> lines any unit (or the import) executes."""
    subprocess.run([sys.executable, str(SUITE), *argv, "--map", str(path)], cwd=ROOT, check=True)
    return reached_by(json.loads(path.read_text()))


def reached_by(doc) -> dict:
    out = defaultdict(set)
    for part in [doc["import"]] + [u["lines"] for u in doc["units"]]:
        for f, lines in part.items():
            out[f].update(lines)
    return out


def classify(db_path: Path, reached: dict, n, seed: int, reached_only: bool = False) -> dict:
    """Pre-set the results of mutants that need no run and draw the sample (stratified
    by file, every file at least one, the rest in proportion) from the others. With
    ``reached_only``, every mutant on a line no unit executes is recorded as not reached
    (the whole population's reach, exact) and the sample is drawn among the reached ones
    (every run is then spent on a mutant whose verdict is not known in advance). Returns
    counts of each class over the whole session."""
    spans_cache: dict = {}

    def spans_of(f):
        if f not in spans_cache:
            spans_cache[f] = annotation_spans(Path(f))
        return spans_cache[f]

    def is_reached(f, w):
        return w.mutations[0].start_pos[0] in reached.get(f, ())

    counts = Counter()
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        items = sorted(db.pending_work_items, key=lambda w: w.job_id)
        counts["total"] = len(items)
        runnable = defaultdict(list)
        for w in items:
            m = w.mutations[0]
            if needs_cuda(m) and not torch_cuda():
                db.set_result(w.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=CUDA))
                counts[CUDA] += 1
            elif in_annotation(m, spans_of):
                db.set_result(w.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=ANNOTATION))
                counts[ANNOTATION] += 1
            elif not compiles(m):
                db.set_result(w.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=INVALID))
                counts[INVALID] += 1
            else:
                runnable[Path(m.module_path).as_posix()].append(w)
        counts["population"] = sum(len(v) for v in runnable.values())
        everything, unreached = runnable, set()
        if reached_only:
            unreached = {w.job_id for f, ws in runnable.items() for w in ws if not is_reached(f, w)}
            counts[NOT_REACHED] = len(unreached)
            runnable = {f: [w for w in ws if w.job_id not in unreached] for f, ws in runnable.items()}
            runnable = {f: ws for f, ws in runnable.items() if ws}
        pool = sum(len(v) for v in runnable.values())
        rng = random.Random(seed)
        keep = []
        for f, ws in sorted(runnable.items()):
            k = len(ws) if n is None else 0 if n == 0 else min(len(ws), max(1, round(n * len(ws) / pool)))
            keep += rng.sample(ws, k)
        keep_ids = {w.job_id for w in keep}
        not_reached = WorkResult(worker_outcome=WorkerOutcome.NORMAL, test_outcome=TestOutcome.SURVIVED,
                                 output=NOT_REACHED)
        for f, ws in everything.items():
            for w in ws:
                if w.job_id in unreached:
                    db.set_result(w.job_id, not_reached)
                elif w.job_id not in keep_ids:
                    db.set_result(w.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                       output=NOT_SAMPLED_REACHED if reached_only else NOT_SAMPLED))
                elif not is_reached(f, w):
                    db.set_result(w.job_id, not_reached)
                    counts[NOT_REACHED] += 1
        counts["sampled"] = len(keep_ids)
    return counts


def torch_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def equivalents() -> set:
    """Entries of the equivalents list: FILE:LINE, FILE:LINE:OPERATOR, or
    FILE:LINE:OPERATOR => MUTATED LINE (one mutant of an operator that has several on
    that line: the line as the mutant writes it, stripped)."""
    if not EQUIVALENT.exists():
        return set()
    lines = (line.split("  #")[0].strip() for line in EQUIVALENT.read_text().splitlines())
    return {" => ".join(part.strip() for part in line.split("=>", 1)) for line in lines if line and not line.startswith("#")}


def mutated_line(diff: str | None) -> str:
    """The line a mutant writes (the one added line of its diff), stripped; "" if none."""
    added = [x[1:].strip() for x in (diff or "").splitlines() if x.startswith("+") and not x.startswith("+++")]
    return added[0] if len(added) == 1 else ""


def is_equivalent(eq: set, where: str, key: str, diff: str | None) -> bool:
    return where in eq or key in eq or f"{key} => {mutated_line(diff)}" in eq


COLUMNS = ("killed", "timed out", "survived", "not reached", "equivalent", "incompetent")


def tally(db_path: Path):
    """(per file Counter, survivors and timed-out mutants as file:line:operator,
    population Counter)."""
    eq = equivalents()
    per_file: dict = {}
    survivors, timed_out = [], []
    pop = Counter()
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        items = {w.job_id: w for w in db.work_items}
        pop["pending"] = db.num_work_items - db.num_results
        for job_id, result in db.results:
            m = items[job_id].mutations[0]
            f = Path(m.module_path).as_posix()
            pop["total"] += 1
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                pop[result.output or NOT_SAMPLED] += 1
                continue
            where = f"{f}:{m.start_pos[0]}"
            key = f"{where}:{m.operator_name}"
            c = per_file.setdefault(f, Counter())
            if is_equivalent(eq, where, key, result.diff):
                c["equivalent"] += 1
            elif result.test_outcome == TestOutcome.SURVIVED:
                c["not reached" if result.output == NOT_REACHED else "survived"] += 1
                survivors.append(key + (" (not reached)" if result.output == NOT_REACHED else ""))
            elif result.output == "timeout" or result.worker_outcome == WorkerOutcome.ABNORMAL:
                # ABNORMAL: no answer from the worker (cosmic-ray's http distributor gives
                # up on a request after 5 minutes), so a timeout as well.
                c["timed out"] += 1
                timed_out.append(key)
            elif result.test_outcome == TestOutcome.INCOMPETENT or result.worker_outcome != WorkerOutcome.NORMAL:
                c["incompetent"] += 1
            else:
                c["killed"] += 1
    return per_file, survivors, timed_out, pop


def wilson(k: int, n: int, z: float = 1.96):
    """The Wilson score interval of a proportion k/n (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return max(0.0, mid - half), min(1.0, mid + half)


def sampled_reach_report(tot: Counter, pop: Counter) -> None:
    """--sample-reached: reach is exact (every mutant classified by the line map), the
    kill rate of the reached mutants comes from the sample; score = the non-equivalent
    reached share x that kill rate, with the kill rate's 95% interval."""
    sample = sum(tot[k] for k in ("killed", "survived", "timed out", "incompetent", "equivalent")) + pop["pending"]
    reached = pop[NOT_SAMPLED_REACHED] + sample
    unreached = tot["not reached"]
    equiv = tot["equivalent"] / max(sample - pop["pending"], 1)  # the sample's share of equivalent mutants
    live = reached * (1 - equiv)
    ran = tot["killed"] + tot["survived"] + tot["timed out"]  # a timeout counts as a survivor here
    lo, hi = wilson(tot["killed"], ran)
    share = live / (live + unreached)
    print(f"reach (every mutant, exact): {reached} of {reached + unreached} runnable mutants on lines the suite "
          f"executes ({100 * reached / (reached + unreached):.1f}%); {unreached} not reached (survived without a run)")
    print(f"sample: {sample} of the {reached} reached mutants (stratified by file); {pop['pending']} still pending")
    if ran:
        print(f"kill rate of the reached, non-equivalent mutants: {tot['killed']}/{ran} = {100 * tot['killed'] / ran:.1f}% "
              f"(95% CI {100 * lo:.1f}-{100 * hi:.1f}%; {tot['timed out']} timed out counted as survivors, "
              f"{tot['equivalent']} equivalent left out)")
        print(f"estimated score over every non-equivalent mutant: {100 * share * tot['killed'] / ran:.1f}% "
              f"(95% CI {100 * share * lo:.1f}-{100 * share * hi:.1f}%) = reached share {100 * share:.1f}% "
              "x kill rate")


def report(db_path: Path) -> int:
    per_file, survivors, timed_out, pop = tally(db_path)
    head = f"{'file':32}" + "".join(f" {c:>11}" for c in COLUMNS)
    print(head)
    print("-" * len(head))
    tot = Counter()
    for f, c in sorted(per_file.items()):
        tot.update(c)
        print(f"{f:32}" + "".join(f" {c[k]:>11}" for k in COLUMNS))
    print(f"{'total':32}" + "".join(f" {tot[k]:>11}" for k in COLUMNS))
    print(f"\nmutants in the session: {pop['total'] + pop['pending']}; not run: {pop[ANNOTATION]} in annotations "
          f"(equivalent), {pop[INVALID]} that do not compile, {pop[CUDA]} in CUDA-only code, "
          f"{pop[NOT_SAMPLED] + pop[NOT_SAMPLED_REACHED]} not sampled, {pop[GONE]} whose code was removed since; "
          f"{pop['pending']} still pending")
    if pop[NOT_SAMPLED_REACHED]:
        sampled_reach_report(tot, pop)  # not reached is population-wide: no pooled score
    killed = tot["killed"]
    scored = killed + tot["survived"] + tot["not reached"]
    if scored and not pop[NOT_SAMPLED_REACHED]:
        print(f"score: {killed}/{scored} = {100 * killed / scored:.1f}% of non-equivalent mutants killed "
              f"(not reached counts as survived; {tot['timed out']} timed out and {tot['incompetent']} "
              "incompetent left out)")
        ran = killed + tot["survived"]
        print(f"of the mutants the suite reaches: {killed}/{ran} = {100 * killed / max(ran, 1):.1f}% killed")
    if timed_out:
        print("\ntimed out (the suite ran past --timeout: a hang, or a slow survivor):")
        for s in sorted(timed_out):
            print(f"  {s}")
    if survivors:
        print("\nsurvivors (file:line:operator):")
        for s in sorted(survivors, key=lambda k: (k.split(":")[0], int(k.split(":")[1]), k)):
            print(f"  {s}")
    return 0


def _edits(before: str, after: str) -> list:
    """The changed lines of ``after`` against ``before``, as (old, new) texts without indentation."""
    a, b = before.splitlines(), after.splitlines()
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(tuple(x.strip() for x in a[i1:i2]), tuple(x.strip() for x in b[j1:j2]))
            for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"]


def relocate(m, old_src: str, new_src: str):
    """The occurrence of mutant ``m`` (of ``old_src``, the code the session was made on) in
    ``new_src``: the one making the same edit to the same line text, nearest the old line;
    None if the code is gone. cosmic-ray numbers a mutant by its operator's occurrence in
    the file, which any edit above it shifts."""
    if old_src == new_src:
        return m.occurrence
    op = get_operator(m.operator_name)(**(getattr(m, "operator_args", None) or {}))
    want = _edits(old_src, mutate_code(old_src, op, m.occurrence) or old_src)
    found, k = [], 0
    while True:
        code = mutate_code(new_src, op, k)
        if code is None:
            break
        if _edits(new_src, code) == want:
            line = next(i for i, (x, y) in enumerate(zip(new_src.splitlines(), code.splitlines()), 1) if x != y)
            found.append((abs(line - m.start_pos[0]), k))
        k += 1
    return min(found)[1] if found else None


def rerun_survivors(db_path: Path, argv, select: Path, timeout: float, only=()) -> None:
    """Run every survivor and timed-out mutant of the session again with the suite as it is
    now (a later stage of the suite contains the earlier one, so a kill stands and only
    survivors can change), one at a time, mutated in place as cosmic-ray does. ``only``:
    just these FILE:LINE places. ``select``: the line map of the suite and code as they are
    now; where the implementation changed since the session (its sources are in the
    session's own map), each mutant is found again by the edit it makes (``relocate``), and
    one whose code is gone is recorded as such (left out of the sample)."""
    from cosmic_ray.mutating import use_mutation

    old_sources = json.loads(map_path(db_path).read_text())["sources"]
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        items = {w.job_id: w for w in db.work_items}
        diffs = {j: r.diff for j, r in db.results}  # kept: an equivalent entry may name the mutated line
        again = [j for j, r in db.results if r.worker_outcome != WorkerOutcome.SKIPPED and r.output != NOT_REACHED
                 and (r.test_outcome == TestOutcome.SURVIVED or r.output == "timeout"
                      or r.worker_outcome == WorkerOutcome.ABNORMAL)]
        for job_id in again:
            m = items[job_id].mutations[0]
            if only and f"{Path(m.module_path).as_posix()}:{m.start_pos[0]}" not in only:
                continue
            op = get_operator(m.operator_name)(**(getattr(m, "operator_args", None) or {}))
            rel = Path(m.module_path).as_posix()
            occurrence = relocate(m, old_sources[rel], (ROOT / rel).read_text())
            if occurrence is None:
                print(f"{rel}:{m.start_pos[0]}:{m.operator_name}: {GONE}", flush=True)
                db.set_result(job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=GONE))
                continue
            with use_mutation(ROOT / m.module_path, op, occurrence):
                try:
                    run = subprocess.run([sys.executable, str(SUITE), *argv, "--select", str(select)], cwd=ROOT,
                                         capture_output=True, text=True, timeout=timeout)
                    outcome, out = (TestOutcome.SURVIVED if run.returncode == 0 else TestOutcome.KILLED), run.stdout
                except subprocess.TimeoutExpired:  # recorded as cosmic-ray records one
                    outcome, out = TestOutcome.KILLED, "timeout"
            print(f"{m.module_path}:{m.start_pos[0]}:{m.operator_name}: {out if out == 'timeout' else outcome}",
                  flush=True)
            db.set_result(job_id, WorkResult(worker_outcome=WorkerOutcome.NORMAL, test_outcome=outcome, output=out,
                                             diff=diffs.get(job_id)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", action="append", default=[], help="file or folder to mutate (default: %s)"
                    % ", ".join(DEFAULT_MODULES))
    ap.add_argument("--examples", type=int, default=6, help="suite: examples per default model and seed")
    ap.add_argument("--seeds", type=int, default=1, help="suite: seeds of the fixed-count campaign")
    ap.add_argument("--budget", type=float, default=None, help="suite: a time-budgeted campaign instead (seconds)")
    ap.add_argument("--sample", type=int, default=None, help="run about N mutants, stratified by file, drawn with --seed")
    ap.add_argument("--sample-reached", action="store_true",
                    help="draw the sample among the reached mutants only; every unreached one is recorded as "
                         "not reached (exact reach), and the report estimates the score with a 95%% interval")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant before it counts as timed out")
    ap.add_argument("--session", default=None, help="session file to create or resume (default: a temporary one)")
    ap.add_argument("--map", type=Path, default=None,
                    help="reuse this line map of the suite (mutation_suite.py --map, same suite arguments) "
                         "instead of tracing the suite again; with --rerun-survivors: the map of the suite "
                         "and code as they are now (default: the session's)")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="run the session's survivors and timed-out mutants again with the suite as it is now")
    ap.add_argument("--only", action="append", default=[], metavar="FILE:LINE",
                    help="with --rerun-survivors: only the mutants on these lines")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--reach-only", action="store_true",
                    help="with --sample-reached: create and classify the session (exact reach), run no mutant")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tiercheck-mutation-"))
    session = Path(args.session) if args.session else work / "session.sqlite"
    if args.rerun_survivors:
        for need in (session, map_path(session)):
            if not need.is_file():  # the session's own map holds the sources its mutants were made from
                sys.exit(f"mutation.py: --rerun-survivors: {need} not found (a session and its .map.json, "
                         "as --session wrote them)")
        rerun_survivors(session, suite_argv(args.examples, args.seeds, args.budget), args.map or map_path(session),
                        args.timeout, set(args.only))
    elif not args.report_only:
        modules = args.module or DEFAULT_MODULES
        sargv = suite_argv(args.examples, args.seeds, args.budget)
        cfg = work / "cosmic-ray.toml"
        lines_map = map_path(session)
        cfg.write_text(config(modules, sargv, args.timeout, lines_map))
        if not session.exists():
            if args.map is not None:
                lines_map.write_text(args.map.read_text())
                reached = reached_by(json.loads(lines_map.read_text()))
            else:
                reached = build_map(lines_map, sargv)
            subprocess.run([cosmic_ray(), "init", str(cfg), str(session)], cwd=ROOT, check=True)
            counts = classify(session, reached, 0 if args.reach_only else args.sample, args.seed,
                              args.sample_reached)
            print(json.dumps(counts), flush=True)
        if not args.reach_only:
            subprocess.run([cosmic_ray(), "exec", str(cfg), str(session)], cwd=ROOT, check=True)
    return report(session)


if __name__ == "__main__":
    sys.exit(main())

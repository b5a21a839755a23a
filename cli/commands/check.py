"""tiercheck check MODEL.toml: exhaustive exploration, a verdict per property, and the
shortest counterexample of each violation (a lasso for liveness), printed and, with
--out, written as ITF traces."""

from __future__ import annotations

import sys
from pathlib import Path

from tiercheck.errors import UserError
from tiercheck.models import coverage, model_file
from tiercheck.models.checker import Checker, resolve_property
from tiercheck.models.parallel import default_workers
from tiercheck.models.trace import format_steps, state_to_itf, write_trace
from tiercheck.spec.model import Model

NAME = "check"
HELP = "explore a model exhaustively and check its properties"


def add_arguments(p):
    p.add_argument("model", help="model file (.toml) or the name of a shipped model")
    p.add_argument("--out", metavar="FILE", help="write counterexample traces (ITF JSON) here; more than one: FILE's stem gets .PROPERTY[.N]")
    p.add_argument("--max-states", type=int, default=None, help="stop after this many distinct states (partial verdict)")
    p.add_argument("--time-limit", type=float, default=None, help="stop after this many seconds (partial verdict)")
    p.add_argument("--property", action="append", dest="properties", metavar="NAME", help="check only these properties (repeatable)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="expand states in N processes; results are the same for any N (default: one per CPU, up to 8; "
        "small models stay in one process)",
    )
    sym = p.add_mutually_exclusive_group()
    sym.add_argument("--symmetry", dest="symmetry", action="store_true", default=None, help="explore one state per orbit of interchangeable ranks/prefixes (safety properties only)")
    sym.add_argument("--no-symmetry", dest="symmetry", action="store_false", help="ignore [check] symmetry = true")
    p.add_argument("--coverage", action="store_true", help="print how often each action was enabled and taken")
    p.add_argument("--all-violations", type=int, default=1, metavar="N", help="up to N distinct counterexamples per violated property")
    p.add_argument("--quiet", action="store_true", help="no progress line")


def _positive(name, value):
    if value is not None and value < 1:
        raise UserError(f"{name}: must be a positive number, got {value}")


def run(args) -> int:
    mf = model_file.load(args.model)
    props = args.properties or mf.properties
    for name in props:
        try:
            resolve_property(name)
        except UserError as exc:
            raise UserError(f"--property: {exc}") from None
    _positive("--max-states", args.max_states)
    _positive("--workers", args.workers)
    workers = args.workers or default_workers()
    _positive("--all-violations", args.all_violations)
    if args.time_limit is not None and args.time_limit <= 0:
        raise UserError(f"--time-limit: must be positive, got {args.time_limit:g}")
    symmetry = mf.symmetry if args.symmetry is None else args.symmetry
    model = Model(mf.config)
    out = sys.stdout

    def progress(distinct, transitions, queue, depth, seconds):
        if not args.quiet:
            print(
                f"  ... {distinct:,} distinct, {distinct / max(seconds, 1e-9):,.0f} states/s, "
                f"queue {queue:,}, depth {depth}, {seconds:.0f}s",
                file=sys.stderr,
                flush=True,
            )

    checker = Checker(
        model,
        props,
        max_states=args.max_states or mf.max_states,
        time_limit=args.time_limit,
        on_progress=progress,
        symmetry=symmetry,
        workers=workers,
        max_violations=args.all_violations,
    )
    res = checker.run()
    print(f"model {mf.name} ({mf.path})", file=out)
    status = "complete" if res.complete else f"PARTIAL ({res.stop_reason})"
    rate = res.distinct / max(res.seconds, 1e-9)
    print(
        f"  {res.distinct:,} distinct states, {res.transitions:,} transitions, depth {res.depth}, "
        f"{res.seconds:.2f}s ({rate:,.0f} states/s, {res.workers} worker{'s' if res.workers > 1 else ''}), "
        f"exploration {status}",
        file=out,
    )
    if not res.complete:
        print("  PARTIAL: only part of the state space was explored; no 'holds' below is a proof", file=out)
    if res.symmetry:
        sy = res.symmetry
        print(
            f"  symmetry: {sy['group']} (group of {sy['group_size']}); {sy['explored']:,} representatives "
            f"stand for {sy['represented']:,} states: reduction {sy['factor']:.1f}x",
            file=out,
        )
    for note in res.notes:
        print(f"  note: {note}", file=out)
    width = max(len(p) for p in props)
    for name in props:
        verdict = res.verdicts[name]
        note = ""
        if verdict == "violated" and mf.expect_violation == name:
            note = "  (expected: the model file says this model exhibits it)"
        print(f"  {name:<{width}}  {verdict}{note}", file=out)
    rows = coverage.table(model, res.coverage)
    missing = [r.action for r in rows if r.status == "never enabled"]
    if missing and res.complete:
        print(f"  warning: actions never enabled (the model does not exercise them): {', '.join(missing)}", file=out)
    if args.coverage:
        print("\ncoverage (steps of the explored graph):", file=out)
        for line in coverage.format_table(rows):
            print(line, file=out)
    if not res.violations:
        return 0
    toml_text = model_file.dump(mf)
    first = True
    for name, found in res.violations.items():
        for k, v in enumerate(found, start=1):
            itf = [state_to_itf(model, s) for s in v.states]
            label = f" ({k} of {len(found)})" if len(found) > 1 else ""
            print(f"\n{name} violated{label}: {v.message}", file=out)
            if v.loop_start is not None:
                cyc = len(v.actions) - v.loop_start
                print(f"lasso: {v.loop_start} steps, then a cycle of {cyc} repeated forever:", file=out)
            else:
                print(f"shortest counterexample ({len(v.actions)} steps):", file=out)
            for line in format_steps(itf, v.actions, v.loop_start):
                print(line, file=out)
            if args.out:
                path = _trace_path(Path(args.out), name, k, first)
                write_trace(path, model, toml_text, v.actions, v.states, prop=name, message=v.message, loop_start=v.loop_start)
                print(f"\nwritten to {path}", file=out)
            first = False
    return 1


def _trace_path(out: Path, prop: str, k: int, first: bool) -> Path:
    if first:
        return out
    suffix = out.suffix or ".json"
    tail = f".{prop}" + (f".{k}" if k > 1 else "")
    return out.with_name(f"{out.stem}{tail}{suffix}")

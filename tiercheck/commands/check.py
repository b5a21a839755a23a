"""tiercheck check MODEL.toml: exhaustive exploration, a verdict per property, and the
shortest counterexample of each violation (printed; written as an ITF trace with --out)."""

from __future__ import annotations

import sys
from pathlib import Path

from tiercheck.errors import UserError
from tiercheck.models import model_file
from tiercheck.models.checker import Checker
from tiercheck.models.trace import format_steps, state_to_itf, write_trace
from tiercheck.spec.model import Model
from tiercheck.spec.properties import BY_NAME

NAME = "check"
HELP = "explore a model exhaustively and check its properties"


def add_arguments(p):
    p.add_argument("model", help="model file (.toml) or the name of a shipped model")
    p.add_argument("--out", metavar="FILE", help="write the counterexample trace (ITF JSON) here")
    p.add_argument("--max-states", type=int, default=None, help="stop after this many distinct states (partial verdict)")
    p.add_argument("--time-limit", type=float, default=None, help="stop after this many seconds (partial verdict)")
    p.add_argument("--property", action="append", dest="properties", metavar="NAME", help="check only these properties (repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress line")


def run(args) -> int:
    mf = model_file.load(args.model)
    props = args.properties or mf.properties
    for name in props:
        if name not in BY_NAME:
            raise UserError(f"--property: unknown property {name!r} (known: {', '.join(BY_NAME)})")
    model = Model(mf.config)
    out = sys.stdout

    def progress(distinct, transitions, queue, depth, seconds):
        if not args.quiet:
            print(
                f"  ... {distinct:,} distinct, {distinct / max(seconds, 1e-9):,.0f} states/s, "
                f"queue {queue:,}, depth {depth}, {seconds:.0f}s",
                file=sys.stderr,
            )

    checker = Checker(
        model,
        props,
        max_states=args.max_states or mf.max_states,
        time_limit=args.time_limit,
        on_progress=progress,
    )
    res = checker.run()
    print(f"model {mf.name} ({mf.path})", file=out)
    status = "complete" if res.complete else f"PARTIAL ({res.stop_reason})"
    print(
        f"  {res.distinct:,} distinct states, {res.transitions:,} transitions, depth {res.depth}, "
        f"{res.seconds:.2f}s, exploration {status}",
        file=out,
    )
    width = max(len(p) for p in props)
    for name in props:
        verdict = res.verdicts[name]
        note = ""
        if verdict == "violated" and mf.expect_violation == name:
            note = "  (expected: the model file says this model exhibits it)"
        print(f"  {name:<{width}}  {verdict}{note}", file=out)
    if not res.violations:
        return 0
    toml_text = model_file.dump(mf)
    first = True
    for name, v in res.violations.items():
        states = [checker.states[i] for i in v.path]
        actions = list(v.actions)
        if v.final_action is not None:
            actions.append(v.final_action)
            states.append(v.final_state)
        itf = [state_to_itf(model, s) for s in states]
        print(f"\n{name} violated: {v.message}", file=out)
        print(f"shortest counterexample ({len(actions)} steps):", file=out)
        for line in format_steps(itf, actions):
            print(line, file=out)
        if args.out and first:
            write_trace(args.out, model, toml_text, actions, states, prop=name, message=v.message)
            print(f"\nwritten to {args.out}", file=out)
        elif args.out:
            extra = Path(args.out)
            alt = extra.with_name(f"{extra.stem}.{name}{extra.suffix or '.json'}")
            write_trace(alt, model, toml_text, actions, states, prop=name, message=v.message)
            print(f"\nwritten to {alt}", file=out)
        first = False
    return 1

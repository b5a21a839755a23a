"""tiercheck conform --impl NAME: the spec-derived Hypothesis stateful suite against an
implementation; a failure is shrunk and written as a replayable trace."""

from __future__ import annotations

import time
from dataclasses import replace

from tiercheck import exits
from tiercheck.conformance import fault_flags, machine
from tiercheck.conformance.adapters import BACKENDS, driver_factory, probe
from tiercheck.errors import UserError
from tiercheck.inputs import int_in, output_dir
from tiercheck.models import model_file
from tiercheck.spec.variants import check_names

NAME = "conform"
HELP = "run the spec-derived stateful conformance suite against an implementation"


def add_arguments(p):
    p.add_argument("--impl", default="reference", help="a registered implementation (`tiercheck impls`) or package.module:factory")
    p.add_argument("--model", default="wt-mirror-2r", help="model whose constants configure the run")
    p.add_argument("--ranks", type=int_in(1, 8), default=None, help="override the model's rank count (1..8)")
    p.add_argument("--examples", type=int_in(1, 1_000_000), default=100, help="Hypothesis examples (default 100)")
    p.add_argument("--steps", type=int_in(1, 10_000), default=50, help="steps per example (default 50)")
    p.add_argument("--seed", type=int_in(0, 2**64 - 1), default=0)
    p.add_argument("--backend", default="lockstep", choices=BACKENDS)
    p.add_argument("--variant", action="append", default=[], help="switch a bug variant on in the implementation only")
    p.add_argument("--out", default=".tiercheck/counterexamples", help="where counterexample traces go")
    fault_flags.add_arguments(p)
    p.add_argument("--z3", action="store_true", help="also check every implementation state with the z3 encodings")


def run(args) -> int:
    mf = model_file.load(args.model)
    output_dir(args.out, "--out")
    cfg = mf.config if args.ranks is None else replace(mf.config, ranks=args.ranks)
    try:
        variants = check_names(args.variant)
    except ValueError as exc:
        raise UserError(f"--variant: {exc}") from None
    z3_check = None
    if args.z3:
        from tiercheck.proofs.snapshot import z3_invariant_check

        z3_check = z3_invariant_check
    factory = driver_factory(args.impl, cfg, variants, args.backend, fault_flags.timeouts(args))
    probe(factory)  # a factory that fails or builds no driver: one line, before the run
    label = "+".join([args.impl, *sorted(variants)])
    stats = {}
    t0 = time.monotonic()
    try:
        machine.run(factory, examples=args.examples, steps=args.steps, seed=args.seed, record_dir=args.out,
                    z3_check=z3_check, label=label, stats=stats)
    except KeyboardInterrupt:  # the partial summary: how far the suite got
        print(f"{args.impl} on {mf.name}: interrupted after {stats.get('examples', 0)} examples "
              f"({time.monotonic() - t0:.1f}s), no disagreement so far: inconclusive")
        return exits.INCONCLUSIVE
    except machine.ConformanceFailure as exc:
        print(exc)
        flags = "".join(f" --variant {v}" for v in sorted(variants))
        if args.ranks is not None:
            flags += f" --ranks {args.ranks}"
        print(f"replay: tiercheck replay {stats.get('file', '<trace>')} --impl {args.impl}{flags}")
        return exits.FOUND
    print(
        f"{args.impl} conforms to the spec on {mf.name} ({cfg.ranks} rank(s)): {stats.get('examples', 0)} examples "
        f"x up to {args.steps} steps, seed {args.seed}, {time.monotonic() - t0:.1f}s"
    )
    return exits.OK

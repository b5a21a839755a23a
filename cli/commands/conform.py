"""tiercheck conform --impl NAME: the spec-derived Hypothesis stateful suite against an
implementation; a failure is shrunk and written as a replayable trace. With no --model,
every default model (tiercheck.conformance.defaults) within --budget seconds."""

from __future__ import annotations

import time
from dataclasses import replace

from tiercheck import exits
from tiercheck.conformance import defaults, fault_flags, machine
from tiercheck.conformance.adapters import BACKENDS, driver_factory, probe
from tiercheck.conformance.run_coverage import coverage_table
from tiercheck.conformance.steering import STRATEGIES
from tiercheck.conformance.step_deadline import step_seconds
from tiercheck.errors import UserError
from tiercheck.inputs import int_in, output_dir, positive_float
from tiercheck.models import model_file
from tiercheck.spec.model import ACTIONS
from tiercheck.spec.variants import check_names

NAME = "conform"
HELP = "run the spec-derived stateful conformance suite against an implementation"
DEFAULT_BUDGET = 120.0


def add_arguments(p):
    p.add_argument("--impl", default="reference", help="a registered implementation (`tiercheck impls`) or package.module:factory")
    p.add_argument("--model", default=None,
                   help="model whose constants configure the run (default: every default model: "
                        + ", ".join(d.label for d in defaults.DEFAULT_MODELS) + ")")
    p.add_argument("--budget", type=positive_float(7 * 24 * 3600), default=None, metavar="SECONDS",
                   help=f"search time; without --model shared by the default models (default {DEFAULT_BUDGET:g})")
    p.add_argument("--ranks", type=int_in(1, 8), default=None, help="override the model's rank count (1..8)")
    p.add_argument("--examples", type=int_in(1, 1_000_000), default=None,
                   help="examples (default 100 with --model; without --model: per default model, over the rounds, "
                        "and with no time budget unless --budget is given too)")
    p.add_argument("--steps", type=int_in(1, 10_000), default=50, help="steps per example (default 50)")
    p.add_argument("--seed", type=int_in(0, 2**64 - 1), default=0)
    p.add_argument("--strategy", default="coverage", choices=STRATEGIES,
                   help="how a step picks its action (tiercheck.conformance.steering; 'index' is the old rule)")
    p.add_argument("--backend", default="lockstep", choices=BACKENDS)
    p.add_argument("--variant", action="append", default=[], help="switch a bug variant on in the implementation only")
    p.add_argument("--out", default=".tiercheck/counterexamples", help="where counterexample traces go")
    p.add_argument("--z3", action="store_true", help="also check every implementation state with the z3 encodings")
    fault_flags.add_arguments(p)


def run(args) -> int:
    step_seconds()  # TIERCHECK_STEP_TIMEOUT, checked before anything runs
    mf = model_file.load(args.model) if args.model is not None else None
    output_dir(args.out, "--out")
    try:
        variants = check_names(args.variant)
    except ValueError as exc:
        raise UserError(f"--variant: {exc}") from None
    z3_check = None
    if args.z3:
        from tiercheck.proofs.snapshot import z3_invariant_check

        z3_check = z3_invariant_check
    timeouts = fault_flags.timeouts(args)
    driver_factory(args.impl, None, variants, args.backend, timeouts)  # unknown names: one clear line now
    label = "+".join([args.impl, *sorted(variants)])
    flags = "".join(f" --variant {v}" for v in sorted(variants))
    if args.ranks is not None:
        flags += f" --ranks {args.ranks}"

    def factory_for(cfg):
        return driver_factory(args.impl, cfg if args.ranks is None else replace(cfg, ranks=args.ranks),
                              variants, args.backend, timeouts)

    t0 = time.monotonic()
    if args.model is None:
        return _campaign(args, factory_for, label, flags, z3_check, t0)
    cfg = mf.config if args.ranks is None else replace(mf.config, ranks=args.ranks)
    stats = {}
    examples = args.examples if args.examples is not None else (100 if args.budget is None else 10**9)
    factory = factory_for(mf.config)
    probe(factory)  # a factory that fails or builds no driver: one line, before the run
    try:
        machine.run(factory, examples=examples, steps=args.steps, seed=args.seed,
                    record_dir=args.out, z3_check=z3_check, label=label, stats=stats, strategy=args.strategy,
                    time_budget=args.budget)
    except KeyboardInterrupt:  # the partial summary: how far the suite got
        print(f"{args.impl} on {mf.name}: interrupted after {stats.get('examples', 0)} examples "
              f"({time.monotonic() - t0:.1f}s), no disagreement so far: inconclusive")
        return exits.INCONCLUSIVE
    except machine.ConformanceFailure as exc:
        print(exc)
        print(f"replay: tiercheck replay {stats.get('file', '<trace>')} --impl {args.impl}{flags}")
        return exits.FOUND
    finally:
        if "coverage" in stats:
            print(_coverage({mf.name: stats["coverage"]}))
    print(
        f"{args.impl} conforms to the spec on {mf.name} ({cfg.ranks} rank(s)): {stats.get('examples', 0)} examples "
        f"x up to {args.steps} steps, seed {args.seed}, strategy {args.strategy}, {time.monotonic() - t0:.1f}s"
    )
    return exits.OK


def _campaign(args, factory_for, label, flags, z3_check, t0) -> int:
    budget = args.budget
    if budget is None:  # an example budget alone runs the same examples on any machine
        budget = float("inf") if args.examples else DEFAULT_BUDGET
    limits = ([f"budget {budget:g}s"] if budget != float("inf") else []) + (
        [f"{args.examples} examples per model"] if args.examples else [])
    print(f"{args.impl}: {len(defaults.DEFAULT_MODELS)} default models, {', '.join(limits)}, seed {args.seed}, "
          f"strategy {args.strategy}", flush=True)
    probe(factory_for(defaults.default_model_files()[0][1].config))  # a failing factory: one line, now
    try:
        res = defaults.run_campaign(factory_for, budget, examples=10**9, steps=args.steps,
                                    seed=args.seed, record_dir=args.out, z3_check=z3_check, label=label,
                                    strategy=args.strategy, per_model=args.examples)
    except KeyboardInterrupt:
        print(f"{args.impl}: default campaign interrupted after {time.monotonic() - t0:.1f}s, "
              f"no disagreement so far: inconclusive")
        return exits.INCONCLUSIVE
    print(_coverage({name: r.stats["coverage"] for name, r in res.items() if "coverage" in r.stats}))
    for name, r in res.items():
        print(f"  {name:24} {r.examples:>6} examples {r.seconds:>7.1f}s" + ("  DISAGREES" if r.failure else ""))
    failed = [r for r in res.values() if r.failure]
    if failed:
        r = failed[0]
        print(r.failure)
        print(f"replay: tiercheck replay {r.stats.get('file', '<trace>')} --impl {args.impl}{flags}")
        return exits.FOUND
    print(f"{args.impl} conforms to the spec on all {len(res)} default models: "
          f"{sum(r.examples for r in res.values())} examples x up to {args.steps} steps, seed {args.seed}, "
          f"{time.monotonic() - t0:.1f}s")
    return exits.OK


def _coverage(per_model) -> str:
    return "coverage (steps per action; outcomes taken / known):\n" + coverage_table(
        per_model, [a.name for a in ACTIONS])

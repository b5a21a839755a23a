"""tiercheck replay TRACE --impl NAME: replay a stored trace (a checker counterexample, a
conformance counterexample, a generated tour) on an implementation, deterministically,
stopping at the first step where implementation and spec disagree."""

from __future__ import annotations

from dataclasses import replace

from tiercheck.conformance.adapters import BACKENDS, driver_factory
from tiercheck.conformance.compare import describe_difference
from tiercheck.conformance.runner import replay
from tiercheck.errors import UserError
from tiercheck.models import model_file
from tiercheck.models.trace import read_trace
from tiercheck.toml_compat import tomllib

NAME = "replay"
HELP = "replay a trace on an implementation and show the first disagreement with the spec"


def add_arguments(p):
    p.add_argument("trace", help="trace file (ITF JSON)")
    p.add_argument("--impl", default="reference", help="a registered implementation (`tiercheck impls`) or package.module:factory")
    p.add_argument("--ranks", type=int, default=None, help="override the model's rank count")
    p.add_argument("--backend", default="lockstep", choices=BACKENDS, help="lock-step threads or real gloo processes")
    p.add_argument("--variant", action="append", default=[], help="switch a bug variant on in the implementation")


def run(args) -> int:
    trace = read_trace(args.trace)
    try:
        mf = model_file.parse(tomllib.loads(trace.model_toml), args.trace)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{args.trace}: corrupt trace (its model is not TOML: {exc})") from None
    cfg = mf.config if args.ranks is None else replace(mf.config, ranks=args.ranks)
    from tiercheck.spec.variants import check_names

    try:
        variants = check_names(args.variant)
    except ValueError as exc:
        raise UserError(f"--variant: {exc}") from None
    driver = driver_factory(args.impl, cfg, variants, args.backend)()
    try:
        outcome = replay(driver, trace.actions, expect_disabled=set(trace.meta.get("probes", ())))
    finally:
        driver.close()
    n = len(trace.actions)
    if outcome.mismatch is None:
        print(f"{args.trace}: {n} steps replayed on {args.impl} ({args.backend}); implementation and spec agree")
        return 0
    mm = outcome.mismatch
    where = "the initial state" if mm.step < 0 else f"step {mm.step + 1}/{n}: {trace.actions[mm.step]}"
    print(f"{args.trace}: {args.impl} ({args.backend}) disagrees with the spec at {where}")
    print(f"  {mm.kind}: {mm.message}")
    if mm.kind == "state" and mm.expected is not None and mm.actual is not None:
        print("  spec -> implementation:")
        for line in describe_difference(driver.model, mm.expected, mm.actual):
            print(f"    {line}")
    return 1

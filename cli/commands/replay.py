"""tiercheck replay TRACE --impl NAME: replay a stored trace (a checker counterexample, a
conformance counterexample, or every trace of a generated tour.json) on an implementation,
deterministically, stopping at the first step where implementation and spec disagree.

The trace is checked against the spec first (tiercheck.models.trace_check): a step the
spec does not enable is a bad trace (exit 2), so exit 1 always means the implementation
disagrees."""

from __future__ import annotations

from dataclasses import replace

from tiercheck import exits
from tiercheck.conformance import fault_flags
from tiercheck.conformance.adapters import BACKENDS, driver_factory
from tiercheck.conformance.compare import describe_difference
from tiercheck.conformance.distinct import replay_past
from tiercheck.conformance.generated import is_tour, load_tour
from tiercheck.conformance.runner import replay
from tiercheck.conformance.step_deadline import step_seconds
from tiercheck.errors import UserError
from tiercheck.inputs import int_in
from tiercheck.models.trace import load_json, parse_trace
from tiercheck.models.trace_check import check_stored, validate
from tiercheck.spec.model import Model

NAME = "replay"
HELP = "replay a trace on an implementation and show the first disagreement with the spec"


def add_arguments(p):
    p.add_argument("trace", help="trace file (ITF JSON) or a generated tour.json (every trace in it)")
    p.add_argument("--impl", default="reference", help="a registered implementation (`tiercheck impls`) or package.module:factory")
    p.add_argument("--ranks", type=int_in(1, 8), default=None, help="override the model's rank count (1..8)")
    p.add_argument("--backend", default="lockstep", choices=BACKENDS, help="lock-step threads or real gloo processes")
    p.add_argument("--variant", action="append", default=[], help="switch a bug variant on in the implementation")
    fault_flags.add_arguments(p)


def load_cases(path, cfg_of):
    """(config, [(where, validated actions, probes)], passes) of a trace file or a tour file;
    ``cfg_of(config)`` applies the command line's overrides before validation. ``passes``:
    the known disagreements the trace passes (tiercheck.conformance.distinct); such a trace
    is checked step by step from the states it passes into, so only its actions' names and
    parameters are validated here."""
    doc = load_json(path, "trace file")
    if is_tour(doc):
        mf, traces = load_tour(path, doc)
        model = Model(cfg_of(mf.config))
        cases = []
        for k, (actions, probes) in enumerate(traces):
            where = f"{path} (trace-{k:03d})"
            cases.append((where, validate(model, actions, probes, where), probes))
        return model.cfg, cases, ()
    trace = parse_trace(path, doc)
    passes = trace.meta.get("passes") or ()
    if passes:
        return _passing_case(path, trace, cfg_of, passes)
    _mf, model, actions, probes = check_stored(trace, cfg_of)
    return model.cfg, [(path, actions, probes)], ()


def _passing_case(path, trace, cfg_of, passes):
    from tiercheck.models import model_file
    from tiercheck.models.trace_check import ACTION_SPECS

    mf = model_file.parse(model_file.loads(trace.model_toml, f"{path}: its model"), path)
    bad = next((a.name for a in trace.actions if a.name not in ACTION_SPECS), None)
    if bad is not None:
        raise UserError(f"{path}: bad trace: unknown action {bad!r}")
    if not isinstance(passes, list) or not all(isinstance(p, str) for p in passes):
        raise UserError(f"{path}: corrupt trace (passes must be a list of signatures)")
    return Model(cfg_of(mf.config)).cfg, [(path, trace.actions, set(trace.meta.get("probes", [])))], tuple(passes)


def run(args) -> int:
    step_seconds()  # TIERCHECK_STEP_TIMEOUT, checked before anything runs
    cfg, checked, passes = load_cases(args.trace, lambda c: c if args.ranks is None else replace(c, ranks=args.ranks))
    from tiercheck.spec.variants import check_names

    try:
        variants = check_names(args.variant)
    except ValueError as exc:
        raise UserError(f"--variant: {exc}") from None
    factory = driver_factory(args.impl, cfg, variants, args.backend, fault_flags.timeouts(args))
    total = 0
    for where, actions, probes in checked:
        driver = factory()
        try:
            if passes:  # continue through the known disagreements the trace passes
                outcome = replay_past(driver, actions, passes, expect_disabled=probes)
            else:
                outcome = replay(driver, actions, expect_disabled=probes)
        finally:
            driver.close()
        total += len(actions)
        if getattr(outcome, "unreached", False):
            print(f"{where}: {args.impl} ({args.backend}) agrees with the spec for {outcome.steps} steps; step "
                  f"{outcome.steps + 1} is enabled only past a known disagreement the trace passes "
                  f"({'; '.join(passes)}), which did not happen here: the trace's finding is not reached")
            return exits.OK
        if outcome.mismatch is not None:
            if passes:
                print(f"{where}: passing the known disagreement(s): {'; '.join(passes)}")
            _report(where, args, driver, actions, outcome.mismatch)
            return exits.FOUND
    what = f"{len(actions)} steps" if len(checked) == 1 else f"{len(checked)} traces, {total} steps"
    print(f"{args.trace}: {what} replayed on {args.impl} ({args.backend}); implementation and spec agree")
    return exits.OK


def _report(where, args, driver, actions, mm) -> None:
    n = len(actions)
    at = "the initial state" if mm.step < 0 else f"step {mm.step + 1}/{n}: {actions[mm.step]}"
    print(f"{where}: {args.impl} ({args.backend}) disagrees with the spec at {at}")
    print(f"  {mm.kind}: {mm.message}")
    if mm.kind == "state" and mm.expected is not None and mm.actual is not None:
        print("  spec -> implementation:")
        for line in describe_difference(driver.model, mm.expected, mm.actual):
            print(f"    {line}")

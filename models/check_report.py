"""Printing a checker result (tiercheck.models.checker.Result): the exploration summary,
one verdict per property, and each counterexample step by step, written as ITF when
asked. Printing only: the search and the verdicts are the checker's."""

from __future__ import annotations

from pathlib import Path

from tiercheck.models import coverage
from tiercheck.models.trace import format_steps, state_to_itf, write_trace


def summary(mf, model, res, props, show_coverage, out) -> None:
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
    _verdicts(mf, props, res.verdicts, out)
    rows = coverage.table(model, res.coverage)
    missing = [r.action for r in rows if r.status == "never enabled"]
    if missing and res.complete:
        print(f"  warning: actions never enabled (the model does not exercise them): {', '.join(missing)}", file=out)
    if show_coverage:
        print("\ncoverage (steps of the explored graph):", file=out)
        for line in coverage.format_table(rows):
            print(line, file=out)


def _verdicts(mf, props, verdicts, out) -> None:
    width = max(len(p) for p in props)
    for name in props:
        verdict = verdicts[name]
        note = ""
        if verdict == "violated" and mf.expect_violation == name:
            note = "  (expected: the model file says this model exhibits it)"
        print(f"  {name:<{width}}  {verdict}{note}", file=out)


def simulation_summary(mf, model, sim, props, verdicts, show_coverage, out) -> None:
    """The summary of a random simulation (tiercheck.models.simulate)."""
    print(f"model {mf.name} ({mf.path})", file=out)
    rate = sim.steps / max(sim.seconds, 1e-9)
    print(
        f"  simulation (seed {sim.seed}): {sim.walks:,} walks, {sim.steps:,} steps (longest {sim.longest}), "
        f"{sim.distinct:,} distinct states reached, {sim.seconds:.2f}s ({rate:,.0f} steps/s)",
        file=out,
    )
    if sim.stop_reason:
        print(f"  stopped early: {sim.stop_reason}", file=out)
    print("  random walks prove nothing: a property not violated may still fail", file=out)
    _verdicts(mf, props, verdicts, out)
    if show_coverage:
        print("\ncoverage (states visited by the walks):", file=out)
        for line in coverage.format_table(coverage.table(model, sim.coverage)):
            print(line, file=out)


def counterexamples(model, res, toml_text, out_path, out, shortest: bool = True) -> None:
    """Print every counterexample; with ``out_path``, write each as an ITF trace.
    A violation with an ``extra`` dict has it added to its trace's metadata."""
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
                what = "shortest counterexample" if shortest else "counterexample (a random walk's, not a shortest one)"
                print(f"{what} ({len(v.actions)} steps):", file=out)
            for line in format_steps(itf, v.actions, v.loop_start):
                print(line, file=out)
            if out_path:
                path = trace_path(Path(out_path), name, k, first)
                write_trace(path, model, toml_text, v.actions, v.states, prop=name, message=v.message, loop_start=v.loop_start,
                            extra=getattr(v, "extra", None))
                print(f"\nwritten to {path}", file=out)
            first = False


def trace_path(out: Path, prop: str, k: int, first: bool) -> Path:
    if first:
        return out
    suffix = out.suffix or ".json"
    tail = f".{prop}" + (f".{k}" if k > 1 else "")
    return out.with_name(f"{out.stem}{tail}{suffix}")

"""Where a bounded check spends its time: cProfile of the search, and the cost of each
phase of expanding a state, measured on the last states the search found.

    python benchmarks/checker_profile.py                        # wt-mirror-2r, 30,000 states
    python benchmarks/checker_profile.py --engine plain --gc    # the engine before the memos
    python benchmarks/checker_profile.py --engine memo          # the default engine
    python benchmarks/checker_profile.py --engine memo --entries --max-states 60000
        # per memo entry of the element memo: computations run on the spec and their CPU time

Phases (per state, on ``--sample`` states): decode the packed key, invariants, the
constraint, ``actions(s)``, the action effects, encoding the successors, transition
properties; once with the cyclic garbage collector running and once paused. The
published summary is in models/CHECKER.md ("Profile").
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import sys
import time


def _phases(checker, sample: int, collect: bool):
    m, ex, codec = checker.model, checker.search.expander, checker.codec
    keys = checker.search.keys[-sample:]
    out = {}

    def timed(name, fn):
        t0 = time.process_time()
        r = fn()
        out[name] = (time.process_time() - t0) / len(keys) * 1e6
        return r

    (gc.enable if collect else gc.disable)()
    try:
        states = timed("decode", lambda: [codec.decode_gids(k) for k in keys])
        timed("invariants", lambda: [[p.fn(m, s) for p in ex.invariants] for s, _ in states])
        timed("constraint", lambda: [m.constraint(s) for s, _ in states])
        acts = timed("actions(s)", lambda: [m.actions(s) for s, _ in states])
        succ = timed("effects", lambda: [[ex.effects[a.name](m, s, a) for a in A] for (s, _), A in zip(states, acts)])
        enc = timed("encode successors", lambda: [[codec.encode_step(t, s, g) for t in T] for (s, g), T in zip(states, succ)])
        timed(
            "transition properties",
            lambda: [[[p.fn(m, s, a, t) for p in ex.transitions] for a, (_k, t) in zip(A, E)] for (s, _), A, E in zip(states, acts, enc)],
        )
        timed("whole expansion", lambda: [ex.expand(k) for k in keys])
    finally:
        gc.enable()
    return out, sum(len(A) for A in acts) / len(keys)


def _time_entries(expander_class):
    """Wrap the element memo's ``_run`` (one computation on the spec, a look-up miss) to
    count and time it per memo entry: the invariants, each ACTIONS entry's candidate
    list, each candidate's step; and ``_template`` as a whole."""
    import collections

    stats = collections.defaultdict(lambda: [0, 0.0, 0])  # label -> [runs, CPU s, coarse runs]
    tpl = [0, 0.0]
    run, template = expander_class._run, expander_class._template

    def timed_run(self, tag, tables, key, compute):
        coarse = tag not in self.narrow and self.probes.get(tag, 0) >= self.probe_limit
        t0 = time.process_time()
        out = run(self, tag, tables, key, compute)
        dt = time.process_time() - t0
        if type(tag) is int and tag >= 0:
            label = "step " + self.cands[tag][0].name
        elif type(tag) is tuple:
            label = "candidates " + self.units[tag[1]][0].name
        else:
            label = "invariants"
        st = stats[label]
        st[0] += 1
        st[1] += dt
        st[2] += coarse
        return out

    def timed_template(self, key):
        t0 = time.process_time()
        out = template(self, key)
        tpl[0] += 1
        tpl[1] += time.process_time() - t0
        return out

    expander_class._run, expander_class._template = timed_run, timed_template
    return stats, tpl


def _print_entries(stats, tpl, distinct, cpu) -> None:
    print(f"templates built: {tpl[0]:,} in {tpl[1]:.1f} of {cpu:.1f} CPU s "
          f"({tpl[1] / max(tpl[0], 1) * 1e6:.0f} us each; {distinct / max(tpl[0], 1):.1f} states per template)")
    print(f"  {'memo entry':<40} {'runs':>9} {'per tpl':>8} {'CPU s':>7} {'us/run':>7} {'coarse':>7}")
    for label, (n, secs, coarse) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
        if secs < 0.005 * max(cpu, 1e-9):
            continue
        print(f"  {label:<40} {n:>9,} {n / max(tpl[0], 1):>8.2f} {secs:>7.2f} {secs / n * 1e6:>7.1f} {coarse / n:>7.0%}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="wt-mirror-2r")
    ap.add_argument("--max-states", type=int, default=30_000)
    ap.add_argument("--engine", default="plain", choices=["plain", "fields", "memo"])
    ap.add_argument("--gc", action="store_true", help="leave the garbage collector running during the search")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--entries", action="store_true",
                    help="instead of cProfile: per memo entry of the element memo (--engine memo), runs and CPU time")
    ap.add_argument("--sample", type=int, default=10_000)
    args = ap.parse_args(argv)

    from tiercheck.models import model_file
    from tiercheck.models.checker import Checker
    from tiercheck.spec.model import Model

    mf = model_file.load(args.model)
    if args.entries:
        if args.engine != "memo":
            ap.error("--entries needs --engine memo")
        from tiercheck.models.element_memo import ElementMemoExpander

        stats, tpl = _time_entries(ElementMemoExpander)
        checker = Checker(Model(mf.config), mf.properties, max_states=args.max_states, engine="memo", pause_gc=not args.gc)
        print(f"load average {os.getloadavg()[0]:.1f}; {args.model}, {args.max_states:,} states, engine memo", flush=True)
        t0 = time.process_time()
        res = checker.run()
        cpu = time.process_time() - t0
        print(f"{res.distinct:,} states, {res.transitions:,} transitions, {cpu:.1f} CPU s "
              f"({res.distinct / cpu:,.0f} states per CPU s, timers included)")
        _print_entries(stats, tpl, res.distinct, cpu)
        return 0
    checker = Checker(Model(mf.config), mf.properties, max_states=args.max_states, engine=args.engine, pause_gc=not args.gc)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.model}, {args.max_states:,} states, engine {args.engine}, "
          f"collector {'running' if args.gc else 'paused'}", flush=True)
    prof = cProfile.Profile(time.process_time)  # CPU time: the machine may be shared
    t0 = time.process_time()
    prof.enable()
    res = checker.run()
    prof.disable()
    cpu = time.process_time() - t0
    print(f"{res.distinct:,} states, {res.transitions:,} transitions, {cpu:.1f} CPU s under the profiler")
    ex = checker.search.expander
    if hasattr(ex, "computed"):
        line = f"memo: {ex.computed:,} computations on the spec"
        if hasattr(ex, "templates"):
            line += f", {len(ex.templates):,} templates (rank tuples and flags) for {res.distinct:,} states"
        print(line)
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(args.top)
    print("\n".join(line for line in buf.getvalue().splitlines() if line.strip()), flush=True)
    sample = min(args.sample, res.distinct)
    print(f"\nper-state phases on the last {sample:,} states (CPU microseconds per state):")
    runs = {collect: _phases(checker, sample, collect) for collect in (True, False)}
    per_state = runs[True][1]
    print(f"  {'phase':<24} {'collector on':>13} {'paused':>9}   ({per_state:.1f} actions per state)")
    for name in runs[True][0]:
        print(f"  {name:<24} {runs[True][0][name]:>13.1f} {runs[False][0][name]:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

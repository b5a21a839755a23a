"""The conformance suite as one test command, for mutation testing (benchmarks/mutation.py).

The suite is a list of units, run in order until the first disagreement:
  - the default campaign (`tiercheck conform --impl reference`): one unit per default
    model and seed, ``--examples`` examples each, a fixed count, so a run is
    deterministic whatever the machine's load (``--budget SECONDS`` runs the
    time-budgeted campaign as one unit instead);
  - every trace of every shipped generated tour (tests/generated/*/tour.json) replayed on
    the reference, one unit each; and the first traces of the two-rank tours on the gloo
    backend (real rank processes);
  - the reference in its own completion mode (copies complete on query, storage
    threads, check_events and flush; tiercheck.conformance.auto_mode): ``--walks``
    seeded walks per default model, one unit per model; and a prefetch checked while
    its read is still running (READ_HELD_MODELS);
  - shipped feature models outside the default set (FEATURE_MODELS), as campaign units;
  - every catalogued bug switched on: the reference must disagree on the bug's shortest
    trace (the bug branches are implementation code too), and agree state for state with
    the spec that has the bug on;
  - rare situations (tiercheck.conformance.situations): the shortest spec trace to each,
    probes of disabled steps included;
  - the implementation's own defaults of the protocol's fields against the spec's
    (tiercheck.conformance.impl_defaults: every other unit sets them all), and the
    configurations it accepts and refuses (tiercheck.conformance.impl_domain);
  - faults below the protocol (tiercheck.conformance.process_faults): a stopped, slow or
    never-starting gloo rank and a hanging store call must each end in a one-line error
    naming the rank, a store holding other bytes must fail the rank's self-check; and
    faults whose verdict must be the right one (tiercheck.conformance.verdict_faults).
After every unit, no storage worker thread of the implementation may still run.
Not the unit tests. Exit 0: conforms; 1: a disagreement (the mutant is killed).

Test selection (``--select MAP``): ``--map MAP`` runs the suite once on the unmutated
code under a line tracer and writes, per unit, the implementation lines it executes
(lines run while importing count for every unit) and the sources. ``--select MAP`` then
compares the sources with the map's, and runs only the units that execute a changed
line, cheapest first: a unit that never executes the mutated line behaves exactly as on
the unmutated code, which passes, so the verdict is the whole suite's. No unit: exit 0.

    python benchmarks/mutation_suite.py [--examples N] [--seeds K] [--budget SECONDS] [--tours-only]
    python benchmarks/mutation_suite.py --map MAP.json     # once, on the unmutated code
    python benchmarks/mutation_suite.py --select MAP.json  # per mutant
    python benchmarks/mutation_suite.py --map PART.json --unit 'campaign wt-evicts-1r'  # a part
    python benchmarks/mutation_suite.py --reached PART.json impl/hicache/eviction.py  # its lines
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from tiercheck.conformance import defaults, machine
from tiercheck.conformance.compare import describe_difference, observable, state_invariants, step_properties
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.generated import load_tour
from tiercheck.conformance.runner import replay
from tiercheck.conformance.shortest import shortest_disagreement
from tiercheck.models import model_file
from tiercheck.spec.model import Model
from tiercheck.spec.variants import VARIANTS

ROOT = Path(__file__).resolve().parent.parent
TOURS = ROOT / "tests" / "generated"
MUTATED = ("impl/hicache", "impl/transfer.py")  # the files a map traces


# The gloo backend (one process per rank, torch.distributed collectives) on the first
# traces of the two-rank tours: the same steps through GlooHiCache's transport.
GLOO_TOURS = ("wt-2r", "wt-alloc-2r", "cp-planner-2r")
GLOO_TRACES = 3


def tour_units(backend: str = "lockstep", tours=None, first=None):
    """(name, run) per shipped tour trace; run() -> True when the reference agrees."""
    out = []
    for path in sorted(TOURS.glob("*/tour.json")):
        if tours is not None and path.parent.name not in tours:
            continue
        mf, traces = load_tour(path)
        for k, (actions, probes) in enumerate(traces[:first]):
            def run(cfg=mf.config, actions=actions, probes=probes, where=f"{path.parent.name} trace {k} ({backend})"):
                driver = driver_factory("reference", cfg, backend=backend)()
                try:
                    mm = replay(driver, actions, expect_disabled=probes).mismatch
                finally:
                    driver.close()
                if mm is not None:
                    print(f"{where}: {mm.message}")
                return mm is None
            out.append((f"tour {path.parent.name} {k}" + ("" if backend == "lockstep" else f" {backend}"), run))
    return out


def _conforms(cfg, examples: int, seed: int, label: str) -> bool:
    """``examples`` examples and no time budget, so the same examples on every run (they
    depend only on the spec and the seed until the first disagreement). No shrinking: a
    kill only needs the verdict."""
    try:
        machine.run(driver_factory("reference", cfg), examples=examples, seed=seed, label=label, shrink_budget=0.0)
    except machine.ConformanceFailure as exc:
        print(exc)
        return False
    return True


# The storage tours' first traces on a real Mooncake master, through MooncakeStorage with
# its default sizes (segment, local buffer, staging): what a user who names only the
# master gets. Skipped, with a line saying so, where the Mooncake package is missing.
MOONCAKE_TOURS = ("wt-mirror-prefetch-1r", "wt-prefetch-2r")


def mooncake_units():
    from tiercheck.conformance.reference import ReferenceDriver

    out = []
    for path in sorted(TOURS.glob("*/tour.json")):
        if path.parent.name not in MOONCAKE_TOURS:
            continue
        mf, traces = load_tour(path)

        def run(cfg=mf.config, trace=traces[0], where=path.parent.name):
            from tiercheck.errors import UserError
            from tiercheck.impl.hicache import MooncakeStorage
            from tiercheck.impl.storage.mooncake import load_store_class
            from tiercheck.impl.storage.mooncake_master import MooncakeMaster, find_master_binary

            try:
                load_store_class()
            except UserError as exc:
                print(f"mooncake {where}: skipped ({exc})")
                return True
            if find_master_binary() is None:
                print(f"mooncake {where}: skipped (no mooncake_master binary)")
                return True
            master = MooncakeMaster(extra_args=("--default_kv_lease_ttl=300",)).start()
            try:
                try:
                    driver = ReferenceDriver(cfg, storage=MooncakeStorage(master.address, health_url=master.health_url))
                except Exception as exc:  # noqa: BLE001 -- a store that cannot open is the verdict
                    print(f"mooncake {where}: the reference does not start on Mooncake: {type(exc).__name__}: {exc}")
                    return False
                try:
                    mm = replay(driver, trace[0], expect_disabled=trace[1]).mismatch
                finally:
                    driver.close()
            finally:
                master.stop()
            if mm is not None:
                print(f"mooncake {where} trace 0: {mm.message}")
            return mm is None
        out.append((f"mooncake tour {path.parent.name} 0", run))
    return out


def campaign_units(examples: int, seeds: int):
    """(name, run) per default model and seed."""
    out = []
    for seed in range(seeds):
        for label, mf in defaults.default_model_files():
            out.append((f"campaign {label} seed {seed}",
                        lambda cfg=mf.config, label=label, seed=seed: _conforms(cfg, examples, seed, label)))
    return out


# Shipped feature models outside the default set: the bounded, age-gated durable LRU on
# one rank (the default set has it on two), CP load-back over two lanes.
FEATURE_MODELS = ("wt-durable-lru-1r", "cp-planner-lanes-2r")  # wt-/wb-evicts are default models


def feature_units(examples: int):
    """(name, run) per feature model: ``examples`` examples of seed 0, as a default model's."""
    return [(f"feature {name}", lambda cfg=model_file.load(name).config, name=name: _conforms(cfg, examples, 0, name))
            for name in FEATURE_MODELS]


def _replayed(cfg, actions, variant):
    """The first disagreement of the reference with ``variant`` on, replaying ``actions``
    against the spec of ``cfg`` (None: none)."""
    driver = driver_factory("reference", cfg, {variant})()
    try:
        return replay(driver, actions).mismatch
    finally:
        driver.close()


def _twin_departs(cfg, actions, variant, probes=()) -> str:
    """Where the reference with ``variant`` on leaves the spec of ``cfg`` (which has it on)
    on ``actions``: the first step whose refined state differs, or whose write-rejection
    counters differ from what the spec's step rejects (replicas the bug diverged disagree
    on what to stage), or whose broken invariants and step properties differ (judged on
    the whole refined states, history fields included), or whose reclaim digest pair is
    not of the spec's encoding (tiercheck.conformance.wire_digest), or a crash ("": none).
    Only states, invariants, those counters and the digest pair: its bytes are checked apart. The indices in
    ``probes`` are steps the spec disables there: the reference must not move either."""
    from tiercheck.conformance import counters  # imports the implementation: after the map's tracer starts

    model, driver = Model(cfg), driver_factory("reference", cfg, {variant})()
    s = model.init_states()[0]
    try:
        was = driver.group.metrics()
        got_before = driver.state()
        for i, a in enumerate(actions):
            if i in probes and model.next_state(s, a) is not None and a in model.actions(s):
                return f"step {i} ({a}): the probe is enabled in the spec here (bad trace)"
            before, s = s, (s if i in probes else model.next_state(s, a))
            try:
                driver.apply(a)
                got = driver.state()
                now = driver.group.metrics()
            except Exception as exc:  # noqa: BLE001 -- a crash departs
                return f"step {i} ({a}): {type(exc).__name__}: {exc}"
            if observable(got) != observable(s):
                return f"step {i} ({a}): " + "; ".join(describe_difference(model, observable(s), observable(got)))
            # the same invariants broken on both sides, judged on the whole refined state
            # (history fields included: what each backup really stored, where the
            # implementation reports it)
            broken = [sorted({m.split(":")[0] for m in state_invariants(model, x) + step_properties(model, b, a, x)})
                      for b, x in ((before, s), (got_before, got))]
            got_before = got
            if broken[0] != broken[1]:
                return (f"step {i} ({a}): the spec with the bug breaks {broken[0] or 'no invariant'}, "
                        f"the implementation's refined state {broken[1] or 'none'}")
            lines = counters.rejection_problems(model, before, a, was, now, got)
            lines += driver.digest_problems()  # of the snapshot state() just took
            if lines:
                return f"step {i} ({a}): " + "; ".join(lines)
            was = now
    finally:
        driver.close()
    return ""


def variant_units():
    """(name, run) per catalogued bug: the implementation with the bug on must disagree on the
    shortest trace where the bug shows (breadth-first over spec x spec-mutant pairs on the
    bug's own model, models/library/variants), with a state difference at its last step,
    or earlier a problem its own reports show (verify: e.g. negated-pair-overflow's digests
    leave the fixed encoding's range at the first fold, before the ranks' states part).
    This is the kill matrix's claim on its cheapest trace, and what reaches the
    implementation's bug branches. The same trace against the spec with the bug on must
    agree state for state (the twin: the implementation's bug is the spec's), which checks
    what the bug branches do, not only that they differ."""
    out = []
    for name in sorted(VARIANTS):
        def run(name=name):
            cfg = model_file.load(f"variants/{name}").config
            # The reference always has a host page (impl_config): a host-less model would
            # disagree at its initial state, whatever the bug.
            base = replace(cfg, variants=frozenset(v for v in cfg.variants if v != name),
                           host_pages=max(cfg.host_pages, 1))
            bug = replace(base, variants=base.variants | {name})
            short = shortest_disagreement(Model(base), Model(bug))
            if short is None:
                print(f"variant {name}: the spec with the bug on never differs from the fixed spec")
                return False
            mm = _replayed(base, short, name)
            # As every catalogued bug shows: a state difference after the trace's last step
            # (not earlier, not a crash of the implementation), or a reported problem
            # (verify's "bytes" kind) at or before it.
            last = len(short) - 1
            caught = mm is not None and ((mm.kind == "state" and mm.step == last)
                                         or (mm.kind == "bytes" and mm.step <= last))
            if not caught:
                print(f"variant {name}: on its shortest trace ({len(short)} steps) the implementation with "
                      f"the bug on gives {'no disagreement' if mm is None else f'{mm.kind} at step {mm.step}: {mm.message}'}")
            # And the bug is the spec's bug: against the spec with the bug on, the same
            # states at every step and no crash.
            twin = _twin_departs(bug, short, name)
            if twin:
                print(f"variant {name}: the implementation with the bug on departs from the spec with the bug on "
                      f"at {twin}")
            return caught and not twin
        out.append((f"variant {name}", run))
    return out


def _situation_unit(sit):
    def run():
        problem = situations_module().check(sit, lambda cfg: driver_factory("reference", cfg, backend=sit.backend))
        if problem:
            print(f"situation {sit.name}: {problem}")
        return not problem
    return (f"situation {sit.name}", run)


def _twin_unit(sit):
    """The bug on both sides: the reference with the bug must stay with the spec with it."""
    def twin():
        cfg, actions, probes = situations_module().trace(sit)
        problem = _twin_departs(cfg, actions, next(iter(cfg.variants)), probes)
        if problem:
            print(f"situation {sit.name}: the reference with the bug leaves the spec with it at {problem}")
        return not problem
    return (f"situation {sit.name}", twin)


def _scenario_unit(name, scenario):
    def fault():
        from tiercheck.conformance.process_faults import guarded

        problem = guarded(scenario)
        if problem:
            print(f"fault {name}: {problem}")
        return not problem
    return (f"fault {name}", fault)


def situations_module():
    from tiercheck.conformance import situations  # imports the implementation: after the map's tracer starts

    return situations


def module_units(module):
    """(name, run) per unit of a kill module: its SITUATIONS, its TWIN_SITUATIONS (the
    twin replay) and its scenarios() (fault units under process_faults' hang guard)."""
    out = [_situation_unit(sit) for sit in getattr(module, "SITUATIONS", ())]
    out += [_twin_unit(sit) for sit in getattr(module, "TWIN_SITUATIONS", ())]
    out += [_scenario_unit(n, sc) for n, sc in (module.scenarios() if hasattr(module, "scenarios") else ())]
    return out


def situation_units():
    """(name, run) per rare situation (tiercheck.conformance.situations): the shortest spec
    trace to it, replayed on the reference with every check (probes included); the twin
    situations with the bug on both sides."""
    return module_units(situations_module())


def default_units():
    """(name, run): the implementation's own defaults of the protocol's fields are the
    spec's (tiercheck.conformance.impl_defaults; every other unit sets them all)."""
    from tiercheck.conformance import impl_defaults

    def run():
        lines = impl_defaults.problems()
        for line in lines:
            print(f"defaults: {line}")
        return not lines
    def domain():
        from tiercheck.conformance import impl_domain

        lines = impl_domain.problems()
        for line in lines:
            print(f"domain: {line}")
        return not lines
    return [("defaults of the implementation", run), ("configuration domain of the implementation", domain)]



def fault_units():
    """(name, run) per fault below the protocol (tiercheck.conformance.process_faults): a
    stopped, slow or never-starting gloo rank, a flush past its deadline, a corrupted store;
    and (tiercheck.conformance.verdict_faults) the verdict's content: the root cause among
    failing gloo ranks, a rank outside the group, bytes gone bad under a load or before an
    ack is drained. Each must end in its clear verdict; a hang is reported, not waited out."""
    # imports the implementation: after the map's tracer starts
    from tiercheck.conformance import process_faults, verdict_faults

    def tmp_dir():
        return tempfile.mkdtemp(prefix="tiercheck-fault-")

    out = []
    for name, scenario in process_faults.scenarios(tmp_dir) + verdict_faults.scenarios():
        def run(name=name, scenario=scenario):
            problem = process_faults.guarded(scenario)
            if problem:
                print(f"fault {name}: {problem}")
            return not problem
        out.append((f"fault {name}", run))
    return out


def s12_kills_b_units():
    """(name, run) per unit of tiercheck.conformance.s12_kills_b (seed-12 survivors, second batch (session 13): a situation, and scenarios run as fault units)."""
    from tiercheck.conformance import s12_kills_b  # imports the implementation: after the map's tracer starts

    return module_units(s12_kills_b)


def s12_kills_ku1_units():
    """(name, run) per unit of tiercheck.conformance.s12_kills_ku1 (seed-12 survivors of session 14, kU1: steps naming a prefetch past the queue's end)."""
    from tiercheck.conformance import s12_kills_ku1  # imports the implementation: after the map's tracer starts

    return module_units(s12_kills_ku1)


def s13_kills_kb_units():
    """(name, run) per unit of tiercheck.conformance.s13_kills_kb (seed-13 survivors killed in session 15 by kB)."""
    from tiercheck.conformance import s13_kills_kb  # imports the implementation: after the map's tracer starts

    return module_units(s13_kills_kb)


def s14_kills_units():
    """(name, run) per unit of tiercheck.conformance.s14_kills (seed-14 survivors killed in session 17)."""
    from tiercheck.conformance import s14_kills  # imports the implementation: after the map's tracer starts

    return module_units(s14_kills)


def s18_kills_units():
    """(name, run) per unit of tiercheck.conformance.s18_kills (survivors killed in session 18)."""
    from tiercheck.conformance import s18_kills  # imports the implementation: after the map's tracer starts

    return module_units(s18_kills)


def s19_kills_units():
    """(name, run) per unit of tiercheck.conformance.s19_kills (survivors killed in session 19)."""
    from tiercheck.conformance import s19_kills  # imports the implementation: after the map's tracer starts

    return module_units(s19_kills)


def s12_kills_ku2_units():
    """(name, run) per unit of tiercheck.conformance.s12_kills_ku2 (seed-12 survivors killed in session 14 by kU2: a situation and a twin situation)."""
    from tiercheck.conformance import s12_kills_ku2  # imports the implementation: after the map's tracer starts

    return module_units(s12_kills_ku2)


def run_unit(name: str, run) -> bool:
    """One unit, then the check that no implementation thread outlives the drivers it
    closed (close() stops every storage worker, per-read prefetch workers included)."""
    from tiercheck.conformance.process_faults import leftover_worker_threads

    ok = run()
    left = leftover_worker_threads()
    if left:
        print(f"{name}: {left}")
    return ok and not left


def budget_unit(budget: float, seed: int):
    def run():
        res = defaults.run_campaign(lambda cfg: driver_factory("reference", cfg), budget, seed=seed,
                                    shrink_budget=5.0)
        failed = [r for r in res.values() if r.failure]
        if failed:
            print(failed[0].failure)
        return not failed
    return [(f"campaign budget {budget}", run)]


AUTO_STEPS = 40  # steps of one auto-mode walk
# Auto mode with a prefetch read still running when check_prefetch_progress comes
# (auto_mode.check_while_reading): one rank and two.
READ_HELD_MODELS = ("wt-prefetch-1r", "wt-prefetch-2r")
TIMER_MODELS = ("wt-prefetch-timeout-2r",)  # the auto mode's prefetch timer (conformance/auto_timer.py)


def auto_units(walks: int):
    """(name, run) per default model: ``walks`` seeded auto-mode walks."""
    out = []
    for label, mf in defaults.default_model_files():
        def run(cfg=mf.config, label=label):
            from tiercheck.conformance import auto_mode  # imports the implementation: after the map's tracer starts

            for seed in range(walks):
                problems = auto_mode.walk(cfg, seed, AUTO_STEPS)
                if problems:
                    print(f"auto mode {label} walk {seed}: {problems[0]}")
                    return False
            return True
        out.append((f"auto {label}", run))
    for name in READ_HELD_MODELS:
        def run(cfg=model_file.load(name).config, name=name):
            from tiercheck.conformance import auto_mode

            problems = auto_mode.check_while_reading(cfg)
            if problems:
                print(f"auto mode {name}, check with the read held: {problems[0]}")
            return not problems
        out.append((f"auto read held {name}", run))
    for name in TIMER_MODELS:
        def run(cfg=model_file.load(name).config, name=name):
            from tiercheck.conformance import auto_timer

            problems = auto_timer.timer_while_reading(cfg)
            if problems:
                print(f"auto mode {name}, the prefetch timer with the read held: {problems[0]}")
            return not problems
        out.append((f"auto timer {name}", run))

        def manual(cfg=model_file.load(name).config, name=name):
            from tiercheck.conformance import auto_timer

            problem = auto_timer.manual_ignores_clock(cfg)
            if problem:
                print(f"manual mode {name}, the clock past the prefetch timer's limit: {problem}")
            return not problem
        out.append((f"manual timer {name}", manual))
    return out


def units(args):
    out = []
    if not args.tours_only:
        out += campaign_units(args.examples, args.seeds) if args.budget is None else budget_unit(args.budget, args.seed)
        out += auto_units(args.walks) + feature_units(args.examples) + variant_units() + situation_units()
        out += default_units()
        out += s12_kills_b_units()
        out += s12_kills_ku2_units()
        out += s12_kills_ku1_units()
        out += s13_kills_kb_units()
        out += s14_kills_units()
        out += s18_kills_units()
        out += s19_kills_units()
    out += tour_units() + tour_units("gloo", GLOO_TOURS, GLOO_TRACES) + mooncake_units() + fault_units()
    if args.unit:  # a part of the suite, by unit name (a map of it says what that part reaches)
        out = [(name, run) for name, run in out if any(u in name for u in args.unit)]
    return out


def reached(doc, rel: str) -> list:
    """Lines of file ``rel`` that some unit of map ``doc`` executes (imports included)."""
    lines = set(doc["import"].get(rel, ()))
    for u in doc["units"]:
        lines.update(u["lines"].get(rel, ()))
    return sorted(lines)


# -- test selection ------------------------------------------------------------------------

def mutated_files():
    files = {}
    for m in MUTATED:
        p = ROOT / m
        for f in (sorted(p.rglob("*.py")) if p.is_dir() else [p]):
            files[str(f.resolve())] = f.relative_to(ROOT).as_posix()
    return files


class LineTracer:
    """Lines of ``files`` executed on every thread, into ``self.hits`` (swap it to split),
    including forked rank processes (gloo): each writes its lines to ``child_dir`` as it
    exits, and ``collect()`` merges them."""

    def __init__(self, files, child_dir: Path):
        self.files = files
        self.hits = defaultdict(set)
        self.child_dir = child_dir

    def _local(self, frame, event, _arg):
        if event == "line":
            self.hits[self.files[frame.f_code.co_filename]].add(frame.f_lineno)
        return self._local

    def _global(self, frame, event, _arg):
        if event == "call" and frame.f_code.co_filename in self.files:
            self.hits[self.files[frame.f_code.co_filename]].add(frame.f_lineno)
            return self._local
        return None

    def _in_child(self):
        # A forked rank process leaves through os._exit (multiprocessing), past atexit.
        self.hits = defaultdict(set)
        exit_now = os._exit

        def dump_then_exit(code):
            sys.settrace(None)
            path = self.child_dir / f"{os.getpid()}.json"
            path.write_text(json.dumps({f: sorted(v) for f, v in self.hits.items()}))
            exit_now(code)

        os._exit = dump_then_exit

    def start(self):
        os.register_at_fork(after_in_child=self._in_child)
        threading.settrace(self._global)
        sys.settrace(self._global)

    def stop(self):
        sys.settrace(None)
        threading.settrace(None)

    def collect(self) -> dict:
        """This process's lines since the last call, with those of rank processes that exited."""
        out, self.hits = self.hits, defaultdict(set)
        for path in sorted(self.child_dir.glob("*.json")):
            for f, lines in json.loads(path.read_text()).items():
                out[f].update(lines)
            path.unlink()
        return out


def write_map(path: Path, args) -> int:
    files = mutated_files()
    tracer = LineTracer(files, Path(tempfile.mkdtemp(prefix="tiercheck-map-")))
    tracer.start()
    # Import everything the units import before splitting: module-level lines are the import's.
    import tiercheck.conformance.reference  # noqa: F401
    import tiercheck.impl.hicache.gloo  # noqa: F401
    import tiercheck.impl.transfer  # noqa: F401
    todo = units(args)
    imported = tracer.collect()
    doc = {"import": {f: sorted(v) for f, v in imported.items()}, "units": [],
           "sources": {rel: Path(f).read_text() for f, rel in files.items()}}
    try:
        for name, run in todo:
            t0 = time.perf_counter()
            ok = run_unit(name, run)
            doc["units"].append({"name": name, "seconds": time.perf_counter() - t0,
                                 "lines": {f: sorted(v) for f, v in tracer.collect().items()}})
            if not ok:
                print("the suite fails on the unmutated code: no map written", file=sys.stderr)
                return 1
    finally:
        tracer.stop()
    path.write_text(json.dumps(doc))
    return 0


def changed_lines(sources) -> dict:
    """file -> lines of the map's sources that differ from the files now."""
    out = {}
    for rel, old in sources.items():
        new = (ROOT / rel).read_text()
        if new == old:
            continue
        sm = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
        lines = set()
        for tag, i1, i2, _j1, _j2 in sm.get_opcodes():
            if tag != "equal":
                lines.update(range(i1 + 1, max(i2, i1 + 1) + 1))
        out[rel] = lines
    return out


def selected(doc, todo):
    """The units that execute a changed line, cheapest first (all, if an import line changed)."""
    changed = changed_lines(doc["sources"])
    if any(set(doc["import"].get(f, ())) & ls for f, ls in changed.items()):
        return todo
    by_name = dict(todo)
    hit = [u for u in doc["units"] if any(set(u["lines"].get(f, ())) & ls for f, ls in changed.items())]
    return [(u["name"], by_name[u["name"]]) for u in sorted(hit, key=lambda u: u["seconds"]) if u["name"] in by_name]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=6, help="examples per default model and seed (default 6)")
    ap.add_argument("--seeds", type=int, default=1, help="seeds of the fixed-count campaign (default 1)")
    ap.add_argument("--budget", type=float, default=None,
                    help="run the time-budgeted default campaign for this many seconds instead")
    ap.add_argument("--seed", type=int, default=0, help="seed of the time-budgeted campaign")
    ap.add_argument("--walks", type=int, default=12, help="auto-mode walks per default model (default 12)")
    ap.add_argument("--tours-only", action="store_true")
    ap.add_argument("--map", type=Path, help="write the per-unit line map of the unmutated code here")
    ap.add_argument("--select", type=Path, help="run only the units of this map that execute a changed line")
    ap.add_argument("--unit", action="append", default=[], metavar="NAME",
                    help="only the units whose name contains NAME (repeatable), e.g. 'campaign wt-evicts-1r'")
    ap.add_argument("--reached", nargs=2, metavar=("MAP", "FILE"),
                    help="print the lines of FILE (e.g. impl/hicache/eviction.py) that the map's units execute")
    args = ap.parse_args(argv)
    if args.reached:
        doc = json.loads(Path(args.reached[0]).read_text())
        if args.reached[1] not in doc["sources"]:
            print(f"{args.reached[1]}: not a file the map traces ({', '.join(sorted(doc['sources']))})", file=sys.stderr)
            return 2
        print(f"{args.reached[1]}: {' '.join(map(str, reached(doc, args.reached[1])))}")
        return 0
    if args.map:
        return write_map(args.map, args)
    todo = units(args)
    if args.select:
        todo = selected(json.loads(args.select.read_text()), todo)
    for name, run in todo:
        if not run_unit(name, run):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A conformance campaign against upstream SGLang (the lane's release): the stateful suite and the
generated transition tours, over the models in models/library/sglang, with step counts,
timings, disagreements (shrunk, written as replayable traces) and upstream path coverage.

Run inside an SGLang lane:

    $(tiercheck lane python sglang==0.5.23) -m tiercheck sglang campaign \\
        --examples 30 --steps 30 --json out.json

Each run is ``MODEL`` (1 rank in-process) or ``MODEL@gloo`` (real gloo rank processes;
``MODEL:3@gloo`` overrides the model's rank count), optionally ``~STRATEGY``: that run's
action choice instead of ``--strategy`` (tiercheck.conformance.steering; e.g.
``sglang/wt-prefetch-2r@gloo~coverage``, whose prefetch actions the ``index`` choice never
reaches), and optionally ``!OPTION[,OPTION]``: those spec options off on the spec side only, to show
the SGLang behaviour each option models (the run should then disagree).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

DEFAULT_RUNS = (
    "sglang/wt-1r", "sglang/wts-1r", "sglang/wt-storage-1r", "sglang/wb-1r", "sglang/wb-storage-1r",
    "sglang/wt-2r@gloo", "sglang/wt-storage-2r@gloo", "sglang/wb-2r@gloo", "sglang/wt-alloc-2r@gloo",
)


class Counting:
    """A driver wrapper counting the steps applied (and their time) in the search, not in
    the replays that shrink a failure (``rounds[-1]``: the current round's stats)."""

    def __init__(self, driver, tally, rounds):
        self.driver, self.tally, self.rounds = driver, tally, rounds
        self.model = driver.model

    def apply(self, action):
        t0 = time.monotonic()
        self.driver.apply(action)
        if "first_failure_at" not in self.rounds[-1]:
            self.tally["steps"] += 1
            self.tally["actions"][action.name] = self.tally["actions"].get(action.name, 0) + 1
            self.tally["step_seconds"] += time.monotonic() - t0

    def state(self):
        return self.driver.state()

    def verify(self):
        return self.driver.verify()

    def close(self):
        self.driver.close()


# Distinct disagreements one stateful run reports at most (tiercheck.conformance.distinct).
FINDINGS_PER_RUN = 4
# Seconds a gloo collective may wait before the driver reports the sync step as hung: the
# ranks run each step together and a collective completes in milliseconds, so a hang
# costs this much (per shrinking candidate too), not the driver's 30 s default.
COLLECTIVE_TIMEOUT = 10.0
SHRINK_SECONDS = 30.0


def conform(model_ref, backend, examples, steps, seed, out_dir, without=(), strategy="index",
            limit=FINDINGS_PER_RUN):
    """The stateful suite, continued past each disagreement it finds (up to ``limit``
    distinct ones, within the same ``examples`` budget; tiercheck.conformance.distinct).
    ``without``: spec options switched off on the spec side only (the run then shows what
    SGLang does that the option models). ``strategy``: the machine's action choice
    (tiercheck.conformance.steering); the committed history was run with "index", so that
    stays the default for reproducible tables."""
    from dataclasses import replace

    from tiercheck.conformance.distinct import find_distinct
    from tiercheck.conformance.sglang import SGLangDriver

    cfg = load_config(model_ref)
    spec_cfg = replace(cfg, **{o: False for o in without})
    rounds, tally = [{}], {"steps": 0, "step_seconds": 0.0, "actions": {}}
    factory = lambda: Counting(SGLangDriver(cfg, backend=backend, spec_cfg=spec_cfg,  # noqa: E731
                                            timeout=COLLECTIVE_TIMEOUT), tally, rounds)
    t0 = time.monotonic()
    row = {"model": model_ref, "ranks": cfg.ranks, "backend": backend, "policy": cfg.policy,
           "storage": cfg.storage, "seed": seed, "steps_per_example": steps, "without": list(without),
           "strategy": strategy}
    label = "-".join(["sglang", *(f"without-{o}" for o in without)])
    findings, totals = find_distinct(factory, examples, steps, seed, record_dir=out_dir, label=label, limit=limit,
                                     strategy=strategy, rounds=rounds, shrink_budget=SHRINK_SECONDS)
    row["result"] = "disagrees" if findings else "conforms"
    row["findings"] = [{("trace" if k == "file" else k): v for k, v in f.items()} for f in findings]
    if findings:  # the first one, as before distinct findings
        first = row["findings"][0]
        row["message"] = first["message"]
        row["trace"] = first["trace"]
        for k in ("steps_before_shrink", "steps_after_shrink", "examples_to_failure"):
            row[k] = first[k]
    row["examples"] = totals["examples"]
    row["rounds"] = totals["rounds"]
    row["steps"] = tally["steps"]
    row["actions"] = action_coverage(cfg, tally["actions"])
    row["seconds"] = round(time.monotonic() - t0, 1)
    row["ms_per_step"] = round(1000 * tally["step_seconds"] / max(tally["steps"], 1), 1)
    return row


def tour(model_ref, backend, max_len=60):
    """Replay the model's transition tour (what `tiercheck generate` writes) on SGLang."""
    from tiercheck.conformance.distinct import signature
    from tiercheck.conformance.runner import replay
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.conformance.tour import build_tour
    from tiercheck.models import model_file
    from tiercheck.spec.model import Model

    cfg = load_config(model_ref)
    t0 = time.monotonic()
    tr = build_tour(Model(cfg), max_len=max_len)
    row = {"model": model_ref, "backend": backend, "traces": len(tr.traces),
           "transitions": [tr.transitions_covered, tr.transitions_total],
           "labels": [tr.labels_covered, tr.labels_total], "steps": 0, "disagreements": []}
    taken = {}
    for k, t in enumerate(tr.traces):
        driver = SGLangDriver(cfg, backend=backend, timeout=COLLECTIVE_TIMEOUT)
        try:
            out = replay(driver, t.actions, expect_disabled=set(t.probes))
        finally:
            driver.close()
        row["steps"] += out.steps
        for a in t.actions[: out.steps]:
            taken[a.name] = taken.get(a.name, 0) + 1
        if out.mismatch is not None:
            row["disagreements"].append({"trace": k, "step": out.mismatch.step, "message": out.mismatch.message,
                                         "signature": signature(driver.model, out.mismatch, t.actions)})
    row["actions"] = action_coverage(cfg, taken)
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def action_coverage(cfg, taken: dict) -> dict:
    """Every action of the model's spec: how often the run applied it (0: never)."""
    from tiercheck.spec.model import Model

    return {name: taken.get(name, 0) for name in sorted(Model(cfg).action_names())}


def option_traces(model_ref, option, out_dir):
    """The spec's shortest path to a step where switching ``option`` off changes the
    successor, written as OPTION-on.json / OPTION-off.json (for options the random suite
    does not reach). Needs no SGLang."""
    from collections import deque
    from dataclasses import replace

    from tiercheck.models import model_file
    from tiercheck.models.trace import write_trace
    from tiercheck.spec.model import Model

    mf = model_file.load(model_ref)
    on, off = Model(mf.config), Model(replace(mf.config, **{option: False}))
    init = on.init_states()[0]
    parent, todo, hit = {init: None}, deque([init]), None
    while todo and hit is None:
        s = todo.popleft()
        if not on.constraint(s):
            continue
        for a, t in on.successors(s):
            if off.next_state(s, a) != t:
                hit = (s, a)
                break
            if t not in parent:
                parent[t] = (s, a)
                todo.append(t)
    if hit is None:
        raise SystemExit(f"{option} changes no transition of {model_ref}")
    s, a = hit
    actions = [a]
    while parent[s] is not None:
        s, b = parent[s]
        actions.append(b)
    actions.reverse()
    for m, tag in ((on, "on"), (off, "off")):
        st = m.init_states()[0]
        states = [st]
        for x in actions:
            st = m.next_state(st, x)
            states.append(st)
        write_trace(Path(out_dir) / f"{option}-{tag}.json", m, model_file.dump(replace(mf, config=m.cfg)),
                    actions, states, message=f"the first step where {option} matters", kind="conformance")
    return actions


def parse_run(spec: str, strategy: str = "index") -> tuple[str, str, str, list[str]]:
    """``MODEL[@BACKEND][~STRATEGY][!OPTION,...]`` -> (model, backend, strategy, options off);
    ``strategy``: the one a run without ``~`` uses."""
    from tiercheck.conformance.steering import STRATEGIES
    from tiercheck.errors import UserError

    head, _, off = spec.partition("!")
    head, _, own = head.partition("~")
    model_ref, _, backend = head.partition("@")
    if own and own not in STRATEGIES:
        raise UserError(f"run {spec}: unknown strategy {own!r} (known: {', '.join(STRATEGIES)})")
    return model_ref, backend or "lockstep", own or strategy, [o for o in off.split(",") if o]


def load_config(model_ref):
    """A model's constants; ``MODEL:R`` runs it with R ranks (e.g. a 2-rank model on 3)."""
    from dataclasses import replace

    from tiercheck.models import model_file

    name, _, ranks = model_ref.partition(":")
    cfg = model_file.load(name).config
    return replace(cfg, ranks=int(ranks)) if ranks else cfg


def coverage(model_ref, backend, reset=False):
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.models import model_file

    driver = SGLangDriver(load_config(model_ref), backend=backend, timeout=COLLECTIVE_TIMEOUT)
    try:
        return driver.path_counts(reset=reset)
    finally:
        driver.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tiercheck sglang campaign", description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", default=list(DEFAULT_RUNS), help="MODEL[@gloo][!OPTION,...]")
    p.add_argument("--examples", type=int, default=30)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--strategy", default="index", help="action choice (tiercheck.conformance.steering; "
                   "'index' reproduces docs/findings/history.md, 'coverage' steers to untaken actions)")
    p.add_argument("--no-tours", action="store_true", help="skip the generated transition tours")
    p.add_argument("--no-conform", action="store_true", help="only the tours")
    p.add_argument("--out", default=".tiercheck/sglang-counterexamples")
    p.add_argument("--json", help="append one JSON line per run here")
    p.add_argument("--without", action="append", default=[],
                   help="switch this spec option off on the spec side only (shows the difference it models)")
    p.add_argument("--option-trace", nargs=2, metavar=("MODEL", "OPTION"),
                   help="only write OPTION-on/-off.json (into --out): the spec's shortest path to a step "
                        "where OPTION matters")
    args = p.parse_args(argv)
    if args.option_trace:
        actions = option_traces(*args.option_trace, args.out)
        print(f"{len(actions)} steps: {', '.join(map(str, actions))}")
        return 0
    from tiercheck.conformance.sglang import paths as sglang_paths
    from tiercheck.conformance.sglang.driver import check_supported, require_lane
    from tiercheck.errors import UserError

    failed = 0
    for spec in args.runs:
        model_ref, backend, strategy, without = parse_run(spec, args.strategy)
        without += list(args.without)
        try:
            check_supported(load_config(model_ref), require_lane())
        except UserError as exc:  # a model this release's adapter core does not map
            row = {"kind": "conform" if not args.no_conform else "tour", "model": model_ref, "backend": backend,
                   "strategy": strategy, "result": "n/a", "message": str(exc)}
            print(json.dumps(row), flush=True)
            if args.json:
                with open(args.json, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
            continue
        if backend == "lockstep":
            sglang_paths.reset()
        else:
            coverage(model_ref, backend, reset=True)
        rows = []
        if not args.no_conform:
            # One folder per run: counterexample files are named by their steps, and two
            # runs can shrink to the same steps on different models.
            run_dir = Path(args.out) / re.sub(r"[/@~!]", "-", spec.replace(":", "-r"))
            rows.append(dict(kind="conform", **conform(model_ref, backend, args.examples, args.steps, args.seed,
                                                       str(run_dir), without, strategy)))
        if not args.no_tours:
            rows.append(dict(kind="tour", **tour(model_ref, backend)))
        per_rank = coverage(model_ref, backend)
        rows[-1]["paths"] = per_rank
        for row in rows:
            bad = row.get("result") == "disagrees" or row.get("disagreements")
            failed += bool(bad)
            print(json.dumps(row, default=str), flush=True)
            if args.json:
                with open(args.json, "a") as fh:
                    fh.write(json.dumps(row, default=str) + "\n")
        never = [name for name, n in per_rank[0].items() if n == 0]
        absent = [name for name, n in per_rank[0].items() if n is None]
        print(f"# {spec}: upstream paths never reached on rank 0: {', '.join(never) or 'none'}"
              f"{'; not in this release: ' + ', '.join(absent) if absent else ''}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

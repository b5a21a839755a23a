"""Conformance kill matrix: every catalogued bug switched on in the implementation only
(the spec stays correct), found by the default campaign (`tiercheck conform --impl X`
with no model: every default model, round-robin, within the budget). The budget is
examples (``--examples N`` per default model, as `tiercheck conform --examples N`), so a
row does not depend on the machine's load; ``--budget S`` gives a time budget instead.
Prints, per variant: the model that killed it, examples (over all default models) and
seconds to the first failure, steps before and after shrinking, and the shortest disagreeing trace on that model (breadth-first search
over spec x spec-mutant pairs; "ref" says whether the implementation disagrees on that
trace too); then conformance throughput (implementation steps/s).

    python benchmarks/kill_matrix.py [--impl reference|spec] [--examples N | --budget S] [--seed S] [--variant NAME]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace

from tiercheck.conformance import defaults
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.runner import replay
from tiercheck.conformance.shortest import shortest_disagreement
from tiercheck.models import model_file
from tiercheck.spec.model import Model
from tiercheck.spec.variants import VARIANTS


def throughput(impl: str, model: str, steps: int = 1500, seed: int = 0) -> float:
    cfg = model_file.load(model).config
    m = Model(cfg)
    rng = random.Random(seed)
    done, spent = 0, 0.0
    while done < steps:
        s, acts = m.init_states()[0], []
        for _ in range(50):
            en = m.actions(s)
            if not en:
                break
            a = rng.choice(en)
            acts.append(a)
            s = m.next_state(s, a)
        driver = driver_factory(impl, cfg)()
        t0 = time.perf_counter()
        try:
            out = replay(driver, acts)
        finally:
            driver.close()
        spent += time.perf_counter() - t0
        assert out.mismatch is None, out.mismatch
        done += len(acts)
    return done / spent


def kill(impl: str, name: str, budget: float, seed: int, shrink_budget: float, per_model=None) -> dict:
    """One row: the default campaign against the implementation with ``name`` on."""
    t0 = time.monotonic()
    res = defaults.run_campaign(lambda cfg: driver_factory(impl, cfg, {name}), budget=budget, seed=seed,
                                label=name, shrink_budget=shrink_budget, per_model=per_model)
    failed = [r for r in res.values() if r.failure]
    row = {"variant": name, "killed": bool(failed), "examples": sum(r.examples for r in res.values())}
    if not failed:
        return row
    r = failed[0]
    cfg = dict(defaults.default_model_files())[r.name].config
    short = shortest_disagreement(Model(cfg), Model(replace(cfg, variants=cfg.variants | {name})))
    ref = None
    if short is not None:
        driver = driver_factory(impl, cfg, {name})()
        try:
            ref = replay(driver, short).mismatch is not None
        finally:
            driver.close()
    row.update(model=r.name, seconds=r.stats["campaign_seconds"], found=r.stats["steps_before_shrink"],
               shrunk=r.stats["steps_after_shrink"], shortest=None if short is None else len(short), ref=ref,
               total=time.monotonic() - t0)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", default="reference")
    ap.add_argument("--examples", type=int, default=None,
                    help="examples per default model and variant (an example budget: no time limit)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds of search per variant instead (default 120 without --examples)")
    ap.add_argument("--shrink-budget", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variant", action="append", default=[], help="only these variants (default: all)")
    ap.add_argument("--no-throughput", action="store_true")
    args = ap.parse_args(argv)
    names = args.variant or sorted(VARIANTS)
    budget = args.budget if args.budget is not None else float("inf") if args.examples else 120.0
    limit = f"--examples {args.examples}" if args.examples else f"--budget {budget:g}s"
    print(f"kill matrix: --impl {args.impl}, default campaign with {limit}, seed {args.seed}\n")
    head = (f"{'variant':24} {'killed':>6} {'model':22} {'examples':>8} {'s to kill':>9} {'steps':>5} "
            f"{'shrunk':>6} {'shortest':>8} {'ref':>3}")
    print(head)
    print("-" * len(head))
    all_killed, within = True, True
    for name in names:
        row = kill(args.impl, name, budget, args.seed, args.shrink_budget, args.examples)
        if not row["killed"]:
            all_killed = False
            print(f"{name:24} {'NO':>6} {'-':22} {row['examples']:>8}", flush=True)
            continue
        short = row["shortest"]
        if short is None or row["shrunk"] > short + 1:
            within = False
        print(f"{name:24} {'yes':>6} {row['model']:22} {row['examples']:>8} {row['seconds']:>9.1f} {row['found']:>5} "
              f"{row['shrunk']:>6} {'-' if short is None else short:>8} {'-' if row['ref'] is None else 'yes' if row['ref'] else 'no':>3}",
              flush=True)
    print("\nexamples / s to kill: over all default models until the first failure; steps: the failing example;")
    print("shrunk: after shrinking; shortest: shortest disagreeing trace on that model (spec x spec-mutant search);")
    print("ref: the implementation also disagrees on that shortest trace")
    print(f"all killed: {'yes' if all_killed else 'NO'}; shrunk <= shortest + 1 on every row: {'yes' if within else 'NO'}")
    if not args.no_throughput:
        print(f"\nconformance throughput ({args.impl}, random walks, state compared and bytes verified every step):")
        for model in ("wt-mirror-1r", "wt-mirror-mla-2r"):
            ranks = model_file.load(model).config.ranks
            print(f"  {model:18} {ranks} rank(s): {throughput(args.impl, model):8.0f} steps/s")
    return 0 if all_killed and within else 1


if __name__ == "__main__":
    sys.exit(main())

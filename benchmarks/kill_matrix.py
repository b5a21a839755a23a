"""Conformance kill matrix: every catalogued bug switched on in the implementation only
(the spec stays correct); the spec-derived suite must fail. Prints, per variant: examples
and seconds to the first failure, steps before and after shrinking, and the model
checker's shortest counterexample length for the same model; then conformance throughput
(implementation steps/s) for one rank and two ranks in lock-step.

    python benchmarks/kill_matrix.py [--impl reference|spec] [--examples N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace

from tiercheck.conformance import machine
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.runner import replay
from tiercheck.models import model_file
from tiercheck.models.checker import Checker
from tiercheck.spec.model import Model
from tiercheck.spec.variants import VARIANTS


def shortest_counterexample(mf) -> int:
    v = Checker(Model(mf.config), [mf.expect_violation]).run().violations.get(mf.expect_violation)
    if not v:
        return -1
    v = v[0] if isinstance(v, list) else v
    return len(v.actions)


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", default="reference")
    ap.add_argument("--examples", type=int, default=300)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    names = sorted(VARIANTS)
    print(f"kill matrix: --impl {args.impl}, up to {args.examples} examples x {args.steps} steps, seed {args.seed}\n")
    head = f"{'variant':26} {'killed':>6} {'examples':>8} {'s to fail':>9} {'steps':>5} {'shrunk':>6} {'checker':>7}"
    print(head)
    print("-" * len(head))
    all_killed = True
    for name in names:
        mf = model_file.load(f"variants/{name}")
        cfg = replace(mf.config, variants=frozenset())
        stats = {}
        try:
            machine.run(driver_factory(args.impl, cfg, {name}), examples=args.examples, steps=args.steps,
                        seed=args.seed, label=name, stats=stats, shrink_budget=30)
            killed = False
        except machine.ConformanceFailure:
            killed = True
        shortest = shortest_counterexample(mf)
        if killed:
            print(f"{name:26} {'yes':>6} {stats['first_failure_examples']:>8} "
                  f"{stats['first_failure_at'] - stats['started']:>9.1f} {stats['steps_before_shrink']:>5} "
                  f"{stats['steps_after_shrink']:>6} {shortest:>7}", flush=True)
        else:
            all_killed = False
            print(f"{name:26} {'NO':>6} {stats.get('examples', 0):>8} {'-':>9} {'-':>5} {'-':>6} {shortest:>7}", flush=True)
    print("\nsteps: failing example as generated; shrunk: after spec-guided shrinking;")
    print("checker: length of the model checker's shortest counterexample to the variant's property")
    print(f"\nconformance throughput ({args.impl}, random walks, state compared and bytes verified every step):")
    for model in ("wt-mirror-1r", "wt-mirror-mla-2r"):
        ranks = model_file.load(model).config.ranks
        print(f"  {model:18} {ranks} rank(s): {throughput(args.impl, model):8.0f} steps/s")
    return 0 if all_killed else 1


if __name__ == "__main__":
    sys.exit(main())

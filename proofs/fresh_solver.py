"""An obligation decided by a solver of its own: the formulas assembled on a shared
solver (the action's setup, then the obligation's facts after a push) handed to a new
``z3.Solver``.

z3 moves a solver to its incremental core at its first push, and there model-based
quantifier instantiation does far worse on the page-sorted obligations, and depends on
the obligations decided before on the same solver: insert's page-sorted targets with
insert_evicts on took 24 CPU-s on one solver with push/pop and 5.5 with a fresh solver
each (docs/proofs.md, "Cost of the audit"). The formula is the same, so is the claim.
"""

from __future__ import annotations

import z3


def solver(formulas, rlimit: int = 0, seed: int = 0) -> z3.Solver:
    """A new solver holding ``formulas`` (rlimit 0: no resource limit; no wall-clock
    limit ever, so the verdict does not depend on the machine's load: proofs/limits.py)."""
    sol = z3.Solver()
    if rlimit:
        sol.set("rlimit", rlimit)
    if seed:
        sol.set("random_seed", seed)
    sol.add(*formulas)
    return sol

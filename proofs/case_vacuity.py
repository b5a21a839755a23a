"""Cases of the pre-state in which an action can never run, decided before its encoding
is built.

The bounded obligations are split into two cases of the pre-state (proofs.obligations
``setup``): replicas identical, or diverged while the next digest check is bound to
fire. A diverged reclaim digest is a nonempty one on some rank, and a replicated step
waits while any rank's digest is nonempty (spec/sync.py ``round_due``: its guard says
``not round_due``). So no replicated step runs from a diverged pre-state, whatever the
number of pages: every obligation of that case holds vacuously. ``vacuous`` asks z3 to
confirm this from the case's premise and the guard's conjunct alone (a weaker premise
than the obligation's: unsat here means unsat there), which takes milliseconds where
the full encoding took seconds per action. The one invariant it needs is the registry
strengthening's ``digest.n >= 0`` (proofs/strengthen.py ``registry``, part of every
obligation's hypothesis), so the premise stays weaker than the obligation's.
"""

from __future__ import annotations

import z3

from . import limits
from .config import ProofConfig
from .encode.actions import BY_NAME, waits_for_round
from .encode.ctx import Ctx
from .encode.sync import digest_check_will_fire, round_due
from .properties import replica_same
from .ranks import SymbolicRanks
from .state import symbolic_state
from .sym import const, eq, not_
from .universe import Universe


def diverged_premise(ctx, pre) -> list:
    """The diverged case: a multi-rank state, neither halted nor hung, whose next digest
    check is bound to fire, with some rank's replica unlike the first rank's."""
    space = pre.space
    r0 = pre.rank(space.r0)
    return [space.multi, eq(pre.halted, 0), eq(pre.hung, 0), digest_check_will_fire(ctx, pre),
            space.any(lambda h: not_(replica_same(ctx, pre.rank(h), r0)))]


def vacuous(action: str, case: str, variants=frozenset(), k: int = 2, fix=None) -> bool:
    """True when z3 proves that ``action`` is never enabled in ``case``: its premise and
    the guard conjunct ``not round_due`` (replicated steps only) are unsatisfiable."""
    if case != "diverged" or action not in BY_NAME or not waits_for_round(action):
        return False
    cfg = ProofConfig.symbolic_config(variants, fix=fix)
    uni = Universe.symbolic_universe(k)
    space = SymbolicRanks()
    ctx = Ctx(cfg, uni, space)
    ctx.replicas_agree = False
    pre = symbolic_state(space, k, "s", shared=False)
    premise = diverged_premise(ctx, pre) + [not_(round_due(ctx, pre))]
    space.forall(lambda h: pre.rank(h).digest.n >= 0)  # strengthen.registry
    sol = z3.Solver()
    sol.add(*[const(x) for x in [*uni.constraints(), *cfg.constraints(), *premise, *ctx.side]])
    from .obligations import Setup, solve

    res, _ = solve(Setup(ctx, pre, None, None, sol), z3.BoolVal(True), [space.r0], limits.CASE_VACUITY_RLIMIT)
    return res == z3.unsat


def diverged_excused(action: str, variants=frozenset(), k: int = 2, fix=None) -> bool:
    """True when z3 proves that ``action`` from the diverged case always reaches a state
    whose difference rank_agreement excuses: halted, hung, or a digest check still
    bound to fire (a sync round halts on the digest comparison, or leaves the digests
    alone). The excuse reads the halt and hang codes and the digest lists only, never
    the tree: checked on the bounded encoding with ``k`` pages."""
    from .obligations import _principal, setup
    from .properties import rank_excuse

    su = setup(action, variants, k, fix, "diverged")
    space = su.ctx.space
    n_side, n_consts = len(su.ctx.side), len(space.consts)
    excuse = rank_excuse(su.ctx, su.post)
    lit = z3.Bool(f"excuse!{action}!{n_consts}")
    su.solver.add(*[const(x) for x in su.ctx.side[n_side:]])
    su.solver.add(z3.Implies(lit, const(not_(excuse))))
    from .obligations import solve

    res, _ = solve(su, lit, _principal(su, space.consts[n_consts:]), limits.CASE_VACUITY_RLIMIT)
    return res == z3.unsat

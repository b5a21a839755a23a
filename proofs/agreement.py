"""Agreement between the explicit spec and the z3 encoding on concrete states.

For an explicit state s of a model and an action name, the encoding (over the model's
concrete universe and ranks, with symbolic action parameters) must
  * admit every explicit successor: guard /\\ post = t is satisfiable, with the
    parameters bound to the explicit action's values;
  * admit nothing else: guard /\\ post differs from every explicit successor of that
    action is unsatisfiable (parameters free: z3 may pick any value the encoding
    allows, so the parameter domains are checked too).
``rank_space`` chooses how ranks are quantified: "concrete" (a list) or "symbolic" (the
proof encoding's Rank sort, closed to exactly the model's ranks).
"""

from __future__ import annotations

from typing import List, Tuple

import z3

from ..spec.model import Model
from .config import ProofConfig
from .formula import holds
from .encode.actions import step
from .encode.ctx import Ctx
from .ranks import ConcreteRanks, SymbolicRanks
from .state import SState, rv_same, same_state
from .sym import and_, const, eq, not_, or_
from .translate import request_end, to_terms
from .universe import Universe


def concrete_ctx(m: Model, rank_space: str = "concrete"):
    cfg = ProofConfig.from_spec(m.cfg)
    uni = Universe.from_pages(m.pages)
    space = ConcreteRanks(m.cfg.ranks) if rank_space == "concrete" else SymbolicRanks(closed=m.cfg.ranks)
    ctx = Ctx(cfg, uni, space)
    ctx.request_ends = sorted({pages[-1] for pages in m.pages.request_pages})
    return ctx


def lift(ctx, m: Model, s) -> SState:
    """An explicit state as terms in ``ctx``'s rank space."""
    space = ctx.space
    if not space.symbolic:
        return to_terms(m, s, space)
    conc = to_terms(m, s, ConcreteRanks(m.cfg.ranks))
    index = {c.get_id(): r for r, c in enumerate(space.closed)}

    def rank_fn(h):
        # A symbolic rank constant is one of the closed constants: select its view.
        from .state import rv_ite

        out = conc.rank(m.cfg.ranks - 1)
        for r in range(m.cfg.ranks - 2, -1, -1):
            out = rv_ite(h == space.closed[r], conc.rank(r), out)
        return out

    return SState(space, rank_fn, conc.hung, conc.halted)


def _positions(ctx, s, field, missing=None):
    """Per rank handle, each page's position in the rank's ``field`` order (``missing``
    where it has none; default: after every entry)."""
    rows = []
    for rs in s.ranks:
        order = getattr(rs, field)
        pos = {e: i for i, e in enumerate(order)}
        rows.append([pos.get(p, len(order) if missing is None else missing) for p in range(len(rs.owner))])
    if not ctx.space.symbolic:
        return lambda h: rows[h]

    def at(h):
        out = rows[-1]
        for r in range(len(rows) - 2, -1, -1):
            out = [z3.If(h == ctx.space.closed[r], a, b) for a, b in zip(rows[r], out)]
        return out

    return at


def bind_lru(ctx, m: Model, s) -> None:
    """The victim keys of ``s`` (encode.host_eviction.victim_keys): each rank's position
    of every node in its LRU order (its clock order under lru-local-clock); and the CP
    planner's (bind_planner)."""
    bind_planner(ctx, m, s)
    if not m.cfg.lru:
        return
    ctx.lru_positions = _positions(ctx, s, "clock" if m.cfg.has("lru-local-clock") else "lru")
    ctx.clock_positions = _positions(ctx, s, "clock", -1)


def bind_planner(ctx, m: Model, s) -> None:
    """The CP planner's order keys of ``s`` (encode.cp_planner.planner_keys), as
    spec/cp_planner.plan_victims takes them: the rank's clock position (-1: none) under
    planner-local-tiebreak, the replicated LRU position under victim_order = "lru",
    else none (the end page decides); and each rank's clock (local_access)."""
    if not m.cfg.cp_planner:
        return
    ctx.clock_positions = _positions(ctx, s, "clock", -1)
    if m.cfg.has("planner-local-tiebreak"):
        ctx.planner_order = ctx.clock_positions
    elif m.cfg.lru:
        ctx.planner_order = _positions(ctx, s, "lru")
    else:
        ctx.planner_order = lambda h: [0] * len(m.pages.parent)


def bind_dlru(ctx, m: Model, s) -> None:
    """The durable LRU of ``s`` (encode.durable.lru_view): per rank each page's position
    in ``dlru`` and its age (refresh_rounds where it has no entry)."""
    rows = []
    for rs in s.ranks:
        pos = {p: i for i, (p, _a) in enumerate(rs.dlru)}
        age = dict(rs.dlru)
        k = len(rs.owner)
        rows.append(([pos.get(p, -1) for p in range(k)], [age.get(p, m.cfg.refresh_rounds) for p in range(k)]))
    if not ctx.space.symbolic:
        ctx.dlru_of = lambda h: rows[h]
        return

    def at(h):
        stamps, ages = rows[-1]
        for r in range(len(rows) - 2, -1, -1):
            c = h == ctx.space.closed[r]
            stamps = [z3.If(c, a, b) for a, b in zip(rows[r][0], stamps)]
            ages = [z3.If(c, a, b) for a, b in zip(rows[r][1], ages)]
        return stamps, ages

    ctx.dlru_of = at


def _handles(ctx):
    return ctx.space.closed if ctx.space.symbolic else ctx.space.handles()


def bind(ctx, m: Model, params: dict, a) -> list:
    """Constraints fixing the encoding's parameters to the explicit action's values."""
    out = []
    for k, v in params.items():
        if k == "fail":
            failing = set(a.get("fail", ()))
            for r, h in enumerate(_handles(ctx)):
                out.append(eq(v(h), r in failing))
        elif k == "rank":
            target = _handles(ctx)[a["rank"]]
            out.append(v == target)
        elif k == "req":
            out.append(v == request_end(m, a["req"]))
        else:
            out.append(v == a[k])
    return out


def _solver_with(ctx, extra) -> z3.Solver:
    sol = z3.Solver()
    parts = list(ctx.side) + ctx.uni.constraints() + ctx.cfg.constraints()
    if ctx.space.symbolic:
        parts += ctx.space.ground()
    parts += list(extra)
    sol.add(*[const(x) for x in parts])
    return sol


def post_equals(ctx, post: SState, m: Model, t):
    """post is the explicit state t (compared per rank handle)."""
    target = lift(ctx, m, t)
    return same_state(post, target, _handles(ctx))


def admits(m: Model, s, a, t, rank_space="concrete") -> bool:
    """The encoding admits the explicit step s --a--> t."""
    ctx = concrete_ctx(m, rank_space)
    pre = lift(ctx, m, s)
    bind_lru(ctx, m, s)
    bind_dlru(ctx, m, s)
    st = step(ctx, pre, a.name)
    goal = [st.guard, post_equals(ctx, st.post, m, t)] + bind(ctx, m, st.params, a)
    sol = _solver_with(ctx, goal)
    return sol.check() == z3.sat


def transition_value(m: Model, s, a, t, name: str) -> bool:
    """The bounded encoding's transition property ``name`` on the explicit step s --a--> t
    (the step's parameters bound to the action's, so a step-dependent part such as
    release_safety's held node is the step's)."""
    from .properties import PROPERTIES
    from .protocol import PROTOCOL

    prop = PROPERTIES[name] if name in PROPERTIES else PROTOCOL[name]  # consensus ones: PROTOCOL
    ctx = concrete_ctx(m)
    pre = lift(ctx, m, s)
    bind_lru(ctx, m, s)
    bind_dlru(ctx, m, s)
    st = step(ctx, pre, a.name)
    goal = holds(ctx.space, prop.fn(ctx, pre, a.name, lift(ctx, m, t)))
    sol = _solver_with(ctx, bind(ctx, m, st.params, a) + [z3.Not(const(goal))])
    return sol.check() == z3.unsat


def extra_successor(m: Model, s, name: str, succs: List, rank_space="concrete"):
    """A successor the encoding allows for action ``name`` that the spec lacks, or None."""
    ctx = concrete_ctx(m, rank_space)
    pre = lift(ctx, m, s)
    bind_lru(ctx, m, s)
    bind_dlru(ctx, m, s)
    st = step(ctx, pre, name)
    differs = [not_(post_equals(ctx, st.post, m, t)) for t in succs]
    sol = _solver_with(ctx, [st.guard] + differs)
    res = sol.check()
    if res == z3.unsat:
        return None
    if res == z3.unknown:
        return f"unknown ({sol.reason_unknown()})"
    model = sol.model()
    params = {k: (model.eval(v, model_completion=True) if not callable(v) else "pred") for k, v in st.params.items()}
    return f"z3 allows {name} with {params} to a state the spec does not reach"


def check_state(m: Model, s, rank_space="concrete") -> List[str]:
    """Both directions for every action at state s; a list of disagreements."""
    problems = []
    by_name = {}
    for a in m.actions(s):
        by_name.setdefault(a.name, []).append((a, m.next_state(s, a)))
    for a_list in by_name.values():
        for a, t in a_list:
            if not admits(m, s, a, t, rank_space):
                problems.append(f"the encoding does not admit {a}")
    for name in m.action_names():
        succs = [t for _a, t in by_name.get(name, [])]
        extra = extra_successor(m, s, name, succs, rank_space)
        if extra:
            problems.append(extra)
    return problems

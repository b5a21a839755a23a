"""The two-rank encoding of rank_agreement (proofs.epr_rank_agreement) on explicit
states: what tests/proofs/test_proofs_rank_agreement.py compares with the spec.

- ``same_value(m, s, r)``: the encoding's "replicas agree" on ranks 0 and r of state s
  (the closed forest of the model's pages, as proofs.epr_agreement lifts one rank);
  ``pair_value``: any formula over the two ranks' views (of a step, with ``t``);
- ``spec_same(m, s, r)``: the same comparison read off the spec's RankStates;
- ``pair_admits(m, s, a, t, r)``: the explicit replicated step s -a-> t, on ranks 0 and
  r at once, is a behaviour of the pair encoding, with its shared choices (one value
  for both ranks) and its per-rank ones. This is what makes sharing a choice sound: a
  choice the spec made differently on two ranks would leave the step unadmitted.
"""

from __future__ import annotations

import z3

from .config import FLAGS, INTS, ProofConfig
from .epr_agreement import _base, _lift, same_view
from .forest import SlotSort, ground


def same_value(m, s, r: int) -> bool:
    from .epr_rank_agreement import same

    return pair_value(m, s, r, lambda u, v0, vr: same(v0, vr))


def pair_value(m, s, r: int, fn, t=None) -> bool:
    """A formula over ranks 0 and r of s (``fn(u, v0, vr)``), or with ``t`` over their
    pre- and post-states (``fn(u, v0, w0, vr, wr)``), on the closed forest."""
    from .epr_agreement import _all_hold

    u, pages, facts = _base(m)
    views = []
    for h in (0, r):
        for st in (s, t) if t is not None else (s,):
            v, f = _lift(m, st, h, u, pages)
            views.append(v)
            facts = facts + f
    return _all_hold(pages, facts, {"v": fn(u, *views)}, u.slot_consts)["v"]


def spec_same(m, s, r: int) -> bool:
    """What ``same`` compares, on the spec's states: owners, live nodes' fields, the pages
    under wq and lq, prefetch anchors, the fail-closed flag, the release queue's length
    and total."""
    def proj(rs):
        chain = lambda ops: frozenset(p for a, b in ops for p in m.pages.chain(a, b))
        return (rs.owner, rs.nodes, chain(rs.wq), chain(rs.lq), frozenset(op[1] for op in rs.pq if op[1] >= 0),
                rs.closed, len(rs.relq), sum(rs.relq))

    return proj(s.ranks[0]) == proj(s.ranks[r])


def concrete_fix(m) -> dict:
    """The model's configuration as the ``fix`` of a symbolic proof setup."""
    pc = ProofConfig.from_spec(m.cfg)
    return {f: getattr(pc, f) for f in (*FLAGS, *INTS)}


def pair_admits(m, s, a, t, r: int) -> bool:
    from .epr_rank_agreement import rename_decl, setup

    ps = setup(a.name, frozenset(m.cfg.variants), concrete_fix(m))
    u, pages, facts = _base(m)
    views = []
    for h, pre, post in ((0, ps.su.pre, ps.su.post), (r, ps.pre2, ps.post2)):
        vs, fs = _lift(m, s, h, u, pages)
        vt, ft = _lift(m, t, h, u, pages)
        views += fs + ft + [same_view(u, pre, vs), same_view(u, post, vt)]
    params = ps.su.params
    bind = []
    for h, d in ((0, params["dups"]), (r, rename_decl(ps, params["dups"]))):
        bind += [d(c) == (i in s.ranks[h].dups) for i, c in enumerate(pages)]
    if "node" in params:
        bind.append(params["node"] == pages[a["node"]])
    if "req" in params and "req" in dict(a.params):
        bind.append(params["req"] == pages[m.pages.request_pages[a["req"]][-1]])
    slots = u.slot_consts
    if not m.cfg.slots:  # the encoding's slot step still runs: a pool with room for every page
        slots = [z3.Const(f"free_slot{i}!{id(u)}", SlotSort) for i in range(len(pages) + 1)]
        facts = facts + [z3.Distinct(*slots)]
    sol = z3.Solver()
    sol.add(*ground([*facts, *ps.su.solver.assertions(), *views, *bind], pages, slots))
    res = sol.check()
    if res == z3.unknown:
        raise RuntimeError(f"z3 could not decide: {sol.reason_unknown()}")
    return res == z3.sat

"""The queue entries of proofs.epr_queues on concrete states: values and admitted steps.

A spec rank's wq, lq and sq are lifted onto closed entry sorts, one constant per list
position (position i: entry i of the list; i < wdone: finished), with the list order
as ``before``; the tree view is lifted as proofs.epr_agreement does. For a step, the
positions are lined up so that an entry keeps its constant: a step that drops a prefix
of r entries shifts the successor's list by r, one that appends gets fresh constants
behind the old ones (no spec step does both to one queue).
tests/proofs/test_proofs_queues.py uses it to keep the invariants in agreement with the
spec's lists and the bounded encodings, and to check that every explicit step of a
covered action is a behaviour of the queue encoding.
"""

from __future__ import annotations

from typing import Dict, List

import z3

from .epr_agreement import _all_hold, _base, _lift, step_setup
from .epr_queues import QUEUES, SORTS, UQHYPOTHESES, UQPROPS, Order, step, symbolic
from .forest import ground

DONE = {"wq": lambda rs: rs.wdone, "lq": lambda rs: rs.ldone, "sq": lambda rs: len(rs.sdone)}


def positions(rs, q: str) -> int:
    return max(len(getattr(rs, q)), DONE[q](rs))


def constants(sizes: Dict[str, int], tag: str) -> Dict:
    """Per queue, one constant per position and one spare (an entry of the sort in no
    list: evict's encoding names a fresh entry whether or not it appends it)."""
    return {SORTS[q]: [z3.Const(f"{q}{i}!{tag}", SORTS[q]) for i in range(sizes[q] + 1)] for q in QUEUES}


def lift(m, rs, pages: List, consts: Dict, order: Order, shift=None, tag: str = "c"):
    """(queue state, facts): rank state rs's queues over the constants, entry i of queue
    q at constant ``shift[q] + i``, an acked backup's counts as the prefixes of its chain
    (epr_queues.ACK_FIELDS); the order facts are the positions' (added once)."""
    Q = symbolic(f"{tag}{id(rs)}")
    facts = []
    for q in QUEUES:
        cs, items, done, k = consts[SORTS[q]], getattr(rs, q), DONE[q](rs), (shift or {}).get(q, 0)
        x = Q[q]
        for i, c in enumerate(cs):
            j = i - k
            member = 0 <= j < len(items)
            facts += [x["in"](c) == member, x["dn"](c) == (0 <= j < done)]
            if member:
                facts += [x["st"](c) == pages[items[j][0]], x["end"](c) == pages[items[j][1]]]
            if q == "sq" and member and j < len(rs.sdone):
                facts += _ack(m, x, c, items[j], rs.sdone[j], pages)
    return Q, facts


def _ack(m, x, c, item, ack, pages) -> list:
    from ..spec.storage_path import SKIP

    chain = m.pages.chain(*item)
    out = [x["rskip"](c) == (ack.reported == SKIP), x["askip"](c) == (ack.actual == SKIP)]
    for name, n in (("rgot", ack.reported), ("got", ack.actual)):
        out += [x[name](c, pg) == (p in chain[:max(n, 0)]) for p, pg in enumerate(pages)]
    return out


def order_facts(consts: Dict, order: Order) -> list:
    return [order.pos[q](c) == i for q in QUEUES for i, c in enumerate(consts[SORTS[q]])]


def values(m, s, r: int) -> Dict[str, bool]:
    """The queue invariants and hypotheses on rank r of explicit state s."""
    u, pages, facts = _base(m)
    v, vf = _lift(m, s, r, u, pages)
    rs = s.ranks[r]
    consts = constants({q: positions(rs, q) for q in QUEUES}, f"v{id(s)}")
    order = Order(f"before{id(s)}")
    Q, qf = lift(m, rs, pages, consts, order)
    fs = {n: fn(u, v, Q, order) for n, fn in {**UQPROPS, **UQHYPOTHESES}.items()}
    return _all_hold(pages, facts + vf + qf + order_facts(consts, order), fs, u.slot_consts, consts)


def line_up(pre, post, q: str):
    """(shift of the successor's positions, positions in all) for queue q across a step:
    a dropped prefix shifts, an append adds positions."""
    a, b = getattr(pre, q), getattr(post, q)
    if len(b) < len(a):
        k = len(a) - len(b)
        assert a[k:] == b, (q, a, b)
        return k, positions(pre, q)
    assert b[:len(a)] == a, (q, a, b)
    return 0, max(positions(pre, q), positions(post, q))


def admits(m, s, a, t, r: int) -> bool:
    """The queue encoding (with the tree step of proofs.epr_actions, bound to the
    explicit step as proofs.epr_agreement.admits binds it) admits rank r's queues after
    s -a-> t."""
    from .epr_agreement import same_view

    u, pages, facts, pre, params, post = step_setup(m, s, r, a.name)
    target, tf = _lift(m, t, r, u, pages)
    rs, rt = s.ranks[r], t.ranks[r]
    lined = {q: line_up(rs, rt, q) for q in QUEUES}
    consts = constants({q: n for q, (_k, n) in lined.items()}, f"a{id(s)}")
    order = Order(f"before{id(s)}")
    Q, qf = lift(m, rs, pages, consts, order, tag="pre")
    want, wf = lift(m, rt, pages, consts, order, shift={q: k for q, (k, _n) in lined.items()}, tag="post")
    qfacts: list = []
    got = step(u, a.name, pre, post, params, Q, order, qfacts)
    bind = [params["node"] == pages[a["node"]]] if "node" in params else []
    same = [z3.And(got[q]["in"](c) == want[q]["in"](c), got[q]["dn"](c) == want[q]["dn"](c), z3.Implies(
        want[q]["in"](c), z3.And(got[q]["st"](c) == want[q]["st"](c), got[q]["end"](c) == want[q]["end"](c))))
        for q in QUEUES for c in consts[SORTS[q]]]
    g, w = got["sq"], want["sq"]
    same += [z3.Implies(w["dn"](c), z3.And(g["rskip"](c) == w["rskip"](c), g["askip"](c) == w["askip"](c), *[
        g[n](c, pg) == w[n](c, pg) for n in ("rgot", "got") for pg in pages])) for c in consts[SORTS["sq"]]]
    sol = z3.Solver()
    sol.add(*ground([*facts, *u.facts, *tf, *bind, same_view(u, post, target), *qf, *wf, *qfacts,
                     *order_facts(consts, order), *same], pages, u.slot_consts, consts))
    res = sol.check()
    if res == z3.unknown:
        raise RuntimeError(f"z3 could not decide: {sol.reason_unknown()}")
    return res == z3.sat

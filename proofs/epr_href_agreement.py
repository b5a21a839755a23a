"""proofs.epr_href and proofs.epr_prefetch on concrete states: invariant values and
admitted steps.

A spec rank's backups and prefetches are lifted onto the fields of proofs.epr_href
(``scov``: the pages of sq's chains; ``pfq``/``phas``/``panc``: per prefetch in pq, the
last page of its request, whether it has an anchor, the anchor's end page) over the
closed page sort of proofs.epr_agreement, and each prefetch's done count and flags onto
epr_prefetch's (done d >= 1: the d-th page below the anchor on the request's path).
tests/proofs/test_proofs_href_unbounded.py
uses it to keep href_accounting's page-sorted form in agreement with the spec and the
bounded encoding, and to check that every explicit step of a covered action is a
behaviour of the encoding with these fields and the facts epr_href keeps apart.
"""

from __future__ import annotations

from typing import Dict, List

import z3

from .epr_agreement import _all_hold, _base, _lift, same_view, step_setup
from .epr_href import facts as href_facts, href_accounting, href_pages
from .epr_prefetch import prefetch_queue
from .forest import ground
from .paged import Paged


def field_facts(m, rs, v: Paged, pages: List) -> list:
    """Facts fixing view v's epr_href and epr_prefetch fields to rank state rs."""
    from ..spec.prefetch_end import FREED, NOT_DONE, REVOKED, TERMINATED, TIMED_OUT, flags

    cov = {p for start, end in rs.sq for p in m.pages.chain(start, end)}
    last = lambda op: m.pages.request_pages[op[0]][-1]
    out = [v.scov(c) == (p in cov) for p, c in enumerate(pages)]
    out += [v.pfq(c) == any(last(op) == p for op in rs.pq) for p, c in enumerate(pages)]
    for i, op in enumerate(rs.pq):
        _req, anc, k, _n = op
        c, done, f = pages[last(op)], rs.pdone[i], flags(rs, i)
        out += [v.phas(c) == (anc >= 0), v.pdn(c) == (done != NOT_DONE),
                v.pto(c) == bool(f & TIMED_OUT), v.prev(c) == bool(f & REVOKED),
                v.pterm(c) == bool(f & TERMINATED), v.pfre(c) == bool(f & FREED)]
        if anc >= 0:
            out.append(v.panc(c) == pages[anc])
        if done != NOT_DONE:
            out.append(v.pzero(c) == (done == 0))
            if done > 0:
                out.append(v.pdl(c) == pages[m.pages.request_pages[op[0]][k + done - 1]])
    return out


def values(m, s, r: int) -> Dict[str, bool]:
    """href_accounting (page-sorted) and its hypotheses href_pages on rank r of s."""
    u, pages, facts = _base(m)
    v, vf = _lift(m, s, r, u, pages)
    formulas = {"href_accounting": href_accounting(u, v), "href_pages": href_pages(u, v),
                "prefetch_queue": prefetch_queue(u, v)}
    return _all_hold(pages, facts + vf + field_facts(m, s.ranks[r], v, pages) + href_facts(u), formulas,
                     u.slot_consts)


def _same(a: Paged, b: Paged, pages) -> list:
    out = []
    for c in pages:
        done = z3.And(a.pdn(c) == b.pdn(c), z3.Implies(b.pdn(c), z3.And(
            a.pzero(c) == b.pzero(c), z3.Implies(z3.Not(b.pzero(c)), a.pdl(c) == b.pdl(c)))))
        out += [a.scov(c) == b.scov(c), a.pfq(c) == b.pfq(c),
                z3.Implies(b.pfq(c), z3.And(a.phas(c) == b.phas(c), z3.Implies(b.phas(c), a.panc(c) == b.panc(c)),
                                            done, *[a.f[n](c) == b.f[n](c) for n in ("pto", "prev", "pterm", "pfre")]))]
    return out


def _bind(m, s, a, params, pages, r: int) -> list:
    """The step's request as the explicit step has it (prefetch_from_storage: the request;
    check_prefetch_progress: the checked prefetch's)."""
    last = lambda req: pages[m.pages.request_pages[req][-1]]
    if a.name == "prefetch_from_storage":
        return [params["prefetch_req"] == last(a["req"])]
    if a.name == "check_prefetch_progress":
        return [params["req"] == last(s.ranks[r].pq[a["op"]][0])]
    if "prefetch_op" in params:  # the prefetch steps (proofs.epr_prefetch): the op's request
        return [params["prefetch_op"] == last(s.ranks[r].pq[a["op"]][0])]
    out = [params["node"] == pages[a["node"]]] if "node" in params else []
    return out + ([params["req"] == last(a["req"])] if "req" in params and "req" in dict(a.params) else [])


def admits(m, s, a, t, r: int) -> bool:
    """The encoding of a.name, with epr_href's fields and facts, admits rank r's part of
    the explicit step s -a-> t (the tree as proofs.epr_agreement.admits compares it)."""
    from .epr_sched_evict import bind_short

    u, pages, facts, pre, params, post = step_setup(m, s, r, a.name)
    target, tf = _lift(m, t, r, u, pages)
    bind = _bind(m, s, a, params, pages, r) + bind_short(m, s, a, params)
    mine = field_facts(m, s.ranks[r], pre, pages) + field_facts(m, t.ranks[r], target, pages)
    sol = z3.Solver()
    sol.add(*ground([*facts, *u.facts, *href_facts(u), *tf, *bind, *mine, same_view(u, post, target),
                     *_same(post, target, pages)], pages, u.slot_consts))
    res = sol.check()
    if res == z3.unknown:
        raise RuntimeError(f"z3 could not decide: {sol.reason_unknown()}")
    return res == z3.sat

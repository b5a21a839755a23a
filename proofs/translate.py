"""Between explicit spec states (tiercheck.spec.state) and the encoding's terms.

``to_terms``: an explicit ``State`` as a concrete ``SState`` (z3 literals), over a
``ConcreteRanks`` space; what the agreement tests and ``evaluate`` use.
``from_model``: a z3 model of a symbolic state back to an explicit ``State`` (how a
counterexample to induction is printed in the spec's own names and replayed).
"""

from __future__ import annotations

from typing import Dict, List

import z3

from ..spec.state import Node, RankState, State, StorageAck
from .encode.host_slots import off_fields
from .state import HALT_WHERE, HUNG, NODE_FIELDS, RV, SState
from .sym import SymList, const, model_value

_HUNG_NAMES = {v: k for k, v in HUNG.items()}


def request_end(m, req: int) -> int:
    return m.pages.request_pages[req][-1]


def end_to_request(m, end: int) -> int:
    for i, pages in enumerate(m.pages.request_pages):
        if pages[-1] == end:
            return i
    raise KeyError(end)


def rank_to_rv(m, rs: RankState, store_mask: int, k: int) -> RV:
    vals = {"own": tuple(rs.owner)}
    for f in NODE_FIELDS:
        col = []
        for e, n in enumerate(rs.nodes):
            if n is None:
                col.append(e if f == "start" else (False if f in ("lbp", "rel") else 0))
            else:
                col.append(getattr(n, f))
        vals[f] = tuple(col)
    vals["dev_free"] = rs.dev_free
    vals["host_free"] = rs.host_free
    vals["durable"] = tuple(bool(rs.durable >> p & 1) for p in range(k))
    vals["store"] = tuple(bool(store_mask >> p & 1) for p in range(k))
    run = [-1] * k
    for req, e in rs.running:
        run[request_end(m, req)] = e
    vals["run"] = tuple(run)
    vals["wq"] = SymList.of(k, rs.wq, 2)
    vals["wdone"] = rs.wdone
    vals["lq"] = SymList.of(k, rs.lq, 2)
    vals["ldone"] = rs.ldone
    vals["sq"] = SymList.of(k, rs.sq, 2)
    vals["sdone"] = SymList.of(k, [(a.reported, a.actual) for a in rs.sdone], 2)
    pad = lambda got: tuple(got) + (-1,) * (k - len(got)) if m.cfg.slots else ()
    vals["pq"] = SymList.of(
        k, [(request_end(m, q[0]), q[1], q[2], q[3], d, rs.pflags[i] if rs.pflags else 0)
            + pad(rs.pslots[i] if m.cfg.slots else ())
            for i, (q, d) in enumerate(zip(rs.pq, rs.pdone))], 6 + (k if m.cfg.slots else 0)
    )
    vals["relq_n"] = len(rs.relq)
    vals["relq_sum"] = sum(rs.relq)
    vals["plan"] = SymList.of(k, rs.plan, 1)
    vals["mismatch"] = rs.mismatch
    vals["closed"] = rs.closed
    vals["dups"] = SymList.of(k, rs.dups, 1)
    vals["digest"] = SymList.of(k, rs.digest, 1)
    if m.cfg.slots:
        from .encode.host_slots import set_of

        vals.update(hslot=tuple(rs.hslot), hfree=set_of(x for x in range(m.cfg.host_pages) if rs.hfree >> x & 1),
                    rset=set_of(x for entry in rs.rslots for x in entry), hok=True)
    else:
        vals.update(off_fields(k))
    return RV(**vals)


def halted_code(s: State) -> int:
    if not s.halted:
        return 0
    return HALT_WHERE[s.halted.split(":")[0]]


def to_terms(m, s: State, space) -> SState:
    k = m.pages.count
    rvs = [rank_to_rv(m, rs, s.store[r], k) for r, rs in enumerate(s.ranks)]
    return SState(space, lambda h: rvs[h], HUNG[s.hung], halted_code(s))


# --- a z3 model back to an explicit state ---------------------------------------------------


def rv_values(model, rv: RV, pool: int = 0) -> Dict:
    """``pool``: the host pool's size, over which slot sets are read (slots on)."""
    from .encode.host_slots import SET, model_members

    out = {}
    for name in RV._fields:
        v = getattr(rv, name)
        if isinstance(v, z3.ExprRef) and v.sort() == SET:
            out[name] = model_members(model, v, pool)
        elif isinstance(v, SymList):
            out[name] = v.values(model)
        elif isinstance(v, tuple):
            out[name] = [model_value(model, x) for x in v]
        else:
            out[name] = model_value(model, v)
    return out


def values_to_rank(vals: Dict, req_of_end, flags: bool = False) -> RankState:
    """``flags``: the config tracks per-prefetch flags (prefetch_end.tracks_flags)."""
    k = len(vals["own"])
    nodes = []
    for e in range(k):
        if vals["own"][e] == e:
            nodes.append(Node(*(vals[f][e] for f in NODE_FIELDS)))
        else:
            nodes.append(None)
    relq_n, relq_sum = vals["relq_n"], vals["relq_sum"]
    relq = ()
    if relq_n > 0:  # any split of the total into relq_n positive entries is the same
        relq = (relq_sum - (relq_n - 1),) + (1,) * (relq_n - 1)
    slots = {}
    if isinstance(vals.get("hfree"), list):  # host slot identities (encode/host_slots.py)
        from .encode.host_slots import to_spec_fields

        slots = to_spec_fields(vals, relq)
    return RankState(
        **slots,
        owner=tuple(vals["own"]),
        nodes=tuple(nodes),
        dev_free=vals["dev_free"],
        host_free=vals["host_free"],
        durable=sum(1 << p for p in range(k) if vals["durable"][p]),
        wq=tuple(tuple(x) for x in vals["wq"]),
        wdone=vals["wdone"],
        lq=tuple(tuple(x) for x in vals["lq"]),
        ldone=vals["ldone"],
        sq=tuple(tuple(x) for x in vals["sq"]),
        sdone=tuple(StorageAck(*x) for x in vals["sdone"]),
        pq=tuple((req_of_end(x[0]), x[1], x[2], x[3]) for x in vals["pq"]),
        pdone=tuple(x[4] for x in vals["pq"]),
        pflags=tuple(x[5] for x in vals["pq"]) if flags else (),
        relq=relq,
        running=tuple(sorted((req_of_end(q), e) for q, e in enumerate(vals["run"]) if e >= 0)),
        plan=tuple(x[0] for x in vals["plan"]),
        mismatch=vals["mismatch"],
        closed=vals["closed"],
        dups=tuple(x[0] for x in vals["dups"]),
        digest=tuple(x[0] for x in vals["digest"]),
    )


def values_to_state(rank_vals: List[Dict], hung: int, halted: int, req_of_end, flags: bool = False) -> State:
    ranks = tuple(values_to_rank(v, req_of_end, flags) for v in rank_vals)
    store = tuple(sum(1 << p for p, b in enumerate(v["store"]) if b) for v in rank_vals)
    halt_names = {v: k for k, v in HALT_WHERE.items()}
    return State(
        ranks=ranks,
        store=store,
        hung=_HUNG_NAMES.get(hung, f"code {hung}"),
        halted=(f"{halt_names.get(halted, halted)}: duplicate-reclaim victims diverged across ranks" if halted else ""),
    )

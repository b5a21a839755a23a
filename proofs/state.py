"""The spec's state (spec/state.py) as z3 terms.

``RV`` is one rank's ``RankState`` with the same field names: per-page tuples for
``owner`` (here ``own``) and the node fields, which are indexed by the node's end page
exactly as ``RankState.nodes[end]`` is. A dead node (``nodes[end] is None``) is a page
with ``own[end] != end``; its field slots are don't-cares. Queues are ``SymList``s of at
most K entries (the proofs show they never overflow); ``pq`` entries carry the rank's
``pdone`` value as a fifth component and its ``pflags`` as a sixth (0 where the config
tracks none), and name their request by its last page.
``host_mem_release_queue`` is kept as (count, total pages): the drain round frees the
first MIN-over-ranks entries, and every rank appends identical entries in the same sync
round, so the MIN always covers the whole queue (see docs/proofs.md).

``SState`` is a global ``State``: rank views per rank handle (a concrete rank index or a
symbolic ``Rank`` constant, see ranks.py), and ``hung``/``halted`` as small codes.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Tuple

import z3

from .encode.host_slots import off_fields
from .sym import SymList, and_, const, eq, implies, ite

HUNG = {"": 0, "writing_check": 1, "check_prefetch_progress": 2}
HALT_WHERE = {"": 0, "writing_check": 1, "loading_check": 2, "drain_storage_control_queues": 3}
SKIP = -1  # storage_path.SKIP
NOT_DONE = -1  # prefetch.NOT_DONE

NODE_FIELDS = ("start", "dev", "host", "lock", "href", "hits", "lbp", "rel")
BOOL_NODE_FIELDS = ("lbp", "rel")


class RV(NamedTuple):
    own: Tuple
    start: Tuple
    dev: Tuple
    host: Tuple
    lock: Tuple
    href: Tuple
    hits: Tuple
    lbp: Tuple
    rel: Tuple
    dev_free: object
    host_free: object
    durable: Tuple
    store: Tuple  # State.store[r], kept with the rank it belongs to
    run: Tuple  # per page q: the node end the running request ending at q locked, -1: not running
    wq: SymList
    wdone: object
    lq: SymList
    ldone: object
    sq: SymList
    sdone: SymList  # (reported, actual)
    pq: SymList  # (request end page, anchor, k, n, pdone, pflags)
    relq_n: object
    relq_sum: object
    plan: SymList
    mismatch: object
    closed: object
    dups: SymList
    digest: SymList
    # host slot identities (encode/host_slots.py; literals unless ProofConfig.slots)
    hslot: Tuple = ()
    hfree: object = False
    rset: object = False
    hok: object = True

    @property
    def k(self) -> int:
        return len(self.own)

    def live(self, e):
        """nodes[e] is not None (e may be symbolic)."""
        if isinstance(e, int):
            return eq(self.own[e], e)
        from .sym import or_

        return or_(*[and_(eq(e, i), eq(self.own[i], i)) for i in range(self.k)])

    def field(self, name: str, e):
        from .sym import sel

        return sel(getattr(self, name), e)

    def set_fields(self, e, cond=True, **values) -> "RV":
        from .sym import upd

        rv = self
        for name, v in values.items():
            rv = rv._replace(**{name: upd(getattr(rv, name), e, v, cond)})
        return rv


LISTS = {"wq": 2, "lq": 2, "sq": 2, "sdone": 2, "pq": 6, "plan": 1, "dups": 1, "digest": 1}


def rv_same(a: RV, b: RV):
    """Equal as spec RankStates (dead nodes' slots and list slots past the end ignored)."""
    parts = []
    k = a.k
    for p in range(k):
        parts.append(eq(a.own[p], b.own[p]))
    for e in range(k):
        live = eq(a.own[e], e)
        fields = [eq(getattr(a, f)[e], getattr(b, f)[e]) for f in NODE_FIELDS]
        parts.append(implies(live, and_(*fields)))
    for f in ("dev_free", "host_free", "wdone", "ldone", "relq_n", "relq_sum", "mismatch", "closed"):
        parts.append(eq(getattr(a, f), getattr(b, f)))
    for p in range(k):
        parts.append(eq(a.durable[p], b.durable[p]))
        parts.append(eq(a.store[p], b.store[p]))
        parts.append(eq(a.run[p], b.run[p]))
    for name in LISTS:
        parts.append(getattr(a, name).same(getattr(b, name)))
    from .encode.host_slots import same_slots

    parts.append(same_slots(a, b, k))
    return and_(*parts)


def _key(h):
    return h if isinstance(h, int) else ("z3", h.get_id())


class SState:
    """A global state: per-rank views (computed lazily, memoised per rank handle)."""

    def __init__(self, space, rank_fn: Callable, hung, halted):
        self.space = space
        self._fn = rank_fn
        self._memo = {}
        self.hung = hung
        self.halted = halted

    def rank(self, h) -> RV:
        key = _key(h)
        rv = self._memo.get(key)
        if rv is None:
            rv = self._memo[key] = self._fn(h)
        return rv

    def map(self, f: Callable) -> "SState":
        """Every rank runs ``f(h, rank view)`` (a replicated or per-rank step)."""
        return SState(self.space, lambda h: f(h, self.rank(h)), self.hung, self.halted)

    def replace(self, **kw) -> "SState":
        s = SState(self.space, self._fn, kw.get("hung", self.hung), kw.get("halted", self.halted))
        s._memo = self._memo
        return s

    def named(self, tag: str) -> "SState":
        """The same state with every per-rank field given a name (a fresh function of
        the rank defined equal to the term). Solvers reason far better about a chain of
        named intermediate states than about one deeply nested term; with concrete
        ranks this is the identity."""
        space = self.space
        if not space.symbolic:
            return self
        generic = self.rank(space.x)
        names = {}
        defs = []
        R = space_sort(space)
        uid = f"{tag}!{space.tag}.{len(space.facts)}"

        def fresh(path, term, sort):
            if isinstance(term, (bool, int)) or z3.is_const(term) and term.decl().kind() != z3.Z3_OP_UNINTERPRETED:
                return None  # a literal: the same at every rank
            if (z3.is_app(term) and term.num_args() == 1 and term.arg(0).eq(space.x)
                    and term.decl().kind() == z3.Z3_OP_UNINTERPRETED):
                return term.decl()  # already a function of the rank
            fn = z3.Function(f"{uid}.{path}", R, sort)
            defs.append(fn(space.x) == term)
            return fn

        for name in RV._fields:
            v = getattr(generic, name)
            if isinstance(v, SymList):
                n_fn = fresh(f"{name}.len", v.n, z3.IntSort())
                item_fns = [[fresh(f"{name}[{i}].{j}", x, _sort(x)) for j, x in enumerate(it)]
                            for i, it in enumerate(v.items)]
                ov_fn = fresh(f"{name}.overflow", v.overflow, z3.BoolSort())
                names[name] = (n_fn, item_fns, ov_fn)
            elif isinstance(v, tuple):
                names[name] = [fresh(f"{name}[{i}]", x, _sort(x)) for i, x in enumerate(v)]
            else:
                names[name] = fresh(name, v, _sort(v))
        if defs:
            from .ranks import Template
            from .sym import and_

            space.facts.append(Template(and_(*defs)))

        def rank_fn(h):
            base = generic  # only read for fields left unnamed (literals)
            vals = {}
            for name in RV._fields:
                v, nm = getattr(base, name), names[name]
                if isinstance(v, SymList):
                    n_fn, item_fns, ov_fn = nm
                    vals[name] = SymList(
                        v.cap,
                        n_fn(h) if n_fn is not None else v.n,
                        [tuple(f(h) if f is not None else x for f, x in zip(fs, it)) for fs, it in zip(item_fns, v.items)],
                        ov_fn(h) if ov_fn is not None else v.overflow,
                    )
                elif isinstance(v, tuple):
                    vals[name] = tuple(f(h) if f is not None else x for f, x in zip(nm, v))
                else:
                    vals[name] = nm(h) if nm is not None else v
            return RV(**vals)

        return SState(space, rank_fn, self.hung, self.halted)

    def only(self, rank_handle, f: Callable) -> "SState":
        """Only rank ``rank_handle`` runs ``f`` (a local step)."""
        space = self.space

        def fn(h):
            rv = self.rank(h)
            return rv_ite(space.same(h, rank_handle), f(h, rv), rv)

        return SState(space, fn, self.hung, self.halted)


class PerRank:
    """A per-rank value (e.g. pages freed so far on that rank), memoised per handle."""

    def __init__(self, space, fn: Callable):
        self.space = space
        self._fn = fn
        self._memo = {}

    def __call__(self, h):
        key = _key(h)
        if key not in self._memo:
            self._memo[key] = self._fn(h)
        return self._memo[key]

    def named(self, tag: str) -> "PerRank":
        space = self.space
        if not space.symbolic:
            return self
        t = self(space.x)
        if isinstance(t, (bool, int)):
            return self
        from .ranks import Template

        fn = z3.Function(f"{tag}!{space.tag}.{len(space.facts)}", space_sort(space), _sort(t))
        space.facts.append(Template(fn(space.x) == t))
        return PerRank(space, lambda h: fn(h))


def map_pair(state: "SState", f: Callable):
    """Every rank runs ``f(h, rv) -> (rv', value)``: (new state, per-rank values)."""
    memo = {}

    def both(h):
        key = _key(h)
        if key not in memo:
            memo[key] = f(h, state.rank(h))
        return memo[key]

    return SState(state.space, lambda h: both(h)[0], state.hung, state.halted), PerRank(state.space, lambda h: both(h)[1])


def _sort(x):
    if isinstance(x, bool):
        return z3.BoolSort()
    if isinstance(x, int):
        return z3.IntSort()
    return x.sort()


def rv_ite(c, a: RV, b: RV) -> RV:
    from .sym import py

    k = py(c)
    if k is True:
        return a
    if k is False:
        return b
    vals = {}
    for name in RV._fields:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, SymList):
            vals[name] = SymList(
                x.cap, ite(c, x.n, y.n), [ite(c, i, j) for i, j in zip(x.items, y.items)],
                ite(c, x.overflow, y.overflow),
            )
        else:
            vals[name] = ite(c, x, y)
    return RV(**vals)


def state_ite(c, a: SState, b: SState) -> SState:
    s = SState(a.space, lambda h: rv_ite(c, a.rank(h), b.rank(h)), ite(c, a.hung, b.hung), ite(c, a.halted, b.halted))
    return s


# --- symbolic states --------------------------------------------------------------------


REPLICA_SCALARS = ("dev_free", "host_free", "relq_n", "relq_sum", "mismatch", "closed")
REPLICA_LISTS = ("wq", "lq", "sq")


def symbolic_state(space, k: int, name: str, shared: bool = False, slots: bool = False) -> SState:
    """A state whose every field is an uninterpreted function of the rank.

    ``shared``: the replicated fields (the tree, its tier states, pools, replicated
    queues: spec/properties.py ``replica``, plus the mismatch count) are rank 0's on
    every rank, i.e. exactly the states in which the replicas agree. Obligations are
    split into that case and the one where replicas differ (only allowed while a digest
    check is bound to fire): proofs.obligations."""
    R = space_sort(space)
    I, B = z3.IntSort(), z3.BoolSort()
    fns = {}

    def f(field, sort):
        fn = fns[field] = z3.Function(f"{name}.{field}", R, sort)
        return fn

    per_page = {}
    for fld in ("own",) + NODE_FIELDS + ("durable", "store", "run"):
        sort = B if fld in BOOL_NODE_FIELDS + ("durable", "store") else I
        per_page[fld] = [f(f"{fld}[{p}]", sort) for p in range(k)]
    scalars = {}
    for fld in ("dev_free", "host_free", "wdone", "ldone", "relq_n", "relq_sum", "mismatch"):
        scalars[fld] = f(fld, I)
    scalars["closed"] = f("closed", B)
    lists = {}
    for fld, arity in LISTS.items():
        arity += k if slots and fld == "pq" else 0
        n = f(f"{fld}.len", I)
        items = [[f(f"{fld}[{i}].{j}", I) for j in range(arity)] for i in range(k)]
        lists[fld] = (n, items)

    def rank_fn(h):
        r0 = space.r0 if shared else h
        at = lambda fld: r0 if fld in ("own", "run") + NODE_FIELDS else h  # running: replicated
        vals = {fld: tuple(fn(at(fld)) for fn in fs) for fld, fs in per_page.items()}
        vals.update({fld: fn(r0 if fld in REPLICA_SCALARS else h) for fld, fn in scalars.items()})
        for fld, (n, items) in lists.items():
            if fld in REPLICA_LISTS:
                vals[fld] = SymList(k, n(r0), [tuple(c(r0) for c in it) for it in items])
            elif fld == "pq":  # request, anchor, k, n replicated; pdone, pflags per rank
                vals[fld] = SymList(k, n(r0), [tuple(c(r0) if j < 4 else c(h) for j, c in enumerate(it)) for it in items])
            else:
                vals[fld] = SymList(k, n(h), [tuple(c(h) for c in it) for it in items])
        vals.update(slot_fns(h) if slots else off_fields(k))
        return RV(**vals)

    if slots:
        from .encode.host_slots import SET

        hslot_fns = [f(f"hslot[{p}]", I) for p in range(k)]
        hfree_fn, rset_fn = f("hfree", SET), f("rset", SET)
        slot_fns = lambda h: {"hslot": tuple(fn(h) for fn in hslot_fns), "hfree": hfree_fn(h), "rset": rset_fn(h),
                              "hok": True}
    hung = z3.Int(f"{name}.hung")
    halted = z3.Int(f"{name}.halted")
    s = SState(space, rank_fn, hung, halted)
    s.functions = fns
    return s


def space_sort(space):
    from .ranks import RankSort

    return RankSort


def free_concrete_state(space, k: int, name: str) -> SState:
    """Fresh unknowns for a state over concrete ranks (agreement tests)."""
    rvs = {}

    def rank_fn(h):
        if h not in rvs:
            tmp = symbolic_state_rank(k, f"{name}.r{h}")
            rvs[h] = tmp
        return rvs[h]

    return SState(space, rank_fn, z3.Int(f"{name}.hung"), z3.Int(f"{name}.halted"))


def symbolic_state_rank(k: int, name: str) -> RV:
    vals = {}
    for fld in ("own",) + NODE_FIELDS + ("durable", "store", "run"):
        if fld in BOOL_NODE_FIELDS + ("durable", "store"):
            vals[fld] = tuple(z3.Bool(f"{name}.{fld}[{p}]") for p in range(k))
        else:
            vals[fld] = tuple(z3.Int(f"{name}.{fld}[{p}]") for p in range(k))
    for fld in ("dev_free", "host_free", "wdone", "ldone", "relq_n", "relq_sum", "mismatch"):
        vals[fld] = z3.Int(f"{name}.{fld}")
    vals["closed"] = z3.Bool(f"{name}.closed")
    for fld, arity in LISTS.items():
        vals[fld] = SymList(
            k, z3.Int(f"{name}.{fld}.len"),
            [tuple(z3.Int(f"{name}.{fld}[{i}].{j}") for j in range(arity)) for i in range(k)],
        )
    vals.update(off_fields(k))
    return RV(**vals)


def same_state(a: SState, b: SState, handles):
    parts = [eq(a.hung, b.hung), eq(a.halted, b.halted)]
    for h in handles:
        parts.append(rv_same(a.rank(h), b.rank(h)))
    return and_(*parts)

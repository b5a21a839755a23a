"""Page forests of any size: the ancestor relation as an axiomatised partial order.

Reachability in a forest is not first-order, but its reflexive-transitive closure can be
*axiomatised* (Itzhaky et al., "Effectively-Propositional Reasoning about Reachability
in Linked Data Structures", CAV 2013; the encoding Ivy uses): pages are an uninterpreted
sort and ``le(a, b)`` ("a is an ancestor-or-self of b") is a relation with

    reflexive, transitive, antisymmetric, and the ancestors of a page totally ordered.

Every finite forest's ancestor relation satisfies these, and every finite model of them
is a forest (the parent of b is its greatest strict ancestor), so a formula proved under
the axioms holds for forests of every size, and a finite counterexample is a forest
(``parent_array`` reads it back). Page-valued state is functions and relations over the
sort; statements stay universal (effectively propositional) apart from named witnesses.

Facts true of every *finite* forest that the order axioms do not give (a nonempty set
of pages on a path has a top-most member) are added per use as instances
(``least_on_path``), never as a general axiom, so the proof stays sound for every
finite forest.
"""

from __future__ import annotations

import itertools
from typing import Callable, List, Sequence

import z3

PageSort = z3.DeclareSort("Page")
_ids = itertools.count()


def fresh_page(name: str):
    return z3.Const(f"{name}!{next(_ids)}", PageSort)


def forall(fn: Callable, n: int = 1):
    """For every page (tuple) x: fn(*x)."""
    xs = [z3.Const(f"p{next(_ids)}", PageSort) for _ in range(n)]
    return z3.ForAll(xs, fn(*xs))


def exists(fn: Callable, n: int = 1):
    xs = [z3.Const(f"p{next(_ids)}", PageSort) for _ in range(n)]
    return z3.Exists(xs, fn(*xs))


class Forest:
    """The ancestor relation ``le`` of one page forest (static: requests fix the pages)."""

    def __init__(self, name: str = "le"):
        self.le_fn = z3.Function(name, PageSort, PageSort, z3.BoolSort())

    def le(self, a, b):
        return self.le_fn(a, b)

    def lt(self, a, b):
        return z3.And(self.le_fn(a, b), a != b)

    def in_chain(self, start, end, p):
        """p lies on the chain start..end (start an ancestor-or-self of end)."""
        return z3.And(self.le_fn(start, p), self.le_fn(p, end))

    def comparable(self, a, b):
        return z3.Or(self.le_fn(a, b), self.le_fn(b, a))

    def axioms(self) -> List:
        le = self.le_fn
        return [
            forall(lambda x: le(x, x)),
            forall(lambda x, y, z: z3.Implies(z3.And(le(x, y), le(y, z)), le(x, z)), 3),
            forall(lambda x, y: z3.Implies(z3.And(le(x, y), le(y, x)), x == y), 2),
            forall(lambda x, y, z: z3.Implies(z3.And(le(x, z), le(y, z)), z3.Or(le(x, y), le(y, x))), 3),
        ]

    def least_on_path(self, q, pred: Callable, name: str):
        """A witness t: the top-most page on the path to q satisfying pred, if any does.

        Returns (t, fact). The fact -- "if some ancestor-or-self w of q satisfies pred,
        then t does and t is above every such page" -- holds in every finite forest
        (the pages on a path form a finite chain), so assuming it is sound."""
        return self._extreme_on_path(q, pred, name, lambda t, z: self.le(t, z))

    def greatest_on_path(self, q, pred: Callable, name: str):
        """A witness t: the deepest page on the path to q satisfying pred, if any does
        (the same finite-forest fact as ``least_on_path``, from below)."""
        return self._extreme_on_path(q, pred, name, lambda t, z: self.le(z, t))

    def _extreme_on_path(self, q, pred: Callable, name: str, beats: Callable):
        t = fresh_page(name)
        on = lambda x: z3.And(self.le(x, q), pred(x))
        fact = forall(lambda w: z3.Implies(
            on(w), z3.And(on(t), forall(lambda z: z3.Implies(on(z), beats(t, z))))))
        return t, fact

    # -- finite interpretations --------------------------------------------------------

    def closed(self, parent: Sequence[int], name: str = "pg"):
        """The forest with these parent pointers as a closed interpretation: page
        constants (distinct, the whole sort) and ``le`` fixed on them. For evaluating
        the encoding on concrete states (agreement tests)."""
        k = len(parent)
        pages = [z3.Const(f"{name}{i}!{next(_ids)}", PageSort) for i in range(k)]
        anc = [[False] * k for _ in range(k)]
        for b in range(k):
            a = b
            while a >= 0:
                anc[a][b] = True
                a = parent[a]
        facts = [z3.Distinct(*pages)] if k > 1 else []
        facts.append(forall(lambda x: z3.Or(*[x == c for c in pages])) if pages else z3.BoolVal(True))
        for a in range(k):
            for b in range(k):
                facts.append(self.le(pages[a], pages[b]) if anc[a][b] else z3.Not(self.le(pages[a], pages[b])))
        return pages, facts

    def parent_array(self, model) -> tuple:
        """A finite model's pages, numbered in depth-first preorder, and their parents
        (-1 at a root): the forest as spec/config.py ``build_pages`` numbers it."""
        elems = list(model.get_universe(PageSort) or [])
        le = lambda a, b: z3.is_true(model.eval(self.le(a, b), model_completion=True))
        par = {}
        for b in elems:
            above = [a for a in elems if not a.eq(b) and le(a, b)]
            best = None
            for a in above:
                if all(le(x, a) for x in above):
                    best = a
            par[b] = best
        order = []

        def visit(x):
            order.append(x)
            for c in [c for c in elems if par[c] is not None and par[c].eq(x)]:
                visit(c)

        for r in [e for e in elems if par[e] is None]:
            visit(r)
        index = {str(x): i for i, x in enumerate(order)}
        parents = tuple(-1 if par[x] is None else index[str(par[x])] for x in order)
        return order, parents


SlotSort = z3.DeclareSort("Slot")  # the slots of a device pool (proofs.paged)


def ground(formulas, pages, slots=(), extra=None) -> list:
    """The formulas over a closed page sort (and slot sort, and the sorts in ``extra``,
    sort -> constants), quantifier-free: every quantifier expanded over the constants of
    its sort (exact, as the constants are the whole sort), and every term of those sorts
    pinned to one of them. z3 decides the result far faster than the quantified form."""
    memo = {}
    universe = {PageSort: list(pages), SlotSort: list(slots), **{k: list(v) for k, v in (extra or {}).items()}}

    def walk(e):
        key = e.get_id()
        hit = memo.get(key)
        if hit is not None:
            return hit[1]
        if z3.is_quantifier(e):
            body = e.body()
            domains = [universe[e.var_sort(i)] for i in range(e.num_vars())]
            insts = [walk(z3.substitute_vars(body, *reversed(combo)))
                     for combo in itertools.product(*domains)]
            out = z3.And(insts) if e.is_forall() else z3.Or(insts)
        elif z3.is_app(e) and e.num_args() > 0:
            kids = [walk(c) for c in e.children()]
            arr = (z3.Ast * len(kids))(*[k.as_ast() for k in kids])
            out = z3.z3._to_expr_ref(z3.Z3_update_term(e.ctx_ref(), e.as_ast(), len(kids), arr), e.ctx)
        else:
            out = e
        memo[key] = (e, out)  # e kept alive: z3 reuses the ids of freed terms
        return out

    out = [walk(f) for f in formulas]
    ids = {c.get_id() for dom in universe.values() for c in dom}
    seen, pins = {}, []

    def pin(e):
        if e.get_id() in seen:
            return
        seen[e.get_id()] = e
        dom = universe.get(e.sort())
        if dom is not None and e.get_id() not in ids:
            pins.append(z3.Or([e == c for c in dom]) if dom else z3.BoolVal(False))
        for c in e.children():
            pin(c)

    for f in out:
        pin(f)
    return out + pins


def finite_model(formulas, sizes=range(1, 9), rlimit: int = 0, extra_sorts=(), extra=None):
    """A model of the formulas whose page sort has exactly n elements, for the first n
    in ``sizes`` that has one (quantifiers expanded, ``ground``), else None. Where
    model-based instantiation gives up on a satisfiable obligation, this finds its
    finite counterexample; a model of any size is a real one. ``extra_sorts`` (queue
    entries, proofs.epr_queues) get n elements too; ``extra(pages)``: more facts over the
    page constants (proofs.epr_counting.exact: set sizes). ``rlimit``: z3's resource limit
    per size (0: limits.FINITE_MODEL_RLIMIT); a size out of it has no model found."""
    from . import limits

    for n in sizes:
        pages = [z3.Const(f"u{i}!{next(_ids)}", PageSort) for i in range(n)]
        slots = [z3.Const(f"v{i}!{next(_ids)}", SlotSort) for i in range(n)]  # a pool as large as the forest
        others = {srt: [z3.Const(f"w{i}!{next(_ids)}", srt) for i in range(n)] for srt in extra_sorts}
        sol = z3.Solver()
        sol.set("rlimit", rlimit or limits.FINITE_MODEL_RLIMIT)
        more = list(extra(pages)) if extra else []
        distinct = [z3.Distinct(*xs) for xs in (pages, slots, *others.values())] if n > 1 else []
        sol.add(*distinct, *ground(list(formulas) + more, pages, slots, others))
        if sol.check() == z3.sat:
            return sol.model()
    return None

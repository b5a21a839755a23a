"""Quantifying over TP ranks: parametric (any number of ranks) or a concrete list.

The spec's per-rank state is, in the parametric encoding, a family of functions over an
uninterpreted sort ``Rank``. Every statement about ranks is in the effectively
propositional shape: universal facts ("every rank ...") and skolem witnesses ("the rank
that attains the MIN", "a rank where the invariant fails"), with no function producing a
rank. For that fragment instantiating every universal fact at every rank constant is a
decision procedure (Herbrand): an unsatisfiable instantiation proves the quantified
claim, a satisfiable one is a real counterexample whose ranks are the constants' values.
This module does that instantiation, so the solver only sees ground formulas.

Global quantities over ranks are *defined* (each is exact in any polarity):
  all(fn)   a Bool b with b -> fn(r) for every r, and not b -> not fn(w) for a witness w
  min(fn)   an Int m with m <= fn(r) for every r, and m == fn(w) for a witness w
  first(pred, val)   val at the lowest-numbered rank satisfying pred (rank ids by ``rid``)
"""

from __future__ import annotations

import itertools
from typing import Callable, List

import z3

from .sym import and_, const, implies, ite, not_, or_

RankSort = z3.DeclareSort("Rank")


class Template:
    """A fact already built over the generic rank(s)."""

    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr
_counter = itertools.count()


class ConcreteRanks:
    """R known ranks (0..R-1); quantities are plain formulas over them."""

    symbolic = False

    def __init__(self, n: int):
        self.n = n
        self.r0 = 0
        self.multi = n > 1

    def handles(self):
        return list(range(self.n))

    def all(self, fn: Callable):
        return and_(*(fn(h) for h in range(self.n)))

    def any(self, fn: Callable):
        return or_(*(fn(h) for h in range(self.n)))

    def min(self, fn: Callable):
        vals = [fn(h) for h in range(self.n)]
        out = vals[0]
        for v in vals[1:]:
            out = ite(v < out, v, out)
        return out

    def min_where(self, pred: Callable, fn: Callable, default=0):
        """MIN of fn over the ranks satisfying pred (``default`` when there are none)."""
        out = default
        have = False
        for h in range(self.n):
            v = fn(h)
            take = and_(pred(h), or_(not_(have), v < out))
            out = ite(take, v, out)
            have = or_(have, pred(h))
        return out

    def some(self, pred: Callable, val: Callable, default=0):
        return self.first(pred, val, default)

    def first(self, pred: Callable, val: Callable, default=0):
        out = default
        for h in range(self.n - 1, -1, -1):
            out = ite(pred(h), val(h), out)
        return out

    def same(self, a, b):
        return a == b

    def is_r0(self, h):
        return h == 0

    def forall(self, fn: Callable):
        """Assert ``fn(r)`` for every rank (returns the conjunction)."""
        return self.all(fn)

    def forall_pairs(self, fn: Callable):
        return and_(*(fn(a, b) for a in range(self.n) for b in range(self.n)))

    def fresh(self, name: str):
        raise TypeError("concrete ranks have no fresh rank constants")


class SymbolicRanks:
    """Any number of ranks, by ground instantiation over the rank constants in play.

    ``closed``: when given, the Rank sort is exactly these constants (a concrete
    instance: agreement tests run the proof encoding on explicit states this way).
    """

    symbolic = True

    def __init__(self, closed: int = 0):
        tag = next(_counter)
        self.tag = tag
        # Facts are built once over generic ranks x, y and instantiated by substitution
        # (C-level), not rebuilt in Python for every rank constant.
        self.x = z3.Const(f"x!{tag}", RankSort)
        self.y = z3.Const(f"y!{tag}", RankSort)
        self._templates = {}
        self.r0 = z3.Const(f"r0!{tag}", RankSort)
        self.consts: List = [self.r0]
        self.facts: List[Callable] = []  # fn(h) asserted for every rank constant h
        self.pair_facts: List[Callable] = []  # fn(h1, h2) for every pair
        self.side: List = []  # ground constraints
        self._rid = None
        self._done = set()
        self._done_pairs = set()
        self.lazy = set()  # indices of facts instantiated last
        self._side_seen = 0
        self.closed = []
        if closed:
            self.closed = [self.r0] + [self._new(f"k{i}") for i in range(1, closed)]
            self.side.append(z3.Distinct(*self.closed) if closed > 1 else True)
        self.multi = z3.Bool(f"multi!{tag}")
        if closed:
            self.side.append(self.multi == const(closed > 1))
        else:
            a, b = self._new("ma"), self._new("mb")
            self.side.append(implies(self.multi, a != b))
            self.facts.append(lambda h: implies(not_(self.multi), h == self.r0))

    # -- constants ---------------------------------------------------------------------

    def _new(self, name: str):
        c = z3.Const(f"{name}!{self.tag}.{len(self.consts)}", RankSort)
        self.consts.append(c)
        if self.closed:
            self.side.append(or_(*(c == k for k in self.closed)))
        return c

    def fresh(self, name: str):
        """A new rank constant (an action's rank parameter, a skolem witness)."""
        return self._new(name)

    def handles(self):
        return list(self.consts)

    # -- defined global quantities ----------------------------------------------------

    def all(self, fn: Callable):
        b = z3.Bool(f"all!{self.tag}.{len(self.consts)}")
        w = self._new("wall")
        self.facts.append(Template(implies(b, self._template(fn))))
        self.side.append(implies(not_(b), not_(self.at(fn, w))))
        return b

    def any(self, fn: Callable):
        return not_(self.all(lambda h: not_(fn(h))))

    def min(self, fn: Callable, signed_bv=False):
        """MIN over ranks (z3's <= : integers, or signed bit-vectors)."""
        w = self._new("wmin")
        at_w = self.at(fn, w)
        sort = at_w.sort() if isinstance(at_w, z3.ExprRef) else z3.IntSort()
        m = z3.Const(f"min!{self.tag}.{len(self.consts)}", sort)
        self.side.append(m == at_w)
        self.facts.append(Template(m <= self._template(fn)))
        return m

    def min_where(self, pred: Callable, fn: Callable, default=0):
        """MIN of fn over the ranks satisfying pred (``default`` when there are none)."""
        w = self._new("wminw")
        pw, fw = self.at(pred, w), self.at(fn, w)
        self.facts.append(lambda h: implies(pred(h), and_(pw, fw <= fn(h))))
        return ite(pw, fw, const(default))

    def rid(self, h):
        """Rank ids (only needed where the spec takes 'the first rank that ...')."""
        if self._rid is None:
            self._rid = z3.Function(f"rid!{self.tag}", RankSort, z3.IntSort())
            self.side.append(self._rid(self.r0) == 0)
            self.facts.append(lambda x: self._rid(x) >= 0)
            self.pair_facts.append(lambda x, y: implies(self._rid(x) == self._rid(y), x == y))
        return self._rid(h)

    def some(self, pred: Callable, val: Callable, default=0):
        """val at some rank satisfying pred (``default`` if none): the same value as
        ``first`` whenever all ranks satisfying pred agree on val."""
        w = self._new("wsome")
        pw = self.at(pred, w)
        self.facts.append(Template(implies(self._template(pred), pw)))
        return ite(pw, self.at(val, w), const(default))

    def first(self, pred: Callable, val: Callable, default=0):
        w = self._new("wfirst")
        self.rid(w)
        pw = self.at(pred, w)
        self.facts.append(lambda h: implies(pred(h), and_(pw, self.rid(w) <= self.rid(h))))
        return ite(pw, self.at(val, w), const(default))

    def same(self, a, b):
        return a == b

    def is_r0(self, h):
        return h == self.r0

    def forall(self, fn: Callable, lazy: bool = False):
        """Assert ``fn(r)`` for every rank. ``lazy`` facts (hypotheses such as the
        invariants) are instantiated at a rank only once no other fact is violated
        there (see ``missing``)."""
        self.facts.append(fn)
        if lazy:
            self.lazy.add(len(self.facts) - 1)
        return True

    def forall_pairs(self, fn: Callable):
        self.pair_facts.append(fn)
        return True

    # -- instantiation -------------------------------------------------------------------

    def checkpoint(self):  # (lazy marks of facts dropped by restore are dropped too)
        return (len(self.consts), len(self.facts), len(self.pair_facts), len(self.side),
                set(self._done), set(self._done_pairs), self._side_seen)

    def restore(self, cp):
        n_c, n_f, n_p, n_s, done, done_pairs, side_seen = cp
        del self.consts[n_c:]
        del self.facts[n_f:]
        del self.pair_facts[n_p:]
        del self.side[n_s:]
        self._done, self._done_pairs, self._side_seen = done, done_pairs, side_seen

    def _template(self, fn, pair=False):
        if isinstance(fn, Template):
            return fn.expr
        key = id(fn)
        hit = self._templates.get(key)
        if hit is None:
            t = fn(self.x, self.y) if pair else fn(self.x)
            hit = self._templates[key] = (fn, t)  # keep fn alive: ids stay unique
        return hit[1]

    def at2(self, fn, a, b):
        t = self._template(fn, pair=True)
        if isinstance(t, (bool, int)):
            return t
        return z3.substitute(t, (self.x, a), (self.y, b))

    def at(self, fn, h):
        """fn(h), built once over the generic rank and instantiated by substitution."""
        t = self._template(fn)
        if isinstance(t, (bool, int)):
            return t
        return z3.substitute(t, (self.x, h))

    def instances(self, wanted):
        """Instances not yet returned, for the (fact, handle) pairs ``wanted(i, j)`` accepts
        (lazy instantiation: the rest are checked against a model first, see
        proofs.obligations.Lazy). Side constraints are always returned."""
        out = []
        for i, fn in enumerate(list(self.facts)):
            t = self._template(fn)
            for j, h in enumerate(list(self.consts)):
                if (i, j) not in self._done and wanted(i, j):
                    self._done.add((i, j))
                    if t is not True:
                        out.append(t if t is False else z3.substitute(t, (self.x, h)))
        for i, fn in enumerate(list(self.pair_facts)):
            t = self._template(fn, pair=True)
            cs = list(self.consts)
            for a in range(len(cs)):
                for b in range(len(cs)):
                    if (i, a, b) not in self._done_pairs and wanted(i, (a, b)):
                        self._done_pairs.add((i, a, b))
                        if t is not True:
                            out.append(t if t is False else z3.substitute(t, (self.x, cs[a]), (self.y, cs[b])))
        if len(self.side) > self._side_seen:
            out.extend(self.side[self._side_seen:])
            self._side_seen = len(self.side)
        return out

    def missing(self, model, limit=64, skip=None):
        """Instances not yet asserted that ``model`` violates (at most ``limit``): the
        definitions first, lazy facts only when no definition is violated. ``skip(j)``:
        rank constants whose lazy facts are not considered."""
        out = self._missing(model, limit, lazy=False, skip=None)
        return out or self._missing(model, limit, lazy=True, skip=skip)

    def _missing(self, model, limit, lazy, skip):
        out = []
        for i, fn in enumerate(list(self.facts)):
            if (i in self.lazy) != lazy:
                continue
            t = self._template(fn)
            if t is True:
                continue
            for j, h in enumerate(list(self.consts)):
                if (i, j) in self._done or (skip is not None and skip(j)):
                    continue
                inst = t if t is False else z3.substitute(t, (self.x, h))
                if not z3.is_true(model.eval(inst, model_completion=True)):
                    self._done.add((i, j))
                    out.append(inst)
                    if len(out) >= limit:
                        return out
        for i, fn in enumerate(list(self.pair_facts) if not lazy else []):
            t = self._template(fn, pair=True)
            if t is True:
                continue
            cs = list(self.consts)
            for a in range(len(cs)):
                for b in range(len(cs)):
                    if (i, a, b) in self._done_pairs:
                        continue
                    inst = t if t is False else z3.substitute(t, (self.x, cs[a]), (self.y, cs[b]))
                    if not z3.is_true(model.eval(inst, model_completion=True)):
                        self._done_pairs.add((i, a, b))
                        out.append(inst)
                        if len(out) >= limit:
                            return out
        return out

    def ground(self) -> List:
        """Every fact at every rank constant (new constants made on the way included).
        Incremental: returns only the instances not returned by earlier calls."""
        out = []
        while True:
            progress = False
            for i, fn in enumerate(list(self.facts)):
                t = self._template(fn)
                for j, h in enumerate(list(self.consts)):
                    if (i, j) not in self._done:
                        self._done.add((i, j))
                        if t is not True:
                            out.append(t if t is False else z3.substitute(t, (self.x, h)))
                        progress = True
            for i, fn in enumerate(list(self.pair_facts)):
                t = self._template(fn, pair=True)
                cs = list(self.consts)
                for a in range(len(cs)):
                    for b in range(len(cs)):
                        if (i, a, b) not in self._done_pairs:
                            self._done_pairs.add((i, a, b))
                            if t is not True:
                                out.append(t if t is False else z3.substitute(t, (self.x, cs[a]), (self.y, cs[b])))
                            progress = True
            if len(self.side) > self._side_seen:
                out.extend(self.side[self._side_seen:])
                self._side_seen = len(self.side)
                progress = True
            if not progress:
                return out

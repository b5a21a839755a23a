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
_counter = itertools.count()


class ConcreteRanks:
    """R known ranks (0..R-1); quantities are plain formulas over them."""

    symbolic = False

    def __init__(self, n: int):
        self.n = n
        self.r0 = 0
        self.multi = const(n > 1)

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
        out = const(default)
        have = const(False)
        for h in range(self.n):
            v = fn(h)
            take = and_(pred(h), or_(not_(have), v < out))
            out = ite(take, v, out)
            have = or_(have, pred(h))
        return out

    def first(self, pred: Callable, val: Callable, default=0):
        out = const(default)
        for h in range(self.n - 1, -1, -1):
            out = ite(pred(h), val(h), out)
        return out

    def same(self, a, b):
        return const(a == b)

    def is_r0(self, h):
        return const(h == 0)

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
        self.r0 = z3.Const(f"r0!{tag}", RankSort)
        self.consts: List = [self.r0]
        self.facts: List[Callable] = []  # fn(h) asserted for every rank constant h
        self.pair_facts: List[Callable] = []  # fn(h1, h2) for every pair
        self.side: List = []  # ground constraints
        self._rid = None
        self.closed = []
        if closed:
            self.closed = [self.r0] + [self._new(f"k{i}") for i in range(1, closed)]
            self.side.append(z3.Distinct(*self.closed) if closed > 1 else const(True))
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
        self.side.append(implies(not_(b), not_(fn(w))))
        self.facts.append(lambda h: implies(b, fn(h)))
        return b

    def any(self, fn: Callable):
        return not_(self.all(lambda h: not_(fn(h))))

    def min(self, fn: Callable):
        m = z3.Int(f"min!{self.tag}.{len(self.consts)}")
        w = self._new("wmin")
        self.side.append(m == fn(w))
        self.facts.append(lambda h: m <= fn(h))
        return m

    def min_where(self, pred: Callable, fn: Callable, default=0):
        """MIN of fn over the ranks satisfying pred (``default`` when there are none)."""
        w = self._new("wminw")
        self.facts.append(lambda h: implies(pred(h), and_(pred(w), fn(w) <= fn(h))))
        return ite(pred(w), fn(w), const(default))

    def rid(self, h):
        """Rank ids (only needed where the spec takes 'the first rank that ...')."""
        if self._rid is None:
            self._rid = z3.Function(f"rid!{self.tag}", RankSort, z3.IntSort())
            self.side.append(self._rid(self.r0) == 0)
            self.facts.append(lambda x: self._rid(x) >= 0)
            self.pair_facts.append(lambda x, y: implies(self._rid(x) == self._rid(y), x == y))
        return self._rid(h)

    def first(self, pred: Callable, val: Callable, default=0):
        w = self._new("wfirst")
        self.rid(w)
        self.facts.append(lambda h: implies(pred(h), and_(pred(w), self.rid(w) <= self.rid(h))))
        return ite(pred(w), val(w), const(default))

    def same(self, a, b):
        return a == b

    def is_r0(self, h):
        return h == self.r0

    def forall(self, fn: Callable):
        """Assert ``fn(r)`` for every rank."""
        self.facts.append(fn)
        return const(True)

    def forall_pairs(self, fn: Callable):
        self.pair_facts.append(fn)
        return const(True)

    # -- instantiation -------------------------------------------------------------------

    def ground(self) -> List:
        """Every fact at every rank constant (new constants made on the way included)."""
        out = list()
        done = set()
        done_pairs = set()
        side_seen = 0
        while True:
            progress = False
            for i, fn in enumerate(list(self.facts)):
                for j, h in enumerate(list(self.consts)):
                    if (i, j) not in done:
                        done.add((i, j))
                        out.append(fn(h))
                        progress = True
            for i, fn in enumerate(list(self.pair_facts)):
                cs = list(self.consts)
                for a in range(len(cs)):
                    for b in range(len(cs)):
                        if (i, a, b) not in done_pairs:
                            done_pairs.add((i, a, b))
                            out.append(fn(cs[a], cs[b]))
                            progress = True
            if len(self.side) > side_seen:
                out.extend(self.side[side_seen:])
                side_seen = len(self.side)
                progress = True
            if not progress:
                return out

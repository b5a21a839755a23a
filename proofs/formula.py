"""Rank-quantified formulas: how an invariant is assumed, asserted or evaluated.

An encoded property is a list of parts, each one of
  Every(fn)   fn(h) holds for every rank h
  Pairs(fn)   fn(h1, h2) holds for every pair of ranks
  Fact(b)     a closed formula
``assume`` adds the parts as hypotheses (universal facts, instantiated at every rank
constant), ``holds`` turns them into one Bool (via the rank space's defined ``all``, so
the negated goal introduces its own skolem ranks), and ``value`` evaluates them on a
concrete state.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Union

import z3

from .sym import and_, const, implies, not_, py


class Every(NamedTuple):
    fn: Callable


class Pairs(NamedTuple):
    fn: Callable


class Fact(NamedTuple):
    b: object


Part = Union[Every, Pairs, Fact]


def assume(space, parts: List[Part], lazy: bool = False) -> list:
    """Hypotheses: returns ground facts (closed parts); rank facts go to the space."""
    out = []
    for p in parts:
        if isinstance(p, Every):
            out.append(space.forall(p.fn, lazy) if space.symbolic else space.forall(p.fn))
        elif isinstance(p, Pairs):
            out.append(space.forall_pairs(p.fn))
        else:
            out.append(p.b)
    return out


def holds(space, parts: List[Part]):
    """One Bool that is true iff every part holds."""
    out = []
    for p in parts:
        if isinstance(p, Every):
            out.append(space.all(p.fn))
        elif isinstance(p, Pairs):
            out.append(all_pairs(space, p.fn))
        else:
            out.append(p.b)
    return and_(*out)


def all_pairs(space, fn):
    if not space.symbolic:
        return and_(*(fn(a, b) for a in space.handles() for b in space.handles()))
    b = z3.Bool(f"allpairs!{space.tag}.{len(space.consts)}")
    w1, w2 = space.fresh("wp1"), space.fresh("wp2")
    space.side.append(implies(not_(b), not_(space.at2(fn, w1, w2))))
    from .ranks import Template

    space.pair_facts.append(Template(implies(b, space._template(fn, pair=True))))
    return b


def value(space, parts: List[Part]) -> bool:
    """Evaluate on a concrete state (a ConcreteRanks space): True/False."""
    b = holds(space, parts)
    k = py(b)
    if k is not None:
        return k
    return z3.is_true(z3.simplify(const(b)))

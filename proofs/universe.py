"""The page universe of an encoding: K page slots and their parent pointers.

In the explicit spec the universe is fixed by the model's requests (spec/config.py
``Pages``). Here it is either that concrete universe or a symbolic one: ``parent[p]`` is
a z3 integer constrained to -1 (a root page) or an earlier page that lies on the path of
page p-1. That is exactly the set of forests numbered in depth-first preorder, i.e. every
universe that ``build_pages`` can produce from some request list (token paths sorted
lexicographically), so a proof over the symbolic universe covers every model with at
most K pages, and a counterexample can always be written back as a model.

Ancestry, depth and chain membership are derived as ground formulas (the transitive
closure of parent is not first-order, which is why pages are bounded: see docs/proofs.md).
"""

from __future__ import annotations

from typing import List, Optional

import z3

from .sym import and_, const, eq, ite, or_, sel, sum_


class Universe:
    def __init__(self, k: int, parent: List, symbolic: bool, pages=None):
        self.k = k
        self.parent = list(parent)
        self.symbolic = symbolic
        self.pages = pages  # the spec's Pages when concrete
        # anc[a][b]: page a is an ancestor of page b or b itself.
        self.anc = [[None] * k for _ in range(k)]
        for b in range(k):
            for a in range(k):
                if a == b:
                    self.anc[a][b] = True
                elif a > b:
                    self.anc[a][b] = False  # parents have smaller ids
                else:
                    self.anc[a][b] = or_(
                        *(and_(eq(self.parent[b], c), self.anc[a][c]) for c in range(a, b))
                    )
        self.depth = []
        for p in range(k):
            d = 1
            for c in range(p - 1, -1, -1):
                d = ite(eq(self.parent[p], c), self.depth[c] + 1, d)
            self.depth.append(d)

    # -- construction ------------------------------------------------------------------

    @staticmethod
    def symbolic_universe(k: int, prefix: str = "parent") -> "Universe":
        parent = [-1] + [z3.Int(f"{prefix}_{p}") for p in range(1, k)]
        return Universe(k, parent, symbolic=True)

    @staticmethod
    def from_pages(pages) -> "Universe":
        return Universe(pages.count, list(pages.parent), symbolic=False, pages=pages)

    def constraints(self):
        """Well-formedness of a symbolic universe: a preorder-numbered forest."""
        out = []
        for p in range(1, self.k):
            par = self.parent[p]
            out.append(or_(eq(par, -1), and_(par >= 0, par < p, self.anc_sym(par, p - 1))))
        return out

    # -- queries (indices may be symbolic) ------------------------------------------

    def anc_sym(self, a, b):
        """a is an ancestor-or-self of b, for symbolic a and/or b."""
        if isinstance(a, int) and isinstance(b, int):
            return self.anc[a][b]
        return or_(
            *(
                and_(eq(a, x) if not isinstance(a, int) else a == x,
                     eq(b, y) if not isinstance(b, int) else b == y,
                     self.anc[x][y])
                for x in (range(self.k) if not isinstance(a, int) else [a])
                for y in (range(self.k) if not isinstance(b, int) else [b])
            )
        )

    def in_chain(self, start, end, p: int):
        """Page p lies on the chain start..end (start an ancestor-or-self of end)."""
        return and_(self.anc_sym(start, p), self.anc_sym(p, end))

    def depth_of(self, p):
        return sel(self.depth, p)

    def chain_len(self, start, end):
        return self.depth_of(end) - self.depth_of(start) + 1

    def children_of(self, e: int):
        """(page c, condition that c is a child of page e) for every candidate c."""
        return [(c, eq(self.parent[c], e)) for c in range(e + 1, self.k)]

    def parent_of(self, p):
        return sel(self.parent, p)

    def path_index(self, p: int, q):
        """Position of page p in the request path ending at q (0-based), if on it."""
        return self.depth[p] - 1

    def concrete_parent(self, model) -> List[int]:
        return [model.eval(const(x), model_completion=True).as_long() for x in self.parent]

    def count_on(self, conds) -> "z3.ArithRef":
        return sum_([ite(c, 1, 0) for c in conds])


def token_paths(parent: List[int], page_size: int = 1, lead=None) -> List[tuple]:
    """Token paths for a preorder-numbered forest: page p carries token p + 1, so the
    lexicographic order of the paths is the page order (what build_pages assigns). With
    page_size > 1 a page is its leading token then page_size - 1 copies of p + 1; the
    leading token is p + 1 too, or ``lead[p] + 1`` (lead[p]: the first page of p's group
    of siblings that share their leading token)."""
    paths: List[Optional[tuple]] = []
    for p, q in enumerate(parent):
        first = (lead[p] if lead else p) + 1
        own = (first,) + (p + 1,) * (page_size - 1)
        paths.append(own if q < 0 else paths[q] + own)
    return paths

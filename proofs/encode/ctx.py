"""The encoding context: constants (config), page universe, rank space, fresh names."""

from __future__ import annotations

import itertools

import z3

from ..sym import FALSE, or_

_ids = itertools.count()


class Ctx:
    def __init__(self, cfg, uni, space):
        self.cfg = cfg
        self.uni = uni
        self.space = space
        self.k = uni.k
        self.tag = next(_ids)
        self.side = []  # ground constraints the encoding adds (parameter domains, ...)
        self.overflows = []  # conditions under which some bounded list overflows
        # Pages that end a request (None: every page may, as in the symbolic universe
        # where a model's requests are any set of paths).
        self.request_ends = None
        # victim_order = "lru": whether the pre-state's replicas are identical (the
        # replicated LRU order then is too: one key for every rank), and, on concrete
        # states, each rank's LRU positions (proofs.agreement); see
        # encode.host_eviction.victim_keys.
        self.replicas_agree = False
        self.lru_positions = None
        self.clock_positions = None
        self.planner_order = None  # concrete states: per rank, the CP planner's order keys (encode.cp_planner)
        self.dlru_of = None  # concrete states: per rank, the durable LRU (encode.durable)
        self.held = -1  # the node the step protects only while it runs (encode.actions.step)
        # per rank handle and node: locked by the step's own eviction while it ran
        # (encode.scheduler_evict.held_while_evicting; None: the step evicts nothing)
        self.evict_held = None

    def clock_of(self, h):
        """A rank's wall-clock positions (concrete states only), for a rank handle or an
        integer rank parameter."""
        import z3

        if self.space.symbolic or isinstance(h, int):
            return self.clock_positions(h)
        rows = [self.clock_positions(r) for r in range(self.space.n)]
        out = rows[-1]
        for r in range(len(rows) - 2, -1, -1):
            out = [z3.If(h == r, a, b) for a, b in zip(rows[r], out)]
        return out

    def int(self, name: str):
        return z3.Int(f"{name}!{self.tag}.{next(_ids)}")

    def bool(self, name: str):
        return z3.Bool(f"{name}!{self.tag}.{next(_ids)}")

    def rank_pred(self, name: str):
        """A fresh predicate over ranks (e.g. the ranks whose allocation fails)."""
        if self.space.symbolic:
            from ..ranks import RankSort

            f = z3.Function(f"{name}!{self.tag}.{next(_ids)}", RankSort, z3.BoolSort())
            return lambda h: f(h)
        vals = [self.bool(f"{name}{r}") for r in range(self.space.n)]
        return lambda h: vals[h]

    def request_param(self):
        from ..sym import and_, or_

        q = self.int("req")
        if self.request_ends is None:
            self.side.append(and_(q >= 0, q < self.k))
        else:
            self.side.append(or_(*(q == e for e in self.request_ends)))
        return q

    def rank_int(self, name: str):
        """An unconstrained integer per rank (memoised by name within this encoding)."""
        memo = self.__dict__.setdefault("_rank_ints", {})
        if name not in memo:
            if self.space.symbolic:
                from ..ranks import RankSort

                f = z3.Function(f"{name}!{self.tag}", RankSort, z3.IntSort())
                memo[name] = lambda h: f(h)
            else:
                vals = [self.int(f"{name}{r}") for r in range(self.space.n)]
                memo[name] = lambda h: vals[h]
        return memo[name]

    def multi(self):
        return self.space.multi

    def overflow(self):
        return or_(*self.overflows) if self.overflows else FALSE

"""Exhaustive model checking of a spec Model: the one entry point the commands use.

Breadth-first search over packed states (tiercheck.models.search), optionally in worker
processes (tiercheck.models.parallel) and over orbit representatives
(tiercheck.models.symmetry). Invariants are checked on each distinct state, transition
properties on each step; once the search is complete, progress properties (possibility,
tiercheck.models.progress) and liveness under weak fairness (tiercheck.models.liveness,
lasso counterexamples) on the explored graph. Every counterexample is rebuilt by
re-executing the spec (tiercheck.models.replay), so what is reported is a real run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from tiercheck.errors import UserError
from tiercheck.models import liveness, verdicts
from tiercheck.models.codec import Codec
from tiercheck.models.expand import Expander
from tiercheck.models.element_memo import ElementMemoExpander
from tiercheck.models.footprint import MemoExpander
from tiercheck.models.search import Search
from tiercheck.models.state_graph import SearchGraph
from tiercheck.spec.properties import BY_NAME

from tiercheck.models.verdicts import UNCHECKED_SYMMETRY, UNSOUND_SYMMETRY  # noqa: F401 (re-exported)


# How a state is expanded: "memo" files the spec's work under the ranks and store masks
# it read, guard by guard (tiercheck.models.element_memo); "fields" under the state
# fields it read, entry by entry (tiercheck.models.footprint, the engine before);
# "plain" runs the spec on every state (kept for cross-checks and benchmarks). Same
# records every way.
ENGINES = {"memo": ElementMemoExpander, "fields": MemoExpander, "plain": Expander}


@dataclass
class Violation:
    prop: str
    message: str
    states: list  # concrete states, initial state first
    actions: list  # one fewer than states
    loop_start: Optional[int] = None  # lassos: index into states where the cycle starts
    kind: str = ""


@dataclass
class Result:
    distinct: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    complete: bool = True
    stop_reason: str = ""
    verdicts: Dict[str, str] = field(default_factory=dict)  # holds|violated|unknown|...
    violations: Dict[str, List[Violation]] = field(default_factory=dict)
    coverage: Dict[str, List[int]] = field(default_factory=dict)  # action -> [enabled, taken]
    notes: List[str] = field(default_factory=list)
    symmetry: Optional[dict] = None  # group size, represented states, reduction factor
    workers: int = 1


def make_violation(p, message, states, actions) -> Violation:
    return Violation(p.name, message, states, actions, kind=p.kind)


def make_lasso(p, lasso) -> Violation:
    return Violation(p.name, lasso.message, lasso.states, lasso.actions, lasso.loop_start, kind="liveness")


def resolve_property(name: str):
    """A spec property or a liveness property by name (UserError when unknown)."""
    if name in BY_NAME:
        return BY_NAME[name]
    if name in liveness.BY_NAME:
        return liveness.BY_NAME[name]
    known = list(BY_NAME) + list(liveness.BY_NAME)
    raise UserError(f"unknown property {name!r} (known: {', '.join(known)})")


class Checker:
    def __init__(
        self,
        model,
        properties: List[str],
        max_states: Optional[int] = None,
        time_limit: Optional[float] = None,
        on_progress: Optional[Callable] = None,
        symmetry: bool = False,
        workers: int = 1,
        max_violations: int = 1,
        keep_graph: bool = False,
        progress_every: float = 2.0,
        max_memory: Optional[int] = None,
        engine: str = "memo",
        pause_gc: bool = True,
    ):
        if engine not in ENGINES:
            raise UserError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")
        self.engine = engine
        self.pause_gc = pause_gc
        self.model = model
        self.props = [resolve_property(n) for n in properties]
        self.max_states = max_states
        self.time_limit = time_limit
        self.on_progress = on_progress
        self.want_symmetry = symmetry
        self.workers = max(1, int(workers))
        self.max_violations = max(1, int(max_violations))
        self.keep_graph = keep_graph
        self.progress_every = progress_every
        self.max_memory = max_memory
        self.search: Optional[Search] = None
        self.sym = None

    # ------------------------------------------------------------------------------

    def run(self) -> Result:
        """Search, then verdicts (tiercheck.models.verdicts); printing is the caller's."""
        m = self.model
        res = Result(workers=self.workers)
        safety = [p for p in self.props if p.kind in ("invariant", "transition")]
        graph_props = [p for p in self.props if p.kind in ("progress", "liveness")]
        search, checked_graph, canon = self._explore(res, safety, graph_props)
        codec = self.codec
        if self.sym is not None:
            res.symmetry = self.sym.report(search)
            diverged = self._replicas_diverged() if self.sym.ranks else None
        else:
            diverged = None
        canon_key = (lambda s: codec.encode(canon(s))) if canon is not None else None
        res.violations = verdicts.safety_violations(m, search, safety, canon_key, make_violation)
        if res.complete and checked_graph:
            graph = SearchGraph(m, search)
            for p in checked_graph:
                found = verdicts.graph_violations(m, graph, p, self.max_violations, make_violation, make_lasso)
                if found:
                    res.violations[p.name] = found
        res.verdicts = verdicts.decide(self.props, res.violations, res.complete, self.sym is not None, diverged)
        cut = search.expanded.count(0)
        if cut:
            res.notes.append(verdicts.bounds_note(m, cut))
        if diverged is not None:
            res.notes.append(verdicts.diverged_note(diverged))
        return res

    def _explore(self, res: Result, safety, graph_props):
        """The breadth-first search (serial or in workers, over orbit representatives
        under symmetry); fills ``res``'s exploration figures."""
        m = self.model
        if self.want_symmetry:
            from tiercheck.models import symmetry

            self.sym, why = symmetry.for_model(m)
            if self.sym is None:
                res.notes.append(f"symmetry off: {why}")
            elif graph_props:
                res.notes.append(verdicts.SYMMETRY_GRAPH_NOTE)
        codec = Codec(m)
        self.codec = codec
        canon = self.sym.canonical if self.sym is not None else None
        checked_graph = graph_props if self.sym is None else []
        need_graph = bool(checked_graph) or self.keep_graph
        expander_cls = ENGINES[self.engine]
        expander = expander_cls(m, safety, codec, canon)
        pool = None
        if self.workers > 1:
            from tiercheck.models.parallel import Pool

            pool = Pool(m, safety, self.workers, codec, expander, canon, expander_cls)
        # Graph properties stay open during the search, so it never stops early for them.
        open_names = [p.name for p in safety + checked_graph] or ["(no property)"]
        search = Search(
            m,
            open_names,
            codec,
            expander,
            need_graph=need_graph,
            max_states=self.max_states,
            time_limit=self.time_limit,
            on_progress=self.on_progress,
            max_hits=self.max_violations,
            pool=pool,
            progress_every=self.progress_every,
            max_memory=self.max_memory,
            pause_gc=self.pause_gc,
        )
        self.search = search
        if canon is not None:
            search.init_keys = [codec.encode(canon(s)) for s in m.init_states()]
        try:
            stats = search.run()
        finally:
            if pool is not None:
                # Report the processes that really expanded states (small models never
                # leave the owner).
                res.workers = pool.n if pool.started else 1
                pool.close()
        res.distinct, res.transitions, res.depth = stats.distinct, stats.transitions, stats.depth
        res.complete, res.stop_reason, res.coverage = stats.complete, stats.stop_reason, stats.coverage
        res.seconds = stats.seconds
        return search, checked_graph, canon


    def _replicas_diverged(self) -> Optional[int]:
        """The first explored state whose replicas disagree (rank_agreement), or None."""
        decode = self.codec.decode
        return verdicts.first_diverged(self.model, ((i, decode(k)) for i, k in enumerate(self.search.keys)))

"""From a finished search to what the checker reports: the counterexamples of safety
properties (rebuilt by re-executing the spec), those of progress and liveness properties
(on the explored graph), and one verdict per property. No search and no printing here:
the search is tiercheck.models.search, the printing tiercheck.models.check_report."""

from __future__ import annotations

from typing import Dict, List, Optional

from tiercheck.models import liveness, progress, replay
from tiercheck.spec.properties import BY_NAME

UNCHECKED_SYMMETRY = "not checked (symmetry)"
UNSOUND_SYMMETRY = "unknown (symmetry unsound: replicas diverged)"
SYMMETRY_GRAPH_NOTE = (
    "symmetry on: progress and liveness properties are not checked on the "
    "reduced graph (their obligations name nodes and rank 0, which the "
    "reduction permutes); rerun without --symmetry to check them"
)


def safety_violations(m, search, safety, canon_key, make) -> Dict[str, list]:
    """Per safety property, its counterexamples: ``make(prop, message, states, actions)``."""
    out: Dict[str, list] = {}
    for p in safety:
        for hit in search.hits.get(p.name, []):
            states, actions = replay.rebuild(m, search, hit.index, canon_key)
            message = hit.message
            if hit.pos is not None:
                a, t = replay.final_step(m, states[-1], hit.pos, hit.succ_key, p, canon_key)
                message = p.fn(m, states[-1], a, t) or message
                states, actions = states + [t], actions + [a]
            elif canon_key is not None:
                message = p.fn(m, states[-1]) or message
            out.setdefault(p.name, []).append(make(p, message, states, actions))
    return out


def graph_violations(m, graph, p, limit: int, make, make_lasso) -> list:
    """Counterexamples of one progress or liveness property on the explored graph
    (tiercheck.models.state_graph)."""
    if p.kind == "progress":
        out = []
        for i, key in progress.check(m, graph, p, limit):
            states, actions = graph.rebuild(i)
            name = m.name(key) if isinstance(key, int) else key
            out.append(make(p, p.fn.describe.format(key=name), states, actions))
        return out
    return [make_lasso(p, lasso) for lasso in liveness.check(m, graph, p, limit)]


def decide(props, violations, complete: bool, symmetry: bool, diverged: Optional[int]) -> Dict[str, str]:
    """One verdict per property (holds | holds so far | violated | unknown | ...)."""
    verdicts: Dict[str, str] = {}
    for p in props:
        if p.name in violations:
            verdicts[p.name] = "violated"
        elif p.kind in ("progress", "liveness"):
            if symmetry:
                verdicts[p.name] = UNCHECKED_SYMMETRY
            else:
                verdicts[p.name] = "holds" if complete else "unknown"
        else:
            verdicts[p.name] = "holds" if complete else "holds so far"
    if diverged is not None:
        # Counterexamples stay (each is a re-executed concrete run); a 'holds' does not.
        for name, v in verdicts.items():
            if v in ("holds", "holds so far"):
                verdicts[name] = UNSOUND_SYMMETRY
    return verdicts


def first_diverged(m, states) -> Optional[int]:
    """The index of the first of ``states`` ((index, state) pairs, in index order) whose
    replicas disagree (rank_agreement fails), or None."""
    fn = BY_NAME["rank_agreement"].fn
    return next((i for i, s in states if fn(m, s)), None)


def diverged_note(diverged: int) -> str:
    return (
        f"symmetry unsound here: replicas diverge in explored state {diverged} (rank "
        "permutations assume they agree); 'holds' verdicts are withdrawn, rerun "
        "without --symmetry"
    )


def bounds_note(m, cut: int) -> str:
    """The note for a search that met states past the model's bounds (Model.constraint)."""
    return (
        f"{cut:,} reached states lie past the model's bounds (a lock or host reference count over "
        f"max_lock = {m.cfg.max_lock}, or a pool count out of range) and were not expanded; progress and "
        "liveness verdicts do not look past them (a correct protocol reaches them only with max_lock too "
        "small: raise it)"
    )


__all__: List[str] = [
    "UNCHECKED_SYMMETRY", "UNSOUND_SYMMETRY", "SYMMETRY_GRAPH_NOTE", "safety_violations", "graph_violations", "decide",
    "first_diverged", "diverged_note", "bounds_note",
]

"""Differential check of the implementation against the specification (tests only: the
implementation itself never imports the spec).

A random walk picks enabled spec actions, applies each to the spec model and to a
LockstepHiCache built from the same constants (page_size 1, "path" victim order, manual
completion), and compares every rank's state after every step through one projection.
"""

from __future__ import annotations

import random
import tempfile

from tiercheck.impl.collective import CollectiveError
from tiercheck.impl.hicache import (
    FileStorage,
    HiCacheConfig,
    LockstepHiCache,
    ReplicaDivergenceError,
)
from tiercheck.conformance.reference import impl_config  # the adapter's Config mapping
from tiercheck.conformance.refinement import concretize
from tiercheck.impl.pools import SlotError
from tiercheck.models import model_file
from tiercheck.spec.model import Model
from tiercheck.spec.state import DEV_NAMES, HOST_NAMES




def spec_view(m, s, r: int) -> dict:
    rs = s.ranks[r]
    P = m.pages.paths
    nodes = {}
    for e, n in enumerate(rs.nodes):
        if n is not None:
            nodes[P[e]] = (P[n.start], DEV_NAMES[n.dev], HOST_NAMES[n.host], n.lock, n.href,
                           n.hits, n.lbp, n.rel)
    bits = lambda mask: sorted(P[p] for p in range(m.pages.count) if mask >> p & 1)  # noqa: E731
    reqs = m.cfg.requests
    return {
        "nodes": dict(sorted(nodes.items())),
        "dev_free": rs.dev_free,
        "host_free": rs.host_free,
        "durable": bits(rs.durable),
        "wq": [(P[a], P[b]) for a, b in rs.wq],
        "wdone": rs.wdone,
        "lq": [(P[a], P[b]) for a, b in rs.lq],
        "ldone": rs.ldone,
        "sq": [(P[a], P[b]) for a, b in rs.sq],
        "sdone": [a.reported for a in rs.sdone],
        "pq": [(tuple(reqs[q]), P[a] if a >= 0 else None, k, n) for q, a, k, n in rs.pq],
        "pdone": list(rs.pdone),
        "relq": list(rs.relq),
        "plan": [P[e] for e in rs.plan],
        "mismatch": rs.mismatch,
        "closed": rs.closed,
        "dups": [P[e] for e in rs.dups],
        "victims": [P[e] for e in rs.digest],
        "store": bits(s.store[r]) if m.cfg.storage else None,
    }


def impl_view(snap: dict) -> dict:
    nodes = {
        e: (n["start"], n["dev"], n["host"], n["lock_ref"], n["host_ref"], n["hit_count"],
            n["load_back_pending"], n["released"])
        for e, n in snap["nodes"].items()
    }
    out = {k: snap[k] for k in ("dev_free", "host_free", "durable", "wq", "wdone", "lq", "ldone",
                                "sq", "sdone", "pq", "pdone", "relq", "plan", "mismatch",
                                "closed", "dups", "victims", "store")}
    out["nodes"] = nodes
    return out


def apply(g, m, a):
    """Apply spec action ``a`` to the implementation group ``g``."""
    return g.apply(a.name, **concretize(m, a))


class Divergence(AssertionError):
    pass


def diff(a: dict, b: dict) -> str:
    out = []
    for k in a:
        if a[k] != b.get(k):
            out.append(f"  {k}: spec {a[k]!r}\n  {' ' * len(k)}  impl {b.get(k)!r}")
    return "\n".join(out)


def walk(model_name_or_cfg, steps: int, seed: int, *, store_dir: str | None = None,
         timeout: float = 5.0, verify_every: int = 10) -> list:
    """One random walk; raises Divergence naming the step and the differing fields.
    Returns the trace (list of actions)."""
    cfg = model_name_or_cfg
    if isinstance(cfg, str):
        cfg = model_file.load(cfg).config
    if getattr(cfg, "cp_planner", False):
        raise ValueError("CP planner models drive tiercheck.impl.cp, not the HiCache protocol")
    m = Model(cfg)
    rng = random.Random(seed)
    s = m.init_states()[0]
    trace = []
    with tempfile.TemporaryDirectory() as tmp:
        storage = FileStorage(store_dir or tmp) if cfg.storage else None
        with LockstepHiCache(impl_config(cfg), cfg.ranks, storage, timeout=timeout) as g:
            for _ in range(steps):
                acts = m.actions(s)
                if not acts:
                    break
                # Uniform over action names first: insert has many parameter choices and
                # would otherwise crowd out the rarer completion and sync steps.
                names = sorted({x.name for x in acts})
                pick = rng.choice(names)
                a = rng.choice([x for x in acts if x.name == pick])
                trace.append(a)
                t = m.next_state(s, a)
                if (t.hung == "writing_check" and all(rs.wdone == 0 for rs in s.ranks)
                        and cfg.has("early-return-collective")):
                    # Known spec discrepancy (reported): when EVERY rank returns early
                    # nobody waits in the all-reduce, so there is no hang; the spec's
                    # effect says hung. The implementation skips on every rank.
                    apply(g, m, a)
                    return trace
                if cfg.has("negated-pair-overflow") and t.halted:
                    # Under this variant whether diverged digests pass depends on their
                    # exact w-bit values: the spec hashes page ids, the implementation
                    # node contents, so the two may wrap at different rounds.
                    try:
                        apply(g, m, a)
                    except ReplicaDivergenceError:
                        pass
                    return trace
                if t.hung or t.halted:
                    expected = CollectiveError if t.hung else ReplicaDivergenceError
                    try:
                        apply(g, m, a)
                    except expected:
                        return trace
                    raise Divergence(
                        f"seed {seed} step {len(trace)} {a}: spec stops ({t.hung or t.halted}) "
                        f"but the implementation raised nothing\ntrace: {[str(x) for x in trace]}"
                    )
                try:
                    apply(g, m, a)
                except Exception as exc:
                    if isinstance(exc, ReplicaDivergenceError) and cfg.has("negated-pair-overflow"):
                        return trace  # see above: the implementation's digests did not wrap
                    if isinstance(exc, SlotError) and cfg.variants and (
                            not m.constraint(t) or m.property("slot_conservation").fn(m, t)):
                        return trace  # a variant broke slot accounting; the pool refuses
                    raise Divergence(
                        f"seed {seed} step {len(trace)} {a}: implementation raised {exc!r}\n"
                        f"trace: {[str(x) for x in trace]}"
                    ) from exc
                s = t
                snaps = g.snapshot()
                for r in range(cfg.ranks):
                    want, got = spec_view(m, s, r), impl_view(snaps[r])
                    if want != got:
                        raise Divergence(
                            f"seed {seed} step {len(trace)} {a}, rank {r}:\n{diff(want, got)}\n"
                            f"trace: {[str(x) for x in trace]}"
                        )
                if cfg.variants and m.property("rank_agreement").fn(m, s):
                    # The variant's bug showed as diverged replicas (compared equal up to
                    # here); beyond it the spec models diverged ranks only loosely (e.g. a
                    # write_back eviction charges every rank the first rank's node size).
                    return trace
                if len(trace) % verify_every and len(trace) < steps:
                    continue
                problems = g.verify()
                if problems and not cfg.variants:
                    raise Divergence(f"seed {seed} step {len(trace)} {a}: verify: {problems}")
    return trace

"""Frame obligations: a step that writes none of the state a target reads keeps it.

For a target P of the audit (a spec property or a strengthening invariant, both part of
the hypothesis Inv) and an action A whose footprint ``WRITES[A]`` is disjoint from
``READS[P]``, the obligation  Inv(s) /\\ step_A(s, s') => P(s')  holds for every
number of pages and ranks without enumerating anything: s' agrees with s on every field
P reads, so P(s') = P(s), and P(s) is a conjunct of Inv(s). No field here is indexed by
the page count, so the argument is the same for forests of every size.

Both tables are spec-level: ``WRITES[A]`` is every ``RankState`` field (and ``State``
field, prefixed ``state.``) the spec's A may change, under every option and variant the
proofs accept (variants included, so one table serves every audit); ``READS[P]`` every
field P's value depends on. tests/proofs/test_proofs_unbounded.py checks both: every
explicit step of A on the shipped models (the variant models included) changes only
``WRITES[A]``, and the bounded encoding of P (proofs/properties.py, proofs/strengthen.py)
mentions only state in ``READS[P]`` (``encoded_reads``).
"""

from __future__ import annotations

from typing import Dict, FrozenSet

# RankState fields of the node tree (the per-page owner and the per-node fields).
_TREE = frozenset({"owner", "nodes"})

READS: Dict[str, FrozenSet[str]] = {
    # spec/properties.py: in-flight D->H / H->D / H->L3 copies against the tree, and
    # prefetch_end.read_into_freed (pflags FREED with pdone NOT_DONE)
    "no_use_after_free": _TREE | {"wq", "wdone", "lq", "ldone", "sq", "sdone", "pq", "pdone", "pflags"},
    # pools against the tree, prefetch_end.held_by_prefetches (pq sizes, FREED) and relq
    "slot_conservation": _TREE | {"dev_free", "host_free", "pq", "pflags", "relq"},
    # replica(), hung/halted, the rank count, digest_check_will_fire (the digests)
    "rank_agreement": _TREE | {"dev_free", "host_free", "wq", "lq", "sq", "pq", "relq", "closed", "running", "lru",
                               "digest", "state.hung", "state.halted"},
    # proofs/strengthen.py
    "write_queue": _TREE | {"wq", "wdone"},
    "load_queue": _TREE | {"lq", "ldone"},
    "backup_queue": _TREE | {"sq", "sdone"},
    "storage_acks": frozenset({"sq", "sdone"}),  # (and which rank writes: static)
    "prefetch_queue": _TREE | {"pq", "pdone", "pflags"},
    "lock_accounting": _TREE | {"lq", "running"},
    "href_accounting": _TREE | {"sq", "pq"},
}

WRITES: Dict[str, FrozenSet[str]] = {
    "write_dma_done": frozenset({"wdone"}),
    "load_dma_done": frozenset({"ldone"}),
    # the ack (every variant: failed-batch-acked changes its value only) and the store
    "storage_backup_done": frozenset({"sdone", "state.store"}),
    "prefetch_io": frozenset({"pdone"}),
    "prefetch_timeout": frozenset({"pflags"}),
    "prefetch_read_fails": frozenset({"pdone", "pflags"}),
    # revoke-frees-in-flight also frees the host slots at once (host pool, slot ids)
    "prefetch_revoke": frozenset({"pflags", "host_free", "hfree", "pslots"}),
    "store_lose": frozenset({"state.store"}),
    "registry_skew": frozenset({"dups"}),
    "local_access": frozenset({"clock"}),
}


def frame(target: str, action: str) -> bool:
    """Whether (target, action) is a frame obligation: A writes nothing P reads."""
    return target in READS and action in WRITES and not READS[target] & WRITES[action]


def frame_targets(action: str):
    return tuple(t for t in READS if frame(t, action))


# --- the bounded encodings' state, by spec field (for the read check) --------------------

# proofs/state.py RV field -> spec RankState field; pq's components 4 and 5 are the
# rank's pdone and pflags entries.
RV_TO_SPEC = {"own": "owner", "start": "nodes", "dev": "nodes", "host": "nodes", "lock": "nodes", "href": "nodes",
              "hits": "nodes", "lbp": "nodes", "rel": "nodes", "run": "running", "relq_n": "relq",
              "relq_sum": "relq", "store": "state.store"}
PQ_COMPONENTS = {4: "pdone", 5: "pflags"}


def encoded_reads(target: str, k: int = 2, ranks: int = 2) -> FrozenSet[str]:
    """The spec fields the bounded encoding of ``target`` mentions, over a state whose
    every field is a fresh constant (ranks concrete, the config symbolic)."""
    import z3

    from .config import ProofConfig
    from .encode.ctx import Ctx
    from .formula import holds
    from .obligations import target_parts
    from .ranks import ConcreteRanks
    from .state import free_concrete_state
    from .universe import Universe

    space = ConcreteRanks(ranks)
    ctx = Ctx(ProofConfig.symbolic_config(frozenset()), Universe.symbolic_universe(k), space)
    s = free_concrete_state(space, k, "s")
    formula = z3.And(holds(space, target_parts(ctx, s, target, s, "local_access")), *map(_z3, ctx.side))
    out, seen, todo = set(), set(), [formula]
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED and str(e).startswith("s."):
            out.add(_spec_field(str(e)))
        todo.extend(e.children())
    return frozenset(out)


def _z3(x):
    from .sym import const

    return const(x)


def _spec_field(name: str) -> str:
    """'s.r0.pq[1].4' -> 'pdone', 's.r1.own[0]' -> 'owner', 's.hung' -> 'state.hung'."""
    parts = name.split(".")
    if len(parts) == 2:  # a State field
        return "state." + parts[1]
    field = parts[2].split("[")[0]
    if field == "pq" and len(parts) > 3 and parts[3].isdigit():
        return PQ_COMPONENTS.get(int(parts[3]), "pq")
    return RV_TO_SPEC.get(field, field)

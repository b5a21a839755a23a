"""The refinement mapping: an implementation's observable state -> spec state.

One explicit function, per rank, from the plain-data snapshot every adapter produces
(the format of ``tiercheck.impl.hicache`` snapshots, documented in docs/plugging-in.md)
to ``tiercheck.spec.state.RankState``. Pages and nodes are identified by token paths on
the implementation side and by page ids on the spec side; the model's page universe
translates. Conformance compares spec states, so adapters for other implementations
(upstream SGLang) produce the same snapshot format and reuse this mapping unchanged.
"""

from __future__ import annotations

from typing import List, Optional

from tiercheck.spec.action import NODE, PAGE, REQUEST
from tiercheck.spec.durable import tracks_lru
from tiercheck.spec.model import ACTION_SPECS
from tiercheck.spec.prefetch_end import tracks_flags
from tiercheck.spec.state import DEV_NAMES, HOST_NAMES, Node, RankState, State, StorageAck

_DEV = {name: i for i, name in enumerate(DEV_NAMES)}
_HOST = {name: i for i, name in enumerate(HOST_NAMES)}


class RefinementError(ValueError):
    """The snapshot names something the model does not have (a page off every request)."""


def _page(model, path) -> int:
    try:
        return model.pages.index[tuple(path)]
    except KeyError:
        raise RefinementError(f"page {'/'.join(map(str, path))} is not a page of the model") from None


def _mask(model, paths) -> int:
    out = 0
    for p in paths or ():
        out |= 1 << _page(model, p)
    return out


def _request(model, tokens) -> int:
    tokens = tuple(tokens)
    for i, req in enumerate(model.cfg.requests):
        if tuple(req) == tokens:
            return i
    raise RefinementError(f"request {tokens} matches no request of the model")


def rank_state(model, snap: dict) -> RankState:
    """Map one rank's snapshot to the spec's RankState."""
    n = model.pages.count
    owner = [-1] * n
    nodes: List[Optional[Node]] = [None] * n
    for end_path, node in snap["nodes"].items():
        end, start = _page(model, end_path), _page(model, node["start"])
        for p in model.pages.chain(start, end):
            owner[p] = end
        nodes[end] = Node(
            start=start,
            dev=_DEV[node["dev"]],
            host=_HOST[node["host"]],
            lock=node["lock_ref"],
            href=node["host_ref"],
            hits=min(node["hit_count"], model.cfg.write_threshold),
            lbp=bool(node["load_back_pending"]),
            rel=bool(node["released"]),
        )
    span = lambda pair: (_page(model, pair[0]), _page(model, pair[1]))  # noqa: E731
    extra = _slot_fields(model, snap) if model.cfg.slots else {}
    return RankState(**extra,
        owner=tuple(owner),
        nodes=tuple(nodes),
        dev_free=snap["dev_free"],
        host_free=snap["host_free"],
        durable=_mask(model, snap["durable"]),
        wq=tuple(span(x) for x in snap["wq"]),
        wdone=snap["wdone"],
        lq=tuple(span(x) for x in snap["lq"]),
        ldone=snap["ldone"],
        sq=tuple(span(x) for x in snap["sq"]),
        sdone=_acks(snap),
        pq=tuple(
            (_request(model, req), _page(model, anchor) if anchor else -1, k, pages)
            for req, anchor, k, pages in snap["pq"]
        ),
        pdone=tuple(snap["pdone"]),
        relq=tuple(snap["relq"]),
        plan=tuple(_page(model, p) for p in snap["plan"]),
        mismatch=snap["mismatch"],
        closed=bool(snap["closed"]),
        dups=tuple(_page(model, p) for p in snap["dups"]),
        digest=tuple(_page(model, p) for p in snap.get("victims", ())),
        # The CP planner's per-rank local access clock (end pages, least recent first);
        # entries of nodes since removed stay until the next local access, as in the spec.
        clock=tuple(_page(model, p) for p in snap.get("clock", ())),
        lru=tuple(_page(model, p) for p in snap.get("lru", ())),
        running=tuple(sorted((_request(model, r), _page(model, e)) for r, e in snap.get("running", ()))),
        dlru=_durable_lru(model, snap),
        # how each prefetch is ending (spec/prefetch_end.py), where the spec keeps it
        pflags=tuple(snap["pflags"]) if tracks_flags(model.cfg) else (),
    )


def _acks(snap: dict) -> tuple:
    """The finished backups' acks: what each reports (``sdone``) and, as the history field
    ``StorageAck.actual``, what it really stored (``sstored``, optional: an implementation
    whose acks report what was stored may leave it out). Without the stored counts, a lying
    ack (failed-batch-acked) would refine to a state whose properties and counters see the
    reported pages as stored."""
    reported = snap["sdone"]
    stored = snap.get("sstored")
    if stored is None:
        stored = reported
    if len(stored) != len(reported):
        raise RefinementError(f"the snapshot has {len(stored)} 'sstored' counts for {len(reported)} finished "
                              "backups ('sdone')")
    return tuple(StorageAck(k, n) for k, n in zip(reported, stored))


def _slot_fields(model, snap: dict) -> dict:
    """Slot identities (Config ``slots``): per page its device / host slot, the free slot
    sets, the slots of prefetches and release-queue entries."""
    for key in ("dev_free_slots", "host_free_slots", "pq_slots", "relq_slots"):
        if snap.get(key) is None:
            raise RefinementError(f"the snapshot has no {key!r}, which a model with slots = true needs "
                                  "(docs/plugging-in.md)")
    n = model.pages.count
    dslot, hslot = [-1] * n, [-1] * n
    for end_path, node in snap["nodes"].items():
        pages = model.pages.chain(_page(model, node["start"]), _page(model, end_path))
        for owner, key, state in ((dslot, "dev_slots", node["dev"]), (hslot, "host_slots", node["host"])):
            if state != "absent" and node.get(key) is not None:
                for p, s in zip(pages, node[key]):
                    owner[p] = s
    mask = lambda slots: sum(1 << s for s in set(slots))  # noqa: E731
    return {
        "dslot": tuple(dslot), "hslot": tuple(hslot),
        "dfree": mask(snap["dev_free_slots"]), "hfree": mask(snap["host_free_slots"]),
        "pslots": tuple(tuple(x) for x in snap["pq_slots"]),
        "rslots": tuple(tuple(x) for x in snap["relq_slots"]),
    }


def _durable_lru(model, snap) -> tuple:
    """The durable LRU's order and ages (capped at refresh_rounds), where the spec keeps
    them (a bounded or age-gated LRU; spec/durable.py)."""
    cfg = model.cfg
    if not tracks_lru(cfg):
        return ()
    return tuple((_page(model, p), min(age, cfg.refresh_rounds)) for p, age in snap.get("durable_lru", ()))


def refine(model, snaps: List[dict], hung: str = "", halted: str = "") -> State:
    """The whole implementation (every rank's snapshot) as one spec State."""
    ranks = tuple(rank_state(model, s) for s in snaps)
    store = tuple(_mask(model, s.get("store") or ()) for s in snaps)
    return State(ranks=ranks, store=store, hung=hung, halted=halted)


def concretize(model, action) -> dict:
    """The action half of the mapping: a spec action's parameters as an implementation
    takes them (``HiCacheGroup.apply``, docs/plugging-in.md). Each parameter is translated
    by the kind its ActionSpec declares: a request index becomes ``tokens`` (its page
    tokens), a node or page id its token path; ranks, counts and queue indices pass as
    they are."""
    kinds = ACTION_SPECS[action.name].signature
    out = {}
    for key, value in action.params:
        kind = kinds.get(key)
        if kind == REQUEST:
            out["tokens"] = list(model.cfg.requests[value])
        elif kind in (NODE, PAGE):
            out[key] = model.pages.paths[value]
        elif kind is None:
            raise RefinementError(f"{action.name}: parameter {key!r} is not in its signature")
        else:
            out[key] = value
    return out

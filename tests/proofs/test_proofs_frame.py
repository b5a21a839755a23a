"""Frame obligations (proofs.epr_frame): the footprints and read sets they rest on.

WRITES[A] is checked against the spec: every explicit step of A from the first states
(breadth-first) of shipped models (variant models included) changes only fields in WRITES[A], and each
field listed is one some step really changes (so the table is not padded into
uselessness). READS[P] is checked against the bounded encoding of P: it mentions no
state outside READS[P]."""

from collections import deque

import pytest

from tiercheck.proofs.epr_frame import READS, WRITES, encoded_reads, frame, frame_targets
from tiercheck.proofs.epr_obligations import covered, prove_action
from tiercheck.proofs.obligations import ACTION_NAMES, targets_for
from tiercheck.spec.state import RankState, State

from .proof_helpers import model

# models whose walks take every frame action (faults, the prefetch endings, the LRU's
# local touches, the two variants that widen a footprint)
FRAME_MODELS = ("wt-storage-1r", "wb-reclaim-2r", "lru-2r", "wt-prefetch-endings-2r", "wt-prefetch-revoke-1r",
                "wt-prefetch-fail-1r", "variants/revoke-frees-in-flight", "variants/failed-batch-acked",
                "slots-prefetch-1r", "wt-prefetch-timeout-2r")


def changed_fields(s: State, t: State) -> set:
    out = {f"state.{f}" for f in State._fields if f != "ranks" and getattr(s, f) != getattr(t, f)}
    assert len(s.ranks) == len(t.ranks)
    for rs, rt in zip(s.ranks, t.ranks):
        out |= {f for f in RankState._fields if getattr(rs, f) != getattr(rt, f)}
    return out


def _frame_steps(cap: int = 3000):
    """(model, action, fields changed) of every frame-action step from the first
    ``cap`` states of each model, breadth-first."""
    for name in FRAME_MODELS:
        m = model(name)
        s0 = m.init_states()[0]
        seen, queue = {s0}, deque([s0])
        while queue and len(seen) < cap:
            s = queue.popleft()
            for a, t in m.successors(s):
                if a.name in WRITES:
                    yield name, a, changed_fields(s, t)
                if t not in seen:
                    seen.add(t)
                    queue.append(t)


def test_frame_actions_write_only_their_footprint():
    seen = {}
    for name, a, changed in _frame_steps():
        assert changed <= WRITES[a.name], (name, a, changed - WRITES[a.name])
        seen.setdefault(a.name, set()).update(changed)
    assert set(seen) == set(WRITES), set(WRITES) - set(seen)
    # every footprint entry is needed: some step changes it (the slot-id fields of the
    # revoke only where a model has both slot identities and the freeing variant)
    unused = {a: WRITES[a] - seen[a] for a in WRITES if WRITES[a] - seen[a]}
    assert unused == {"prefetch_revoke": {"hfree", "pslots"}}, unused


@pytest.mark.parametrize("target", sorted(READS))
def test_bounded_encoding_reads_only_the_read_set(target):
    got = encoded_reads(target)
    assert got <= READS[target], got - READS[target]
    assert {"owner", "nodes"} & got or target == "storage_acks"


def test_frame_obligations_are_the_disjoint_pairs_and_prove():
    pairs = [(t, a) for a in ACTION_NAMES for t in targets_for(a) if frame(t, a)]
    assert len(pairs) == 81
    assert not frame("write_queue", "write_dma_done") and frame("load_queue", "write_dma_done")
    assert not frame("slot_conservation", "prefetch_revoke")  # revoke-frees-in-flight frees host pages
    assert not frame("rank_agreement", "prefetch_revoke") and frame("rank_agreement", "registry_skew")
    for t, a in pairs:
        assert covered(t, a)
    results = {r.target: r for r in prove_action("store_lose")}
    assert set(frame_targets("store_lose")) <= set(results)
    assert all(results[t].status == "proved" and results[t].pages == "any" for t in frame_targets("store_lose"))

"""The catalogue of real bugs (domain.md section 5) as named spec variants.

Each variant changes exactly the guard or effect that the bug changes; the code that does it
is found by grepping for ``cfg.has("<name>")``. The record is the one place that says
everything else about it; the rest of tiercheck derives from it (docs/extending.md):
``expect`` names the property its model violates (tests/models/test_variant_models.py),
``action`` the spec action whose guard or effect changes (where the proofs look first),
``proof`` how the z3 proofs exhibit it, ``breaks_rank_symmetry`` whether its replicas
diverge (models/symmetry.py), ``impl`` / ``twin`` whether the reference implementation /
the TLA+ twin can switch it on. Its model is ``models/library/variants/<name>.toml``.
"""

from __future__ import annotations

from typing import NamedTuple

# How the z3 proofs (proofs/) exhibit a variant.
OBLIGATION = "obligation"  # some inductive obligation fails, with a CTI
LIVENESS_ONLY = "liveness"  # only a progress/liveness symptom: no safety obligation can fail
THEOREM = "theorem:"  # + a theorem of proofs/consensus.py that exhibits it
OUT_OF_SCOPE = "out of scope:"  # + why the encoding does not cover its code


class Variant(NamedTuple):
    name: str
    source: str
    symptom: str
    changes: str  # the one guard/effect the variant changes
    expect: str  # the property a model exhibiting it violates
    action: str  # the spec action whose guard or effect it changes
    proof: str = OBLIGATION
    proof_pages: int = 2  # pages the proofs need to show it
    proof_action: str = ""  # the action whose obligation shows it first, if not ``action``
    proof_unbounded_only: bool = False  # only the page-sorted encoding models its change
    breaks_rank_symmetry: bool = False
    impl: bool = True
    twin: bool = True
    catalogue: bool = True  # listed in domain.md section 5 (False: found by tiercheck)

    @property
    def model(self) -> str:
        """The shipped model that exhibits it (a name for models.model_file.load)."""
        return f"variants/{self.name}"

    @property
    def first_failing_action(self) -> str:
        """Where the proofs look first for the obligation this variant fails."""
        return self.proof_action or self.action

    def proof_note(self) -> str:
        """Why the proofs cannot exhibit it by an obligation ("" when they can)."""
        for prefix in (OUT_OF_SCOPE, THEOREM):
            if self.proof.startswith(prefix):
                return self.proof[len(prefix):].strip()
        return ""


VARIANTS = {
    v.name: v
    for v in [
        Variant(
            "host-starvation",
            "seed 000; SGLang PR #33862",
            "write-through + storage: host pool fills with pinned mirrors, staging rejected",
            "drain_storage_control_queues: a backup ack only calls release_host; no mirror "
            "is ever released (the three code facts of seed 000)",
            "host_channel",
            action="drain_storage_control_queues", proof=LIVENESS_ONLY,
        ),
        Variant(
            "durable-on-ack",
            "seed 000 ('an ack is not success')",
            "a mirror is released although storage does not hold all its pages",
            "drain_storage_control_queues: marks every page of the ack durable, not the "
            "completed prefix",
            "durable_only_when_acked",
            action="drain_storage_control_queues",
        ),
        Variant(
            "release-busy",
            "seed 000",
            "the mirror of a locked / host-referenced node is released",
            "release candidates: lock_ref and host_ref_counter are not checked",
            "release_safety",
            action="drain_storage_control_queues",
        ),
        Variant(
            "release-no-consensus",
            "seed 000",
            "a rank releases its own plan before all ranks agree: replicas diverge",
            "mirror release: the prepared plan is executed at once, without the "
            "negated-pair agreement of the next drain round",
            "rank_agreement",
            action="drain_storage_control_queues", breaks_rank_symmetry=True,
        ),
        Variant(
            "split-during-backup",
            "seed 000; SGLang #16946, #27072",
            "a split while the storage backup is in flight loses the host reference of "
            "one half: its host slots can be freed under the H->L3 copy",
            "_split_node: the new half does not inherit host_ref_counter, and the ack "
            "releases only the node object it was registered with",
            "no_use_after_free",
            action="insert",
        ),
        Variant(
            "reclaim-demote-leaf",
            "seed 001",
            "the host copy of an evictable device leaf (about to be demoted) is reclaimed "
            "while other duplicates were available",
            "_reclaim_full_host_duplicates: one pass that does not spare evictable leaves",
            "release_safety",
            action="evict", proof_pages=3,
        ),
        Variant(
            "reclaim-during-loadback",
            "seed 001; SGLang #27631, #26728, #27424",
            "host slots are freed while an H->D load-back still reads them",
            "_can_reclaim_full_host_duplicate: load_back_pending_id is not checked",
            "no_use_after_free",
            action="insert",
        ),
        Variant(
            "split-drops-pending-mark",
            "seed 001",
            "a split does not pass load_back_pending_id to the new half, which is then "
            "reclaimed under the load-back",
            "_split_node: the new half does not inherit load_back_pending_id",
            "no_use_after_free",
            action="insert",
        ),
        Variant(
            "digest-unchecked",
            "seed 001",
            "duplicate-reclaim victims diverge across ranks and nobody notices",
            "the [digest, -digest] pair rides the MIN all-reduce but min == -max is not "
            "asserted",
            "rank_agreement",
            action="writing_check", breaks_rank_symmetry=True,
        ),
        Variant(
            "early-return-collective",
            "SGLang #26921, #27489",
            "writing_check returns early on a rank with nothing finished, skipping the "
            "all-reduce its peers entered: TP deadlock",
            "writing_check: the early return tests the local finished count instead of the "
            "replicated ongoing set",
            "no_collective_hang",
            action="writing_check",
        ),
        Variant(
            "partial-backup-leak",
            "SGLang #28429; bytedance-iaas/sglang #748",
            "write_backup fails on a subset of ranks: lock and host slots leak on the others",
            "write_backup: host allocation success is not agreed across ranks",
            "rank_agreement",
            action="insert", breaks_rank_symmetry=True,
        ),
        Variant(
            "prefetch-double-free",
            "SGLang #13483",
            "prefetch host slots are released twice",
            "check_prefetch_progress: the unused tail is freed at once and also queued on "
            "host_mem_release_queue",
            "slot_conservation",
            action="check_prefetch_progress",
        ),
        Variant(
            "failed-batch-acked",
            "SGLang #39444",
            "a storage batch fails midway but its ack reports the whole node written",
            "storage backup completion: the ack reports all pages instead of the completed "
            "prefix",
            "durable_only_when_acked",
            action="storage_backup_done",
        ),
        Variant(
            "negated-pair-overflow",
            "property of the protocol",
            "-x of the most negative int digest wraps; MIN of negated pairs no longer yields "
            "the max, so diverged digests pass the agreement check",
            "digest encoding: digests range over the full signed width instead of "
            "[0, 2^(w-1) - 1]",
            "rank_agreement",
            action="writing_check", proof=THEOREM + "overflow_witness", breaks_rank_symmetry=True,
        ),
        Variant(
            "planner-local-tiebreak",
            "seed 004 header (CP owner-lane load-back planner)",
            "CP ranks break equal-contribution ties by their local access clock and pick "
            "different load-back victims: replicas diverge",
            "load-back planner: ties broken by a per-rank value instead of a strict order "
            "over replicated state",
            "planner_determinism",
            action="load_back", proof_pages=3,  # two tied device leaves and the node loaded
            catalogue=False,
        ),
        Variant(
            "split-write-lock-leak",
            "seed 004 (_split_node copies lock_ref; writing_check's dec_node_lock_ref)",
            "a split during a D->H write copies the write lock to the new upper half, and "
            "the ack unlocks only the node the write was registered with: the upper half "
            "stays locked forever and can never be evicted",
            "writing_check: the ack drops the lock of the registered node only, not of "
            "every node the write covers",
            "lock_release",
            action="writing_check",
            proof=LIVENESS_ONLY,
            catalogue=False,
        ),
        Variant(
            "durable-evicted-while-planned",
            "seed 000 (bounded durable LRU, SGLANG_HICACHE_DURABLE_CAPACITY)",
            "a planned release loses an entry's durable mark to capacity eviction on one "
            "rank only: that rank skips the release the others make, replicas diverge",
            "drain_storage_control_queues: this round's acks add durable marks (evicting "
            "the least recent from the bounded LRU) before the agreed plan is committed "
            "with its live re-check",
            "rank_agreement",
            action="drain_storage_control_queues", breaks_rank_symmetry=True,
            catalogue=False,
        ),
        Variant(
            "prefetch-vote-skipped",
            "seed 004 can_terminate_prefetch (the MAX all-reduce of the stop-policy vote)",
            "under wait_complete a rank whose read finished terminates the prefetch on its own "
            "and waits in the completed-pages MIN all-reduce its peers, still reading, skipped: "
            "TP deadlock",
            "check_prefetch_progress: each rank's can_terminate decides alone, without the MAX "
            "vote",
            "no_collective_hang",
            action="check_prefetch_progress",
            catalogue=False,
        ),
        Variant(
            "terminated-half-dropped",
            "seed 004 can_terminate_prefetch (the vote's operation_terminated half)",
            "under wait_complete a rank whose read failed midway (mark_terminate) can never "
            "vote to terminate: the prefetch never ends, holding its host slots and its "
            "anchor's host reference",
            "check_prefetch_progress: the vote carries can_terminate only, not whether the "
            "operation is terminated on some rank",
            "prefetch_progress",
            action="check_prefetch_progress", proof=LIVENESS_ONLY, catalogue=False,
        ),
        Variant(
            "timeout-local-vote",
            "seed 004 can_terminate_prefetch / is_prefetch_timeout (a per-rank monotonic clock)",
            "under the timeout policy a rank whose timer fired terminates on its own and waits "
            "in the completed-pages MIN all-reduce its peers, still voting to go on, skipped: "
            "TP deadlock",
            "check_prefetch_progress: a rank's own timeout decides, without the MAX vote",
            "no_collective_hang",
            action="check_prefetch_progress",
            catalogue=False,
        ),
        Variant(
            "revoke-frees-in-flight",
            "seed 004's revoke paths: _force_release_pending_storage_ops frees a prefetch's "
            "host_indices at once, safe only because detach stopped the storage threads first "
            "(release_aborted_request queues only the completed_tokens prefix, which the read is done with)",
            "a revoked prefetch's host slots are freed while its storage read may still write "
            "into them: use-after-free, corrupt KV in whatever takes the slots next",
            "prefetch_revoke: the host slots are freed at the revoke, not by the drain round "
            "once every rank's read has settled",
            "no_use_after_free",
            action="prefetch_revoke",
            catalogue=False,
        ),
        Variant(
            "orphan-host-subtree",
            "tiercheck finding in seed 004 (_evict_regular -> _delete_leaf)",
            "evicting a non-backed device leaf whose children were demoted detaches the "
            "host-only children: their host slots are never freed",
            "evict: a non-backed leaf is deleted without pruning its host-only subtree",
            "slot_conservation",
            action="evict",
            catalogue=False,
        ),
        Variant(
            "page-ceil-match",
            "SGLang paged radix cache (_key_match_paged floors a token match to whole pages)",
            "with page_size > 1, a request that diverges inside a page takes the cached page "
            "whose leading tokens it shares: its later pages are attached below a page that "
            "holds other tokens' KV",
            "insert: the prefix match is rounded up to the page it stops in, not down",
            "prefix_closed",
            action="insert",
            proof_unbounded_only=True,
            catalogue=False,
        ),
        Variant(
            "lru-local-clock",
            "seed 004 (the base LRU strategy keys on per-rank wall-clock last_access_time)",
            "host eviction orders its LRU victims by each rank's own clock, which touches "
            "only that rank makes (a probe, a metrics walk) move: ranks evict different "
            "host leaves and their replicas diverge",
            "evict_host: the LRU key is the rank's wall-clock access order, not the "
            "replicated logical clock",
            "rank_agreement",
            action="insert", proof_action="evict", proof_pages=3,
            breaks_rank_symmetry=True,
            catalogue=False,
        ),
        Variant(
            "split-slice-off-by-one",
            "seed 004 _split_node (child.value[:split_len] / [split_len:], split_len checked "
            "against page_size in the CP metadata split)",
            "a split slices the lower half's device slots one page early: one slot is owned "
            "by both halves (freed twice once both are evicted) and the lower half's last "
            "slot is owned by nobody; the free counts still balance",
            "_split_node: the lower half takes value[k-1:-1] instead of value[k:]",
            "slot_ownership",
            action="insert",
            proof_unbounded_only=True,
            catalogue=False,
        ),
        Variant(
            "lru-evicts-locked-parent",
            "seed 004 HiRadixCache.evict (after a victim, its parent is pushed onto the heap "
            "once every child is evicted; the pop skips it only by its lock_ref > 0 check)",
            "the scheduler's LRU eviction (an insert or a load_back without room) pops a "
            "locked parent after its last device child: a node whose D->H copy is in "
            "flight, a request's matched prefix or a load's ancestors lose their device copy",
            "evict_lru: a parent pushed after its last device child is evicted without the "
            "lock check",
            "locked_never_evicted",
            action="insert", proof_pages=4,  # a locked parent, its leaf, a two-page request
            catalogue=False,
        ),
        Variant(
            "load-back-evicts-chain-unlocked",
            "seed 004 HiRadixCache.load_back (non-CP: inc_lock_ref(ancester_node) protects the first "
            "resident ancestor only, host_indices are taken, then evict(num_tokens=len(host_indices)) "
            "when the device pool lacks room)",
            "under write_back, the eviction stages its victims to host, and the host allocation's "
            "evict_host takes the node being loaded (an unlocked host leaf): the load reads freed host "
            "slots into device slots no node owns, and the ancestors stay locked",
            "load_back: its own eviction (load_back_evicts) holds the first resident ancestor, not the "
            "node being loaded",
            "no_use_after_free",
            action="load_back",
            catalogue=False,
        ),
    ]
}


def check_names(names) -> frozenset:
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise ValueError(
            f"unknown variant {unknown[0]!r} (known: {', '.join(sorted(VARIANTS))})"
        )
    return frozenset(names)

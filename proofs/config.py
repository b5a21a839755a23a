"""The model constants as the encoding sees them: symbolic (one proof for every
configuration) or taken from a concrete spec ``Config``.

Feature flags and capacities are z3 terms, so a proof quantifies over all of them at
once (constrained exactly as model files are validated, models/model_file.py). Bug
variants stay Python-level switches: ``has(name)`` picks the guard or effect the variant
changes, as ``cfg.has(name)`` does in the explicit spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import z3

from .sym import and_, const, implies, ite, not_, or_

FLAGS = (
    "wb", "sel", "storage", "prefetch", "mirror", "dupr", "single_writer",
    "partial_storage", "store_loss", "alloc_asymmetry", "registry_skew",
    "wait_complete",  # prefetch_stop = "wait_complete" (else best_effort)
    "lru",  # victim_order = "lru" (else page order)
    "paged",  # page_size > 1 (pages of several tokens: siblings may share a leading token)
    "timeout",  # prefetch_stop = "timeout" (a rank's timer firing lets it vote to terminate)
    "revoke",  # prefetch_revoke (the scheduler revokes an in-flight prefetch)
    "read_fail",  # prefetch_read_fail (a rank's read fails midway: mark_terminate)
    "request_locks",  # running requests lock their device match (lock_request / unlock_request)
    "cp",  # cp_planner: load_back plans its device victims (seed 004's owner-lane planner)
    "insert_evicts",  # an insert without device room first evicts by victim order (encode/scheduler_evict.py)
    "load_back_evicts",  # so does a load_back (HiRadixCache.load_back's retry)
)
INTS = ("device_pages", "host_pages", "host_free_target", "fail_close_after", "durable_capacity", "refresh_rounds",
        "cp_lanes")
CP_LANES_MAX = 8  # spec/config.py cp_lanes bounds


@dataclass
class ProofConfig:
    wb: object
    sel: object
    storage: object
    prefetch: object
    mirror: object
    dupr: object
    single_writer: object
    partial_storage: object
    store_loss: object
    alloc_asymmetry: object
    registry_skew: object
    wait_complete: object
    lru: object
    paged: object
    timeout: object
    revoke: object
    read_fail: object
    request_locks: object
    cp: object
    insert_evicts: object
    load_back_evicts: object
    device_pages: object
    host_pages: object
    host_free_target: object
    fail_close_after: object
    durable_capacity: object
    refresh_rounds: object
    cp_lanes: object
    digest_bits: int = 16
    variants: frozenset = frozenset()
    symbolic: bool = False
    slots: bool = False  # slot identities (host pool: encode/host_slots.py); not symbolic, see there
    spec: Optional[object] = field(default=None, repr=False)  # the spec Config, if concrete

    def has(self, variant: str) -> bool:
        return variant in self.variants

    @property
    def threshold(self):
        return ite(self.sel, 2, 1)

    def constraints(self):
        """What model_file._check_consistent and its ranges accept."""
        return [
            not_(and_(self.wb, self.sel)),
            not_(and_(self.wait_complete, self.timeout)),  # one prefetch_stop
            implies(self.mirror, and_(self.storage, not_(self.wb))),
            implies(self.dupr, self.wb),
            implies(self.prefetch, self.storage),
            implies(self.single_writer, self.storage),
            implies(self.partial_storage, self.storage),
            implies(self.store_loss, self.storage),
            implies(self.registry_skew, self.dupr),
            const(self.device_pages) >= 1,
            const(self.host_pages) >= 0,
            const(self.host_free_target) >= 0,
            const(self.fail_close_after) >= 1,
            const(self.durable_capacity) >= 0,
            const(self.refresh_rounds) >= 0,
            const(self.cp_lanes) >= 1,
            const(self.cp_lanes) <= CP_LANES_MAX,
        ]

    @staticmethod
    def symbolic_config(variants=frozenset(), digest_bits: int = 16, fix=None) -> "ProofConfig":
        fix = fix or {}
        kw = {}
        for f in FLAGS:
            kw[f] = fix[f] if f in fix else z3.Bool(f"cfg_{f}")
        for f in INTS:
            kw[f] = fix[f] if f in fix else z3.Int(f"cfg_{f}")
        return ProofConfig(**kw, digest_bits=digest_bits, variants=frozenset(variants), symbolic=True,
                           slots=bool(fix.get("slots", False)))

    @staticmethod
    def from_spec(cfg) -> "ProofConfig":
        return ProofConfig(
            wb=cfg.policy == "write_back",
            sel=cfg.policy == "write_through_selective",
            storage=cfg.storage,
            prefetch=cfg.prefetch,
            mirror=cfg.mirror_release,
            dupr=cfg.duplicate_reclaim,
            single_writer=cfg.single_writer,
            partial_storage=cfg.fault("partial_storage"),
            store_loss=cfg.fault("store_loss"),
            alloc_asymmetry=cfg.fault("alloc_asymmetry"),
            registry_skew=cfg.fault("registry_skew"),
            wait_complete=cfg.prefetch_stop == "wait_complete",
            lru=cfg.lru,
            paged=cfg.page_size > 1,
            timeout=cfg.prefetch_stop == "timeout",
            revoke=cfg.prefetch_revoke,
            read_fail=cfg.prefetch_read_fail,
            request_locks=cfg.request_locks,
            cp=cfg.cp_planner,
            insert_evicts=cfg.insert_evicts,
            load_back_evicts=cfg.load_back_evicts,
            device_pages=cfg.device_pages,
            host_pages=cfg.host_pages,
            host_free_target=cfg.host_free_target,
            fail_close_after=cfg.fail_close_after,
            durable_capacity=cfg.durable_capacity,
            refresh_rounds=cfg.refresh_rounds,
            cp_lanes=cfg.cp_lanes,
            digest_bits=cfg.digest_bits,
            variants=frozenset(cfg.variants),
            symbolic=False,
            slots=cfg.slots,
            spec=cfg,
        )

    def mirror_release_on(self):
        """storage_path.mirror_release_on."""
        if self.has("host-starvation"):
            return False
        return and_(self.mirror, self.storage, not_(self.wb))

    def tracks_digest(self, multi):
        """sync.tracks_digest: write_back + duplicate reclaim on more than one rank."""
        return and_(self.wb, self.dupr, multi)

    def policy_of(self, model) -> str:
        wb = z3.is_true(model.eval(const(self.wb), model_completion=True))  # fixed flags are Python bools
        sel = z3.is_true(model.eval(const(self.sel), model_completion=True))
        return "write_back" if wb else ("write_through_selective" if sel else "write_through")


def either(*xs):
    return or_(*xs)

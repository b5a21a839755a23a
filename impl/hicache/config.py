"""Configuration of one HiCache instance (the same on every TP rank)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tiercheck.errors import UserError
from tiercheck.impl.kvdata import KVLayout

from .variants import check_variants

POLICIES = ("write_through", "write_through_selective", "write_back")
VICTIM_ORDERS = ("lru", "path")
PREFETCH_POLICIES = ("best_effort", "wait_complete", "timeout")


@dataclass(frozen=True)
class HiCacheConfig:
    """Constants of the cache. Pool sizes and targets are in pages.

    ``manual``: DMA copies and storage operations complete only when the caller says so
    (``write_dma_done``, ``storage_backup_done``...): deterministic runs for tests and the
    conformance driver. Otherwise copies run on the transfer engine (a CUDA stream when
    available) and storage on worker threads, and sync rounds pick up what finished.
    ``victim_order``: host-side victims (evict_host, release candidates) and LRU device
    eviction order: "lru" (production: least recently used first) or "path" (the node's
    end token path, lexicographic: the specification's fixed order).
    """

    layout: KVLayout = field(default_factory=KVLayout)
    device_pages: int = 16
    host_pages: int = 16
    policy: str = "write_through"
    storage: bool = False
    prefetch: bool = False
    mirror_release: bool = False
    duplicate_reclaim: bool = False
    single_writer: bool = False
    # Mirror release runs while host free pages < host_free_target (pool pressure).
    host_free_target: int = 1
    fail_close_after: int = 2
    # Width of the integers the digests travel in (64 in production). The fixed encoding
    # never wraps, so it always uses 64; only negated-pair-overflow computes in this width.
    digest_bits: int = 64
    variants: frozenset = frozenset()
    victim_order: str = "lru"
    manual: bool = False
    # load_back evicts device victims itself when the chain does not fit (seed 004); with
    # False the scheduler must make room first (the spec's load_back, used by conformance).
    load_back_evicts: bool = True
    # Context parallelism (seed 004 header): load_back makes its own device room with the
    # owner-lane planner of tiercheck.impl.cp (victims by contribution, ties by a strict
    # order over replicated state), whatever load_back_evicts says.
    cp_planner: bool = False
    # Owner lanes of the CP device pool: a page's lane is its path position mod cp_lanes;
    # every device allocation needs room on each lane it touches (impl/hicache/cp_load.py).
    cp_lanes: int = 1
    device: str | None = None  # None: cuda when available, else cpu
    poison_on_free: bool = True  # freed pages read as garbage at once (catches use-after-free)
    durable_capacity: int | None = None  # bound of the durable LRU (None: unbounded)
    # Anti-churn age gate: a fully durable node may be re-staged once its marks are this
    # many drain rounds old (None: never, the specification's behaviour).
    anti_churn_refresh_rounds: int | None = None
    prefetch_stop_policy: str = "best_effort"
    # timeout policy: a read times out after base + pages * per_page seconds (seed 004's
    # prefetch_timeout_base and prefetch_timeout_per_ki_token, which it scales to a page as
    # page_size / 1024 * per_ki_token); in manual mode only the driver's prefetch_timeout
    # step fires the timer. prefetch_timeout_per_page, when set, overrides the scaling.
    prefetch_timeout_base: float = 1.0
    prefetch_timeout_per_ki_token: float = 0.25
    prefetch_timeout_per_page: float | None = None
    storage_batch_pages: int | None = None
    # Check the bytes of every load-back at its ack (raises ProtocolError on a mismatch).
    verify_loads: bool = False
    # Slot allocation: "lifo" (the most recently freed first: a slot freed too early is
    # reused at once) or "lowest" (the lowest free slots: the specification's allocator,
    # so conformance can compare slot identities).
    slot_order: str = "lifo"
    # load_back refuses chains of fewer tokens (SGLang: 10); 1 loads every chain.
    load_back_threshold: int = 1

    def __post_init__(self) -> None:
        # Switches must be real booleans: "false" read from a file is truthy.
        for name in ("storage", "prefetch", "mirror_release", "duplicate_reclaim", "single_writer", "manual",
                     "load_back_evicts", "cp_planner", "poison_on_free", "verify_loads"):
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"hicache: {name} must be true or false, got {getattr(self, name)!r}")
        if self.device is not None and (not isinstance(self.device, str) or not self.device):
            raise UserError(f"hicache: device must be None or a device name such as 'cpu', got {self.device!r}")
        if not isinstance(self.layout, KVLayout):
            raise UserError(f"hicache: layout must be a KVLayout, got {self.layout!r}")
        # A host pool of 0 pages is a HiCache whose every host allocation fails (no host tier).
        for name, least in (("device_pages", 1), ("host_pages", 0)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < least:
                raise UserError(f"hicache: {name} must be an int >= {least}, got {v!r}")
        if self.policy not in POLICIES:
            raise UserError(f"hicache: policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.victim_order not in VICTIM_ORDERS:
            raise UserError(
                f"hicache: victim_order must be one of {', '.join(VICTIM_ORDERS)}, got {self.victim_order!r}"
            )
        if self.prefetch_stop_policy not in PREFETCH_POLICIES:
            raise UserError(
                f"hicache: prefetch_stop_policy must be one of {', '.join(PREFETCH_POLICIES)}, "
                f"got {self.prefetch_stop_policy!r}"
            )
        if not isinstance(self.digest_bits, int) or not 2 <= self.digest_bits <= 64:
            raise UserError(f"hicache: digest_bits must be an int in 2..64, got {self.digest_bits!r}")
        # fail_close_after 0 would close a rank before any mismatch: the spec starts at 1.
        for name, least in (("host_free_target", 0), ("fail_close_after", 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < least:
                raise UserError(f"hicache: {name} must be an int >= {least}, got {v!r}")
        if self.slot_order not in ("lifo", "lowest"):
            raise UserError(f"hicache: slot_order must be lifo or lowest, got {self.slot_order!r}")
        v = self.load_back_threshold
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise UserError(f"hicache: load_back_threshold must be a positive int, got {v!r}")
        for name in ("durable_capacity", "anti_churn_refresh_rounds", "storage_batch_pages"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise UserError(f"hicache: {name} must be None or a positive int, got {v!r}")
        if not isinstance(self.cp_lanes, int) or isinstance(self.cp_lanes, bool) or self.cp_lanes < 1:
            raise UserError(f"hicache: cp_lanes must be a positive int, got {self.cp_lanes!r}")
        for name in ("prefetch_timeout_base", "prefetch_timeout_per_ki_token", "prefetch_timeout_per_page"):
            v = getattr(self, name)
            if v is None and name == "prefetch_timeout_per_page":
                continue
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v < float("inf"):
                raise UserError(f"hicache: {name} must be a finite number >= 0, got {v!r}")
        if self.prefetch and not self.storage:
            raise UserError("hicache: prefetch needs storage")
        if self.mirror_release and not self.storage:
            raise UserError("hicache: mirror_release needs storage")
        object.__setattr__(self, "variants", check_variants(self.variants))

    # -- derived ---------------------------------------------------------------------------

    @property
    def write_back(self) -> bool:
        return self.policy == "write_back"

    @property
    def write_threshold(self) -> int:
        return 2 if self.policy == "write_through_selective" else 1

    @property
    def timeout_per_page(self) -> float:
        """Seconds of prefetch timer allowance per page (seed 004: page_size / 1024 *
        prefetch_timeout_per_ki_token, unless prefetch_timeout_per_page overrides it)."""
        if self.prefetch_timeout_per_page is not None:
            return self.prefetch_timeout_per_page
        return self.layout.page_size / 1024 * self.prefetch_timeout_per_ki_token

    def has(self, variant: str) -> bool:
        return variant in self.variants

    @property
    def mirror_release_on(self) -> bool:
        """Seed 000's release protocol runs (write-through + storage, not starved)."""
        return (
            self.mirror_release
            and self.storage
            and not self.write_back
            and not self.has("host-starvation")
        )

    @property
    def wire_bits(self) -> int:
        return self.digest_bits if self.has("negated-pair-overflow") else 64

    @property
    def reclaims_duplicates(self) -> bool:
        return self.write_back and self.duplicate_reclaim

    def with_(self, **changes) -> "HiCacheConfig":
        return replace(self, **changes)

"""The constants of a model (what TLA+ calls CONSTANTS) and the page universe they imply.

A request is a path of pages from the root of the radix tree. A page is identified by its
whole path prefix (that is what HiCache's chained page hash is), so two requests that share
a prefix share those pages, and a node is a run of consecutive pages on one path. Pages are
numbered 0..N-1 in lexicographic order of their token paths; ``parent[p]`` is the page
before ``p`` on its path (-1 for a page that hangs off the root).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

POLICIES = ("write_through", "write_through_selective", "write_back")
# Host-side victim order: "path" (the node's end page id, a fixed order over replicated
# state) or "lru" (least recently used first, by the replicated logical access clock).
VICTIM_ORDERS = ("path", "lru")
# Prefetch stop policies (seed 004 can_terminate_prefetch): best_effort terminates at any
# check; wait_complete only once every rank's read has completed; timeout once every rank's
# read completed or its timer fired (MAX vote; spec/prefetch_end.py).
PREFETCH_STOPS = ("best_effort", "wait_complete", "timeout")

# Environment faults a model may switch on (each adds nondeterminism, none is a bug).
FAULTS = {
    "partial_storage": "a storage backup may complete only a prefix of its pages (per rank)",
    "store_loss": "the store may lose an acked key later (eviction, master restart)",
    "alloc_asymmetry": "a host allocation may fail on a strict subset of ranks",
    "registry_skew": "a rank's duplicate registry order may drift from its peers'",
}


def constant(default, doc: str, *, twin: str = "", symmetry: bool = True, proofs: bool = True,
             bounds: Optional[Tuple[int, int]] = None, option: bool = False):
    """A Config field with what the rest of tiercheck needs to know about it.

    ``twin``: the TLA+ twin's CONSTANT for it ("" when tla/HiCache.tla does not model it:
    a model that sets it away from its default is refused by `tiercheck tla`).
    ``symmetry``: its effect on page order was reviewed for prefix relabelings
    (models/symmetry.py; an unreviewed field set away from its default turns them off).
    ``proofs``: the z3 encoding models it (proofs/scope.py refuses it otherwise).
    ``bounds``: the range a model file may give an integer. ``option``: a deliberate
    behaviour of another HiCache version (docs/spec.md, "Options"), off in the seeds.
    """
    meta = {"doc": doc, "twin": twin, "symmetry": symmetry, "proofs": proofs,
            "bounds": bounds, "option": option}
    return field(default=default, metadata=meta)


def _option(doc: str, default=False, bounds=None, twin: str = ""):
    # An option of another HiCache version: the proofs do not model it, nobody reviewed
    # its page-order dependence, and the twin models only those that name a ``twin``.
    return constant(default, doc, twin=twin, symmetry=False, proofs=False, bounds=bounds, option=True)


@dataclass(frozen=True)
class Config:
    """Model constants. Every field has the default the seeds run with (features off)."""

    ranks: int = constant(1, "TP ranks", twin="NumRanks", bounds=(1, 8))
    # Each request is a tuple of page tokens; equal prefixes mean shared pages.
    requests: Tuple[Tuple[int, ...], ...] = constant(((1, 2),), "requests as page-token tuples", twin="Requests")
    device_pages: int = constant(4, "device pool size", twin="DevicePages", bounds=(1, 64))
    host_pages: int = constant(4, "host pool size", twin="HostPages", bounds=(0, 64))
    policy: str = constant("write_through", "write policy (POLICIES)", twin="Policy")
    storage: bool = constant(False, "an L3 storage tier", twin="Storage")
    prefetch: bool = constant(False, "prefetch from storage", twin="Prefetch")
    mirror_release: bool = constant(False, "seed 000's mirror release", twin="MirrorRelease")
    duplicate_reclaim: bool = constant(False, "seed 001's duplicate reclaim", twin="DuplicateReclaim")
    single_writer: bool = constant(False, "only rank 0 writes to storage", twin="SingleWriter")
    # Context-parallel load-back planner (seed 004 header): load_back plans its evictions.
    cp_planner: bool = constant(False, "seed 004's CP load-back planner", twin="CpPlanner")
    # Owner lanes of the CP device pool (seed 004): a page's lane is its path position mod
    # cp_lanes; the planner covers a per-lane deficit (spec/cp_planner.py).
    cp_lanes: int = constant(1, "CP owner lanes of the device pool", twin="CpLanes",
                             symmetry=False, bounds=(1, 8))
    faults: frozenset = constant(frozenset(), "environment faults (FAULTS)", twin="Faults")
    # Mirror release: release only while host_free < host_free_target (pool pressure).
    host_free_target: int = constant(1, "mirror release target", twin="HostFreeTarget", bounds=(0, 64))
    fail_close_after: int = constant(2, "mismatches before a rank closes", twin="FailCloseAfter", bounds=(1, 16))
    # Width of the machine integers the digests travel in (64 in production; small here
    # so the explicit checker can reach the wrap-around).
    digest_bits: int = constant(16, "digest width in bits", twin="DigestBits", bounds=(2, 64))
    # Prefetch termination (spec/prefetch.py): the stop policy each rank votes with.
    prefetch_stop: str = constant("best_effort", "prefetch stop policy (PREFETCH_STOPS)", twin="PrefetchStop")
    # How else a prefetch ends (spec/prefetch_end.py): the scheduler revokes it on every
    # rank; a rank's read fails midway and that rank marks the operation terminated.
    prefetch_revoke: bool = constant(False, "the scheduler may revoke an in-flight prefetch",
                                     symmetry=False, twin="PrefetchRevoke")
    prefetch_read_fail: bool = constant(False, "a rank's prefetch read may fail midway (mark_terminate)",
                                        symmetry=False, twin="PrefetchReadFail")
    # Seed 000's durable LRU (spec/durable.py): its bound in pages (0: unbounded) and the
    # anti-churn age gate in drain rounds (0: a fully durable node is never staged again).
    durable_capacity: int = constant(0, "durable LRU bound in pages (0: unbounded)", twin="DurableCapacity",
                                     symmetry=False, bounds=(0, 64))
    refresh_rounds: int = constant(0, "anti-churn age gate in drain rounds (0: none)", twin="RefreshRounds",
                                   symmetry=False, bounds=(0, 8))
    # Bounds that keep the state space finite.
    max_lock: int = constant(3, "lock/reference bound", twin="MaxLock", bounds=(1, 16))
    variants: frozenset = constant(frozenset(), "bug variants (spec/variants.py)", twin="Variants")
    # Options: deliberate behaviours of other HiCache versions (docs/spec.md, "Options").
    # Every default is the seeds' protocol; models/library/sglang/ sets SGLang 0.5.23's.
    backup_chain: bool = _option("write_through: ancestors first, stop at the first rejection", twin="BackupChain")
    evict_host_shortfall: bool = _option("host admission evicts need - free, not need", twin="EvictHostShortfall")
    backup_path_lock: bool = _option("a write-through backup locks the node's whole path", twin="BackupPathLock")
    storage_per_node: bool = _option("a D->H ack starts one H->L3 backup per node it covers", twin="StoragePerNode")
    lbp_write_back_only: bool = _option("load_back_pending is marked under write_back only", twin="LbpWriteBackOnly")
    settled_duplicates: bool = _option("loading nodes are no duplicates; the load ack is a birth", twin="SettledDuplicates")
    wb_drop_unbacked: bool = _option("write_back: a victim whose backup is rejected is dropped", twin="WbDropUnbacked")
    load_back_threshold: int = _option("load-backs of fewer tokens are refused", 1, (1, 16), twin="LoadBackThreshold")
    prefetch_at_hit: bool = _option("prefetch takes host slots for the ranks' MIN storage hit, reads in order, "
                                    "refills host copies; an insert counts a hit on the nodes it un-evicts",
                                    twin="PrefetchAtHit")
    # Workload features beyond the seeds' actions (neither the twin nor the proofs model
    # them yet; tiercheck tla and tiercheck prove refuse a model that sets them).
    # Tokens per page: requests are token sequences, pages their page_size-token chunks
    # (a partial last page is never cached), pools count pages, thresholds count tokens.
    page_size: int = constant(1, "tokens per page", twin="PageSize", bounds=(1, 8), symmetry=False)
    victim_order: str = constant("path", "host-side victim order (VICTIM_ORDERS)", twin="VictimOrder",
                                 symmetry=False)
    slots: bool = constant(False, "slot identities: which slot holds each page, free slot sets",
                           twin="Slots", symmetry=False)
    request_locks: bool = constant(False, "running requests lock their matched device prefix "
                                   "(lock_request / unlock_request)", twin="RequestLocks", symmetry=False)
    # Eviction the scheduler's steps do by themselves (seed 004's evict(num_tokens), LRU
    # by victim order) instead of separate evict steps (spec/eviction.py evict_lru).
    insert_evicts: bool = constant(False, "an insert without device room first evicts leaves by victim order "
                                   "(the scheduler's evict(num_tokens))", twin="InsertEvicts", symmetry=False)
    load_back_evicts: bool = constant(False, "a load_back without device room first evicts leaves by victim "
                                      "order (HiRadixCache.load_back's retry with eviction)", twin="LoadBackEvicts",
                                      symmetry=False)

    def pages_of(self, req) -> int:
        """Whole pages of a request (what insert caches)."""
        return len(req) // self.page_size

    @property
    def write_threshold(self) -> int:
        return 2 if self.policy == "write_through_selective" else 1

    @property
    def write_back(self) -> bool:
        return self.policy == "write_back"

    @property
    def lru(self) -> bool:
        return self.victim_order == "lru"

    def has(self, variant: str) -> bool:
        return variant in self.variants

    def fault(self, name: str) -> bool:
        return name in self.faults


class Constant(NamedTuple):
    """One Config field and its metadata (see ``constant``)."""

    name: str
    type: str  # the annotation: "bool", "int", ...
    default: object
    doc: str
    twin: str
    symmetry: bool
    proofs: bool
    bounds: Optional[Tuple[int, int]]
    option: bool


def _constants() -> Dict[str, Constant]:
    out = {}
    for f in fields(Config):
        if not f.metadata:  # a field added without saying how the rest of tiercheck treats it
            raise TypeError(f"Config.{f.name}: declare it with constant() (docs/extending.md)")
        out[f.name] = Constant(f.name, str(f.type), f.default, **f.metadata)
    return out


CONSTANTS: Dict[str, Constant] = _constants()


class Unmodelled(NamedTuple):
    """A setting of fields the TLA+ twin or the z3 encoding model (``twin``, ``proofs``)
    that they do not model yet: a spec feature newer than them. Each tool refuses it in one
    line, with its reason ("" where the tool models it or refuses the field anyway)."""

    applies: Callable  # Config -> bool
    option: str  # as the refusal names it
    twin: str
    proofs: str
    actions: Tuple[str, ...] = ()  # the spec actions only this setting enables


UNMODELLED: Tuple[Unmodelled, ...] = ()  # none today: both model every setting of their fields


def changed(cfg: Config, keep=lambda c: True) -> List[str]:
    """The fields ``keep`` selects that ``cfg`` sets away from their default."""
    return [c.name for c in CONSTANTS.values() if keep(c) and getattr(cfg, c.name) != c.default]


@dataclass(frozen=True)
class Pages:
    """The page universe of a config: ids, path parents, and each request's page list."""

    paths: Tuple[Tuple[int, ...], ...]  # page id -> full token path (its hash identity)
    parent: Tuple[int, ...]  # page id -> previous page on the path, -1 at the root
    children: Tuple[Tuple[int, ...], ...]  # page id -> pages whose parent it is
    roots: Tuple[int, ...]  # pages hanging directly off the root
    request_pages: Tuple[Tuple[int, ...], ...]  # request index -> its page ids in order
    index: dict = field(compare=False, hash=False, repr=False)  # path tuple -> page id
    chains: dict = field(default_factory=dict, compare=False, hash=False, repr=False)
    page_size: int = 1  # tokens per page: a page's path holds depth * page_size tokens

    @property
    def count(self) -> int:
        return len(self.paths)

    def chain(self, start: int, end: int) -> Tuple[int, ...]:
        """Pages from ``start`` down to ``end`` inclusive (``start`` is an ancestor-or-self)."""
        key = (start, end)
        hit = self.chains.get(key)
        if hit is None:
            hit = self.chains[key] = self._chain(start, end)
        return hit

    def _chain(self, start: int, end: int) -> Tuple[int, ...]:
        out = [end]
        p = end
        while p != start:
            p = self.parent[p]
            if p < 0:
                raise ValueError(f"page {start} is not an ancestor of page {end}")
            out.append(p)
        out.reverse()
        return tuple(out)

    def depth(self, p: int) -> int:
        return len(self.paths[p]) // self.page_size

    def tokens(self, p: int) -> Tuple[int, ...]:
        """The page's own tokens (the last page_size of its path)."""
        return self.paths[p][-self.page_size:]


def build_pages(requests: Tuple[Tuple[int, ...], ...], page_size: int = 1) -> Pages:
    """Number pages in lexicographic order of their token paths.

    A page is ``page_size`` tokens; its path is every token from the root to its end. A
    request's partial last page is not a page: SGLang caches the page-aligned prefix only
    (``cache_finished_req`` frees the tail). The order is part of the spec: host-side
    victims are taken in page-id order (unless ``victim_order`` is "lru"), and an
    implementation reproduces it from token paths alone.
    """
    ps = page_size

    def cuts(req):
        return range(ps, len(req) // ps * ps + 1, ps)

    all_paths = sorted({tuple(req[:i]) for req in requests for i in cuts(req)})
    index = {path: i for i, path in enumerate(all_paths)}
    parent = tuple(index[path[:-ps]] if len(path) > ps else -1 for path in all_paths)
    request_pages = tuple(tuple(index[tuple(req[:i])] for i in cuts(req)) for req in requests)
    children = [[] for _ in all_paths]
    for p, q in enumerate(parent):
        if q >= 0:
            children[q].append(p)
    return Pages(
        paths=tuple(all_paths),
        parent=parent,
        children=tuple(tuple(c) for c in children),
        roots=tuple(p for p, q in enumerate(parent) if q < 0),
        request_pages=request_pages,
        index=index,
        page_size=ps,
    )

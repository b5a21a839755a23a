"""The constants of a model (what TLA+ calls CONSTANTS) and the page universe they imply.

A request is a path of pages from the root of the radix tree. A page is identified by its
whole path prefix (that is what HiCache's chained page hash is), so two requests that share
a prefix share those pages, and a node is a run of consecutive pages on one path. Pages are
numbered 0..N-1 in lexicographic order of their token paths; ``parent[p]`` is the page
before ``p`` on its path (-1 for a page that hangs off the root).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Tuple

POLICIES = ("write_through", "write_through_selective", "write_back")

# Environment faults a model may switch on (each adds nondeterminism, none is a bug).
FAULTS = {
    "partial_storage": "a storage backup may complete only a prefix of its pages (per rank)",
    "store_loss": "the store may lose an acked key later (eviction, master restart)",
    "alloc_asymmetry": "a host allocation may fail on a strict subset of ranks",
    "registry_skew": "a rank's duplicate registry order may drift from its peers'",
}


@dataclass(frozen=True)
class Config:
    """Model constants. Every field has the default the seeds run with (features off)."""

    ranks: int = 1
    # Each request is a tuple of page tokens; equal prefixes mean shared pages.
    requests: Tuple[Tuple[int, ...], ...] = ((1, 2),)
    device_pages: int = 4
    host_pages: int = 4
    policy: str = "write_through"
    storage: bool = False
    prefetch: bool = False
    mirror_release: bool = False
    duplicate_reclaim: bool = False
    single_writer: bool = False
    # Context-parallel load-back planner (seed 004 header): load_back plans its evictions.
    cp_planner: bool = False
    faults: frozenset = frozenset()
    # Mirror release: release only while host_free < host_free_target (pool pressure).
    host_free_target: int = 1
    fail_close_after: int = 2
    # Width of the machine integers the digests travel in (64 in production; small here
    # so the explicit checker can reach the wrap-around).
    digest_bits: int = 16
    # Bounds that keep the state space finite.
    max_lock: int = 3
    variants: frozenset = frozenset()
    # Options: deliberate behaviours of other HiCache versions (docs/spec.md, "Options").
    # Every default is the seeds' protocol; models/library/sglang/ sets SGLang 0.5.23's.
    backup_chain: bool = False  # write_through: ancestors first, stop at the first rejection
    evict_host_shortfall: bool = False  # host admission evicts need - free, not need
    backup_path_lock: bool = False  # a write-through backup locks the node's whole path
    storage_per_node: bool = False  # a D->H ack starts one H->L3 backup per node it covers
    lbp_write_back_only: bool = False  # load_back_pending is marked under write_back only
    settled_duplicates: bool = False  # loading nodes are no duplicates; the load ack is a birth
    wb_drop_unbacked: bool = False  # write_back: a victim whose backup is rejected is dropped
    load_back_threshold: int = 1  # load-backs of fewer pages are refused

    @property
    def write_threshold(self) -> int:
        return 2 if self.policy == "write_through_selective" else 1

    @property
    def write_back(self) -> bool:
        return self.policy == "write_back"

    def has(self, variant: str) -> bool:
        return variant in self.variants

    def fault(self, name: str) -> bool:
        return name in self.faults


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
        return len(self.paths[p])


def build_pages(requests: Tuple[Tuple[int, ...], ...]) -> Pages:
    """Number pages in lexicographic order of their token paths.

    The order is part of the spec: host-side victims are taken in page-id order (standing
    for LRU), and an implementation reproduces it from token paths alone.
    """
    all_paths = sorted({tuple(req[:i]) for req in requests for i in range(1, len(req) + 1)})
    index = {path: i for i, path in enumerate(all_paths)}
    parent = tuple(index[path[:-1]] if len(path) > 1 else -1 for path in all_paths)
    request_pages = tuple(
        tuple(index[tuple(req[:i])] for i in range(1, len(req) + 1)) for req in requests
    )
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
    )

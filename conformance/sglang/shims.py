"""Per-release shims: the few places where SGLang's HiCache API changed between releases.

The adapter core (``core.SGLangRank``) is written against the newest shape and reaches
every release-dependent call through the shim chosen for the installed version. Releases
with the same API shape share a shim. Each shim lists what it expects (``REQUIRES``:
"module:Class.attr" names); a release lacking one is a one-line error naming it, never
a silently different run.

| shim | releases | differences from the next newer shape |
|---|---|---|
| ``Unified23`` | 0.5.23 - | (the core's own shape) the prefetch wait budget is a ``_StoragePrefetchWait`` per request |
| ``Unified22`` | 0.5.22 | the prefetch timeout is the wall clock since the read started (``_prefetch_timeout_check_linear_func``) |
| ``Unified21`` | 0.5.21 | the match result carries ``device_indices``; a load-back's host lock sits on its anchor only (no lock uuid) |
| ``Unified20`` | 0.5.20 | backups are submitted at insert (no ``flush_pending_backups``); the TreeCore backend is an environment variable |
| ``Unified19`` | 0.5.19 | prefetch keyed by request id strings (no ``CacheRequestHandle``: not mapped); no ``match_full_device_prefix`` (the adapter reads the device prefix itself), ``get_hash_str`` for L3 keys, ComponentType in ``unified_cache.component_type`` |
| ``Unified18`` | 0.5.18 | the device eviction walk returns the node id alone (no progress flag); the fused round has no prefetch-ack queue size |
| ``HiRadix17`` | 0.5.17 | another cache class: HiRadixCache (the default for MHA up to 0.5.18), driven by ``core_hrc.HiRadixRank``; the fused ready-count round passes its counts to ``writing_check`` / ``loading_check`` |
| ``HiRadix15`` | 0.5.15 - 0.5.16 | each check runs its own MIN all-reduce; the write_through eviction is ``_evict_write_through`` |
| ``HiRadix13`` | 0.5.13 - 0.5.14 | before the eviction rework; (0.5.13, 0.5.13.post1) ``writing_check`` returns before its all-reduce when this rank has nothing in flight |
| ``HiRadix12`` | 0.5.11 - 0.5.12.post1 | one node per write-through ack (no ``write_through_pending_id``); no collective in ``loading_check`` |
| ``HiRadix10`` | 0.5.10, 0.5.10.post1 | no attention process groups (collectives on the TP group itself) |

``Shim.core`` names the adapter core that drives the release: ``urc`` (core.py) or
``hrc`` (core_hrc.py). Older releases have no shim: ``select`` says why.
"""

from __future__ import annotations

import importlib

from tiercheck.errors import UserError

from .versions import parse

URC = "sglang.srt.mem_cache.unified_radix_cache:UnifiedRadixCache"
UTC = "sglang.srt.mem_cache.unified_cache.unified_tree_core:UnifiedTreeCore"
UTN = "sglang.srt.mem_cache.unified_cache.unified_tree_core:UnifiedTreeNode"
HCC = "sglang.srt.managers.cache_controller:HiCacheController"

# Everything the core and the controls use on every supported release.
COMMON = (
    f"{URC}.init_hicache", f"{URC}.match_prefix", f"{URC}.insert", f"{URC}.evict", f"{URC}.load_back",
    f"{URC}.ready_to_load_host_cache", f"{URC}._sync_hicache_ready_counts", f"{URC}.writing_check",
    f"{URC}.loading_check", f"{URC}._drain_storage_control_queues_impl", f"{URC}._evict_device_next_node",
    f"{URC}.evict_host", f"{URC}._execute_kv_backup",
    f"{UTC}._release_full_host_duplicate", f"{UTC}._reclaim_full_host_duplicates", f"{UTC}.node_by_id",
    f"{UTC}._split_node", f"{UTC}._demote", f"{UTC}.finish_write_through", f"{UTC}.commit_load_back",
    f"{UTC}.finish_load_back",
    f"{HCC}.start_writing", f"{HCC}.start_loading", f"{HCC}.write", f"{HCC}.write_storage",
    f"{HCC}._page_backup", f"{HCC}._stop_storage_threads",
)


class Shim:
    """The newest API shape (0.5.23 onwards)."""

    name = "Unified23"
    first = "0.5.23"
    # Why the adapter cannot drive prefetch from storage on this release (None: it can).
    no_prefetch = None
    core = "urc"
    REQUIRES = COMMON + (
        f"{URC}.flush_pending_backups", f"{URC}.path_device_indices", f"{UTC}.match_full_device_prefix",
        "sglang.srt.mem_cache.utils:get_storage_hash_str",
    )

    def python_tree_core(self) -> dict:
        """CacheInitParams arguments choosing the Python TreeCore (the adapter drives it)."""
        return {"tree_core_backend": "python"}

    def device_prefix_len(self, rank, key) -> int:
        """Tokens of ``key`` resident on device, read without changing the tree."""
        return rank.core.match_full_device_prefix(key)[0]

    def prefix_indices(self, rank, match):
        return rank.cache.path_device_indices(match.last_device_node)

    def flush_backups(self, rank) -> None:
        rank.cache.flush_pending_backups()

    def write_is_merged(self) -> bool:
        """Whether HCC.write defers a backup until a flush (its ``flush`` argument)."""
        return True

    # Whether URC._evict_device_next_node returns (node id, progress) or the node id alone.
    evict_walk_returns_progress = True

    def drain_storage(self, cache, sizes, extra_pools) -> None:
        """The storage part of check_hicache_events with the fused round's queue sizes:
        (storage hits, prefetch acks, backup acks, releases, *extra pools' releases)."""
        n_hit, n_ack, n_backup, n_release = sizes[:4]
        cache._drain_storage_control_queues_impl(
            n_storage_hit=n_hit, n_ack_prefetch=n_ack, n_backup=n_backup, n_release=n_release,
            extra_release_counts=dict(zip(extra_pools, sizes[4:])), log_metrics=False)

    hash_function = "get_storage_hash_str"

    def storage_key(self, tokens, parent_key):
        """The L3 key of a one-token page: the release's chained page hash."""
        from array import array

        from sglang.srt.mem_cache import utils
        from sglang.srt.mem_cache.radix_cache import RadixKey

        return getattr(utils, self.hash_function)(RadixKey(array("q", tokens)), parent_key, page_size=1)[0]

    def anchor_holds(self, rank) -> dict:
        """Host locks an in-flight load-back holds, per node id: from the anchor up to the
        node carrying the lock's uuid (a split moves that boundary up)."""
        from .core import full_component

        full, holds = full_component(), {}
        for anchor, (_node, _lock, host_params) in rank.cache.ongoing_load_back.items():
            uuid = host_params.get_lock_uuid(full, lock_host=True)
            x = rank.core.node_by_id(anchor)
            while x is not None:
                holds[x.id] = holds.get(x.id, 0) + 1
                if x.component_data[full].metadata.get("host_uuid") == uuid:
                    break
                x = x.parent
        return holds

    def expire_prefetch(self, cache, handle, operation) -> None:
        """Spend the timeout policy's wait budget of one prefetch on this rank (the
        spec's "terminate any time"; the MAX vote in check_prefetch_progress then cuts)."""
        from sglang.srt.mem_cache.unified_radix_cache import _StoragePrefetchWait

        cache._storage_prefetch_wait.setdefault(handle, _StoragePrefetchWait()).expired = True



class Unified22(Shim):
    name, first = "Unified22", "0.5.22"

    def expire_prefetch(self, cache, handle, operation) -> None:
        """The budget is the wall clock since the read started: start it long ago."""
        operation.start_time = float("-inf")


class Unified21(Unified22):
    name, first = "Unified21", "0.5.21"
    REQUIRES = tuple(r for r in Shim.REQUIRES if not r.endswith(".path_device_indices"))

    def prefix_indices(self, rank, match):
        return match.device_indices

    def anchor_holds(self, rank) -> dict:
        """The host lock sits on the anchor node alone (a split leaves it on the lower half)."""
        return {anchor: 1 for anchor in rank.cache.ongoing_load_back}


class Unified20(Unified21):
    name, first = "Unified20", "0.5.20"
    REQUIRES = tuple(r for r in Unified21.REQUIRES if not r.endswith(".flush_pending_backups"))

    def python_tree_core(self) -> dict:
        # No tree_core_backend parameter yet: the backend is an environment variable whose
        # default is the Python TreeCore; the adapter pins it.
        import os

        os.environ["SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND"] = "python"
        return {}

    def flush_backups(self, rank) -> None:
        return None  # each backup is submitted by insert itself

    def write_is_merged(self) -> bool:
        return False



class Unified19(Unified20):
    name, first = "Unified19", "0.5.19"
    no_prefetch = "its prefetch is keyed by request id strings (CacheRequestHandle comes in 0.5.20)"
    REQUIRES = tuple(r for r in Unified20.REQUIRES
                     if not r.endswith((".match_full_device_prefix", ":get_storage_hash_str"))) + (
        "sglang.srt.mem_cache.utils:get_hash_str",)


    hash_function = "get_hash_str"

    def device_prefix_len(self, rank, key) -> int:
        return rank.device_prefix_walk(list(key.token_ids))


class Unified18(Unified19):
    name, first = "Unified18", "0.5.18"
    evict_walk_returns_progress = False

    def drain_storage(self, cache, sizes, extra_pools) -> None:
        """No prefetch-ack queue in the round yet: (hits, backup acks, releases, *extra)."""
        n_hit, n_backup, n_release = sizes[:3]
        cache._drain_storage_control_queues_impl(
            n_storage_hit=n_hit, n_backup=n_backup, n_release=n_release,
            extra_release_counts=dict(zip(extra_pools, sizes[3:])), log_metrics=False)


HRC = "sglang.srt.mem_cache.hiradix_cache:HiRadixCache"


class HiRadix13:
    """HiRadixCache with per-ack write-through bookkeeping (``ongoing_write_through``
    entries of (lock node, backup length, publish nodes); ``write_through_pending_id``)
    and a MIN all-reduce in both ``writing_check`` and ``loading_check`` (0.5.13:
    ``writing_check`` still returns before it when this rank has nothing in flight)."""

    name, first, last, core = "HiRadix13", "0.5.13", "0.5.14", "hrc"
    no_prefetch = "HiRadixCache's L3 storage is not mapped"
    REQUIRES = (
        f"{HRC}.match_prefix", f"{HRC}.insert", f"{HRC}.evict", f"{HRC}.evict_host", f"{HRC}.load_back",
        f"{HRC}.ready_to_load_host_cache", f"{HRC}.writing_check", f"{HRC}.loading_check",
        f"{HRC}._finish_write_through_ack", f"{HRC}.write_backup", f"{HRC}._all_reduce_attn_groups",
        f"{HCC}.start_writing", f"{HCC}.start_loading", f"{HCC}.write",
    )

    def device_prefix_len(self, rank, key) -> int:
        return rank.device_prefix_walk(list(key.token_ids))

    def prefix_indices(self, rank, match):
        return match.device_indices

    def flush_backups(self, rank) -> None:
        return None  # write() submits each backup at once

    def group_params(self, group) -> dict:
        """CacheInitParams' process groups: the collectives run on the attention groups."""
        return {"tp_cache_group": group, "attn_cp_cache_group": group, "attn_tp_cache_group": group}

    def sync(self, cache, part: str) -> None:
        """One part of check_hicache_events, with the release's own collective."""
        cache.writing_check() if part == "writing_check" else cache.loading_check()

    def host_writing(self, cache, node) -> bool:
        """Whether the node's host copy waits for its D->H ack."""
        return node.write_through_pending_id is not None

    def write_span(self, cache, ack_id):
        """(top node, lowest node) of what one D->H ack publishes."""
        _lock_node, _backup_len, publish = cache.ongoing_write_through[ack_id]
        return publish[0], publish[-1]


class HiRadix15(HiRadix13):
    """After the eviction rework (``_evict_write_through`` over ``_make_eviction_heap``,
    the same victim order and stop rule for write_through); 0.5.16 reads the ack records
    by attribute (the held-ack wrapper keeps them NamedTuples)."""

    name, first, last = "HiRadix15", "0.5.15", "0.5.16"
    REQUIRES = HiRadix13.REQUIRES + (f"{HRC}._evict_write_through", f"{HRC}._make_eviction_heap")


class HiRadix17(HiRadix15):
    """The scheduler's check_hicache_events does one fused MIN round
    (``_sync_hicache_ready_counts``) and passes the counts to ``writing_check`` /
    ``loading_check`` (their own collective runs only without a count)."""

    name, first, last = "HiRadix17", "0.5.17", "0.5.17"
    REQUIRES = HiRadix15.REQUIRES + (f"{HRC}._sync_hicache_ready_counts",)

    def sync(self, cache, part: str) -> None:
        w, l, _storage = cache._sync_hicache_ready_counts()
        if part == "writing_check":
            cache.writing_check(finish_count=w)
        else:
            cache.loading_check(finish_count=l)


class HiRadix12(HiRadix13):
    """``ongoing_write_through`` maps an ack id to the one node it was submitted for (a
    split leaves the upper half out); ``loading_check`` has no collective."""

    name, first, last = "HiRadix12", "0.5.11", "0.5.12.post1"
    REQUIRES = tuple(r for r in HiRadix13.REQUIRES if not r.endswith("._finish_write_through_ack"))

    def host_writing(self, cache, node) -> bool:
        return node.id in cache.ongoing_write_through

    def write_span(self, cache, ack_id):
        node = cache.ongoing_write_through[ack_id]
        return node, node


class HiRadix10(HiRadix12):
    """No attention groups yet: the collectives run on the TP group itself
    (``torch.distributed.all_reduce(..., group=self.tp_group)`` when it has more than one
    rank)."""

    name, first, last = "HiRadix10", "0.5.10", "0.5.10.post1"
    REQUIRES = tuple(r for r in HiRadix12.REQUIRES
                     if not r.endswith("._all_reduce_attn_groups"))

    def group_params(self, group) -> dict:
        return {"tp_cache_group": group}


SHIMS = (Shim(), Unified22(), Unified21(), Unified20(), Unified19(), Unified18())  # newest first
HRC_SHIMS = (HiRadix17(), HiRadix15(), HiRadix13(), HiRadix12(), HiRadix10())  # newest first
NO_SHIM = ()  # (first release, why): releases in the supported range without a shim


def select(version: str) -> Shim:
    """The shim for a release, or a one-line UserError saying why there is none."""
    v = parse(version)
    for shim in SHIMS:
        if v >= parse(shim.first):
            return shim
    for shim in HRC_SHIMS:
        if parse(shim.first) <= v <= parse(shim.last):
            return shim
    for first, why in NO_SHIM:
        if v >= parse(first):
            raise UserError(f"sglang {version}: {why}")
    raise UserError(f"sglang {version}: older than every supported release")


def component_type():
    """ComponentType: in unified_cache.components.base from 0.5.20, component_type before."""
    for module in ("sglang.srt.mem_cache.unified_cache.components.base",
                   "sglang.srt.mem_cache.unified_cache.component_type"):
        found = resolve(f"{module}:ComponentType")
        if found is not None:
            return found
    raise UserError("this sglang has no unified_cache ComponentType (expected by every shim)")


def rank_class(version: str):
    """The adapter core class that drives this release."""
    if select(version).core == "hrc":
        from .core_hrc import HiRadixRank

        return HiRadixRank
    from .core import SGLangRank

    return SGLangRank


def cache_module(version: str) -> str:
    """The module holding the release's HiCache class (imported before gloo ranks fork)."""
    return HRC.partition(":")[0] if select(version).core == "hrc" else URC.partition(":")[0]


def resolve(name: str):
    """'pkg.mod:Class.attr' -> the object, or None."""
    module, _, attrs = name.partition(":")
    try:
        obj = importlib.import_module(module)
    except ImportError:
        return None
    for part in attrs.split(".") if attrs else ():
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def check(shim: Shim, version: str) -> None:
    """Every name the shim expects exists in the installed release (one-line error if not)."""
    for name in shim.REQUIRES:
        if resolve(name) is None:
            raise UserError(f"sglang {version} lacks {name} (expected by the adapter's {shim.name} shim)")


def installed() -> tuple[str, Shim]:
    """The installed sglang's version and its checked shim."""
    import importlib.metadata as md

    try:
        version = md.version("sglang")
    except md.PackageNotFoundError:
        raise UserError("--impl sglang needs an SGLang lane: `tiercheck lane setup sglang==X.Y.Z`, then run "
                        "tiercheck with `$(tiercheck lane python sglang==X.Y.Z) -m tiercheck ...`") from None
    shim = select(version)
    from . import patches

    patches.apply()
    check(shim, version)
    return version, shim


def probe_command() -> str:
    """A `python -c` line that fails unless this lane's sglang imports and fits its shim."""
    return ("import sys; from tiercheck.errors import UserError\n"
            "from tiercheck.conformance.sglang.shims import installed\n"
            "try: v, s = installed()\n"
            "except UserError as e: sys.exit(f'lane check: {e}')\n"
            "print('sglang', v, 'shim', s.name)")

"""The adapter for tiercheck's own reference implementation (tiercheck.impl.hicache).

It builds the implementation from the model's constants with the settings conformance
needs (the model's page size, host-side victims in the spec's page order, manual completion
of copies and storage operations), performs each spec action through the group's
driver API, and maps snapshots through tiercheck.conformance.refinement.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace

from tiercheck.impl.collective import CollectiveError
from tiercheck.impl.hicache import FileStorage, HiCacheConfig, LockstepHiCache, ReplicaDivergenceError
from tiercheck.impl.hicache import metrics as mt
from tiercheck.impl.hicache.errors import DeviceFullError, ProtocolError
from tiercheck.impl.kvdata import KVLayout
from tiercheck.errors import UserError
from tiercheck.spec.config import changed
from tiercheck.spec.model import Model

from . import counters, halt_report, wire_digest
from .refinement import concretize, refine
from .serving import match_problems

LAYOUT = KVLayout(layers=1, heads=1, head_dim=4, page_size=1)


# The options of other HiCache versions (spec/config.py, option=True) that the reference
# implements; it follows the seeds, so a model setting any other one would report the
# option's behaviour as a disagreement.
IMPLEMENTED_OPTIONS = frozenset({"load_back_threshold"})


def unimplemented_options(cfg) -> list:
    """The option fields ``cfg`` sets that the reference implementation does not have."""
    return [n for n in changed(cfg, lambda c: c.option) if n not in IMPLEMENTED_OPTIONS]


def impl_config(cfg, variants=frozenset(), manual: bool = True) -> HiCacheConfig:
    missing = unimplemented_options(cfg)
    if missing:
        raise UserError(f"the reference implementation follows the seeds and lacks the option(s) "
                        f"{', '.join(missing)} this model sets (behaviours of another HiCache version, "
                        f"docs/spec.md \"Options\"); check the model with `tiercheck check`, or conform "
                        f"an implementation that has them (--impl sglang)")
    return HiCacheConfig(
        layout=replace(LAYOUT, page_size=cfg.page_size),
        load_back_threshold=cfg.load_back_threshold,
        device_pages=cfg.device_pages,
        host_pages=cfg.host_pages,
        policy=cfg.policy,
        storage=cfg.storage,
        prefetch=cfg.prefetch and cfg.storage,
        mirror_release=cfg.mirror_release and cfg.storage,
        duplicate_reclaim=cfg.duplicate_reclaim,
        single_writer=cfg.single_writer,
        host_free_target=cfg.host_free_target,
        fail_close_after=cfg.fail_close_after,
        digest_bits=cfg.digest_bits,
        variants=frozenset(cfg.variants) | frozenset(variants),
        victim_order=cfg.victim_order,
        slot_order="lowest" if cfg.slots else "lifo",  # comparable slot identities
        manual=manual,  # False: copies complete on query, storage threads (conformance.auto_mode)
        # The spec's scheduler evicts with separate evict steps, unless load_back evicts
        # by victim order itself (load_back_evicts) ...
        load_back_evicts=cfg.load_back_evicts,
        cp_planner=cfg.cp_planner,  # ...or plans its own victims (seed 004)
        cp_lanes=cfg.cp_lanes,
        durable_capacity=cfg.durable_capacity or None,
        prefetch_stop_policy=cfg.prefetch_stop,
        anti_churn_refresh_rounds=cfg.refresh_rounds or None,
        device="cpu",
    )


class ReferenceDriver:
    name = "reference"

    def __init__(self, cfg, variants=frozenset(), backend: str = "lockstep", timeout: float = None,
                 driver_timeout: float = None, manual: bool = True, storage=None, overrides=None):
        # Lock-step detects a skipped collective at once (a rank that returns early fails
        # its waiting peers), so its timeout only catches real stalls; gloo needs the
        # timeout to notice a hang at all.
        if timeout is None:
            timeout = 30.0 if backend == "lockstep" else 5.0
        self.model = Model(cfg)
        # ``storage``: the backend of a storage model (e.g. a MooncakeStorage); default a file store.
        self._tmp = None
        if not cfg.storage:
            storage = None
        elif storage is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tiercheck-store-")
            storage = FileStorage(self._tmp.name, fsync=False)
        conf = impl_config(cfg, variants, manual)
        if overrides:  # implementation settings the spec has no constant for (e.g. verify_loads)
            conf = replace(conf, **overrides)
        if backend == "gloo":
            from tiercheck.impl.hicache.gloo import GlooHiCache

            self.group = GlooHiCache(conf, cfg.ranks, storage, collective_timeout=timeout,
                                     driver_timeout=driver_timeout)
        else:
            self.group = LockstepHiCache(conf, cfg.ranks, storage, timeout=timeout)
        self.hung = ""
        self.halted = ""
        self._halt_problems = []  # what the halt message got wrong (reported by the next verify)
        self._counters = [{} for _ in range(cfg.ranks)]  # each rank's metrics at the last verify
        self._started = None  # per rank, what the last step's prefetch_from_storage returned
        self._returned = None  # what the last step's call returned (per rank for group steps)
        self._last, self._last_fresh = None, False
        # The refined state before and after the last step, and the step, for the counters.
        self._spec_now = self.model.init_states()[0]
        self._spec_before, self._action = None, None
        # The per-step checks (counters, returns) compare a step's before and after: the
        # before is known only when state() and verify() ran after the previous step (a
        # scenario may apply two steps in a row: then that second step is not judged).
        self._checked, self._before_known = True, True

    def apply(self, action) -> None:
        self._started, self._last_fresh, self._returned = None, False, None
        self._spec_before, self._action = self._spec_now, action
        self._before_known, self._checked = self._checked, False
        if self.hung or self.halted:
            return  # the group stopped; the spec has no successors either
        try:
            got = self._perform(action)
            self._returned = got
            if action.name == "prefetch_from_storage":
                self._started = got
        except (DeviceFullError, ProtocolError):
            # The implementation refused a step its own guards do not allow: no step (the
            # comparison that follows still catches a refusal the spec disagrees with, or
            # one that left side effects).
            pass
        except CollectiveError:
            # A rank waited for peers that skipped the collective: the TP group hangs.
            self.hung = action.name
        except ReplicaDivergenceError as exc:
            self.halt(exc, action.name)

    def halt(self, exc: ReplicaDivergenceError, what: str) -> None:
        """A sync round found the replicas diverged: the group stopped. What it told the
        user is checked against the ranks when they run in this process
        (tiercheck.conformance.halt_report; the gloo ranks are other processes)."""
        self.halted = str(exc) or what
        ranks = getattr(self.group, "ranks", None)
        if ranks:
            self._halt_problems = halt_report.problems(str(exc), ranks, self.group.snapshot(store=False),
                                                       self.group.cfg)

    def _perform(self, action):
        return self.group.apply(action.name, **concretize(self.model, action))

    def state(self):
        snaps = self.group.snapshot() if not self.hung else self._last
        self._last, self._last_fresh = snaps, True
        self._spec_now = refine(self.model, snaps, hung=self.hung, halted=self.halted)
        return self._spec_now

    def verify(self):
        if self.hung or self.halted:
            out, self._halt_problems = self._halt_problems, []
            return out
        return self.group.verify() + self._reported_problems()

    def _reported_problems(self) -> list:
        """What a rank reports besides its state, against its own state: the index a
        prefetch_from_storage returned, the host-pool gauges, metric names and labels,
        counters that are whole numbers of tokens and never go down, and each counter's
        increment over the step against the spec's state change
        (tiercheck.conformance.counters), and the reclaim digest pair each rank would put
        on the wire (tiercheck.conformance.wire_digest)."""
        out = []
        host_pages = self.group.cfg.host_pages
        # The snapshot state() just took, if no step came between (conformance asks for
        # the state, then verify, after every step).
        snaps = self._last if self._last_fresh else self.group.snapshot(store=False)
        for r, (index, snap) in enumerate(zip(self._started or (), snaps)):
            # prefetch_from_storage returns the new prefetch's index in the queue (None: none started)
            if index is not None and index != len(snap["pq"]) - 1:
                out.append(f"rank {r}: prefetch_from_storage returned index {index!r}, "
                           f"the prefetch queue has {len(snap['pq'])}")
        now = self.group.metrics()
        out += counters.name_problems(now)
        if self._action is not None and self._last_fresh and self._before_known:
            out += counters.problems(self.model, self._spec_before, self._spec_now, self._action, self._counters, now)
            out += counters.returned_problems(self.model, self._spec_before, self._spec_now, self._action,
                                              self._returned)
        self._action = None
        out += wire_digest.problems(self.model, snaps)  # the snapshot state() took, or a fresh one
        if self._last_fresh and self.model.cfg.victim_order != "lru":
            # match_prefix refreshes the access order it walks: unobservable unless LRU orders victims.
            out += match_problems(self.model, self._spec_now, self.group)
        for r, (m, snap) in enumerate(zip(now, snaps)):
            page = self.group.cfg.layout.page_size  # tokens per page (the model's page_size)
            total = host_pages * page
            want = {mt.HOST_TOTAL: total, mt.HOST_USED: total - snap["host_free"] * page}
            for key, value in want.items():
                if m.get(key) != value:
                    out.append(f"rank {r}: metric {key} = {m.get(key)!r}, the host pool says {value}")
            for key, value in m.items():
                if key in want:
                    continue
                was = self._counters[r].get(key, 0)
                if type(value) is not int or value < was:
                    out.append(f"rank {r}: counter {key} = {value!r} (was {was})")
            self._counters[r] = dict(m)
        self._checked = self._last_fresh  # the next step's before: this state, these counters
        return out

    def digest_problems(self) -> list:
        """The reclaim digest pairs of the snapshot the last state() took, against the
        spec's encoding (tiercheck.conformance.wire_digest)."""
        return wire_digest.problems(self.model, self._last or [])

    def close(self) -> None:
        try:
            self.group.close()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()

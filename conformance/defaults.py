"""The default conformance campaign: every shipped feature, within a time budget.

``tiercheck conform --impl X`` with no ``--model`` runs each model below, and
``tiercheck generate`` with no model writes a tour of each. The set covers every policy
and mechanism the spec has (write_through, selective, write_back with duplicate reclaim,
storage with partial failures, prefetch on two ranks, mirror release, MLA's single
writer, the CP planner, slot identities, pages of several tokens, LRU victims, request
locks, the bounded durable LRU, the wait_complete prefetch stop) and the faults that
make their bugs observable; every catalogued bug variant is killed by it
(benchmarks/kill_matrix.py).

The budget is shared round-robin: four rounds, each giving every model an equal share of
what is left (a new Hypothesis seed per round, the model's run coverage carried over), so
a bug that one model shows quickly is found early whatever its place in the list. The
budget bounds the search; shrinking a failure has its own (``shrink_budget``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Dict, List, NamedTuple, Optional

from tiercheck.models import model_file

from . import machine
from .run_coverage import RunCoverage


class DefaultModel(NamedTuple):
    label: str
    name: str  # a shipped model
    overrides: dict  # Config fields changed for conformance
    covers: str


_CHAIN = ((1,), (1, 2), (1, 2, 3))

DEFAULT_MODELS: List[DefaultModel] = [
    DefaultModel("wt-alloc-2r", "wt-alloc-2r", {}, "write_through, two ranks, a host allocation failing on one rank"),
    DefaultModel("wts-mirror-1r", "wts-mirror-1r", {}, "write_through_selective, storage, mirror release under host pressure"),
    DefaultModel("wb-reclaim-2r", "wb-reclaim-2r", {}, "write_back with duplicate reclaim, two ranks, registry skew"),
    # One request chain three deep, so skewed registries give different reclaim victims,
    # and 2-bit wire digests: a correct encoding treats digests as ideal hashes, so the
    # width changes nothing there; an encoding that can overflow does within a few victims.
    DefaultModel("wb-reclaim-chain-2r", "wb-reclaim-2r", {"requests": _CHAIN, "digest_bits": 2},
                 "write_back reclaim over a three-deep chain, registry skew, 2-bit wire digests"),
    DefaultModel("wb-reclaim-storage-1r", "wb-reclaim-storage-1r", {}, "write_back + storage + prefetch + duplicate reclaim"),
    DefaultModel("wt-storage-2r", "wt-storage-2r", {}, "storage backups failing part-way, two ranks"),
    DefaultModel("wt-prefetch-2r", "wt-prefetch-2r", {}, "prefetch on two ranks (MAX/MIN all-reduces)"),
    DefaultModel("wt-mirror-2r", "wt-mirror-2r", {}, "mirror release on two ranks with partial backups, fail-close"),
    DefaultModel("wt-mirror-mla-2r", "wt-mirror-mla-2r", {}, "MLA: rank 0 writes storage for all"),
    DefaultModel("cp-planner-2r", "cp-planner-2r", {}, "the CP planner's replicated victim order"),
    # The finer resolution together: two-token pages (a partial last page, a divergence
    # inside a page), slot identities, LRU host victims and request locks, with prefetch.
    DefaultModel("resolution-1r", "paged-1r",
                 {"requests": ((1, 2, 3, 4, 5), (1, 2, 3, 6), (7, 8)), "host_pages": 2, "storage": True,
                  "prefetch": True, "slots": True, "victim_order": "lru", "request_locks": True, "max_lock": 5},
                 "pages of two tokens, slot identities, LRU host victims, request locks, prefetch"),
    DefaultModel("lru-2r", "lru-2r", {}, "LRU host victims on two ranks with rank-local touches"),
    # The bounded durable LRU and its age gate on two ranks with partial backups: a mark
    # one rank's acks evict while the ranks have agreed on a release.
    DefaultModel("wt-durable-lru-2r", "wt-durable-lru-1r",
                 {"ranks": 2, "host_pages": 2, "fail_close_after": 1, "faults": frozenset({"partial_storage"})},
                 "bounded durable LRU (one page) with the age gate, two ranks, partial backups"),
    DefaultModel("wt-prefetch-wait-2r", "wt-prefetch-wait-2r", {},
                 "prefetch that waits for every rank's read (wait_complete votes), two ranks"),
    # The scheduler's own eviction inside insert and load_back (insert_evicts,
    # load_back_evicts): one rank with a one-page host pool, and write_back on two ranks.
    DefaultModel("wt-evicts-1r", "wt-evicts-1r", {"host_pages": 1},
                 "insert and load_back evict by victim order when the device pool has no room"),
    DefaultModel("wb-evicts-2r", "wb-evicts-2r", {},
                 "write_back: the LRU eviction inside insert / load_back writes back, two ranks"),
]

ROUNDS = 4


def default_model_files():
    """(label, ModelFile with the overrides applied) for every default model."""
    out = []
    for d in DEFAULT_MODELS:
        mf = model_file.load(d.name)
        if d.overrides:
            mf = replace(mf, name=d.label, description=d.covers, config=replace(mf.config, **d.overrides))
        out.append((d.label, mf))
    return out


class ModelResult(NamedTuple):
    name: str
    examples: int
    seconds: float
    failure: Optional[str]  # the ConformanceFailure message
    stats: dict


def run_campaign(factory_for, budget: float, examples: int = 100_000, steps: int = 50, seed: int = 0,
                 record_dir=None, z3_check=None, label: str = "impl", strategy: str = "coverage",
                 shrink_budget: float = 60.0, models=None, progress=None,
                 per_model: Optional[int] = None) -> Dict[str, ModelResult]:
    """Run the default models round-robin until ``budget`` seconds are spent or one fails.

    ``factory_for(cfg)`` builds a driver factory for a model's config. ``per_model``: an
    example budget instead, each model that many examples over the rounds (with
    ``budget = inf``, a run that does not depend on the machine's speed). Returns per
    model: examples run, seconds spent, and the failure (the campaign stops at the first).
    """
    models = default_model_files() if models is None else models
    covs = {name: RunCoverage() for name, _mf in models}
    done = {name: [0, 0.0] for name, _mf in models}
    stop = time.monotonic() + budget
    slots = ROUNDS * len(models)
    for rnd in range(ROUNDS):
        for name, mf in models:
            stats: dict = {}
            t0 = time.monotonic()
            # What is left, shared by the slots left: a slow slice shortens the later ones.
            slice_s = (stop - t0) / slots
            slots -= 1
            if slice_s <= 0 and rnd:  # round 0 gives every model at least one chunk
                continue
            if per_model is not None:  # this round's share of the model's examples
                examples = per_model // ROUNDS + (rnd < per_model % ROUNDS)
                if not examples:
                    continue
            try:
                machine.run(factory_for(mf.config), examples=examples, steps=steps, seed=seed * 1000 + rnd,
                            record_dir=record_dir, z3_check=z3_check, label=f"{label}-{name}", stats=stats,
                            shrink_budget=shrink_budget, strategy=strategy, cov=covs[name],
                            time_budget=None if slice_s == float("inf") else slice_s)
            except machine.ConformanceFailure as exc:
                done[name][0] += stats.get("first_failure_examples", stats.get("examples", 0))
                done[name][1] += stats.get("first_failure_at", t0) - t0
                stats["campaign_seconds"] = sum(s for _e, s in done.values())
                out = {n: ModelResult(n, e, s, None, {"coverage": covs[n]}) for n, (e, s) in done.items()}
                out[name] = ModelResult(name, done[name][0], done[name][1], str(exc), stats)
                return out
            done[name][0] += stats.get("examples", 0)
            done[name][1] += time.monotonic() - t0
            if progress:
                progress(rnd, name, done[name])
    return {n: ModelResult(n, e, s, None, {"coverage": covs[n]}) for n, (e, s) in done.items()}

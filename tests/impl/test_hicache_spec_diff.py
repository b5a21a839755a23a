"""The implementation against the specification, step by step: random walks over the
spec's enabled actions on the shipped models (correct protocol, every bug variant, the
findings), applied to both, every rank's state compared after every step (nodes with
their tier states and counters, pools, durable pages, queues and done counts, prefetches,
release queue, plan/mismatch/closed, duplicate registry, reclaim victims, store contents).
The implementation never imports the spec; only this test does."""

import pytest

from spec_mirror import walk
from tiercheck.models import model_file
from tiercheck.models.model_file import LIBRARY


def library(sub: str = "") -> list[str]:
    """Shipped models of the HiCache protocol (CP planner models drive tiercheck.impl.cp,
    which the HiCache implementation does not bind)."""
    root = LIBRARY / sub if sub else LIBRARY
    names = sorted((f"{sub}/" if sub else "") + p.stem for p in root.glob("*.toml"))
    return [n for n in names if not getattr(model_file.load(n).config, "cp_planner", False)]


ALL = library() + library("variants") + library("findings")
# A fast cross-section: every feature (write-through/selective/back, storage, prefetch,
# mirror release, MLA, reclaim) and the variants whose paths the others do not take.
FAST = [
    "wt-alloc-2r", "wts-mirror-1r", "wt-mirror-mla-2r", "wt-prefetch-2r", "wb-reclaim-2r",
    "wb-reclaim-storage-1r", "variants/split-during-backup", "variants/release-no-consensus",
    "variants/negated-pair-overflow", "variants/prefetch-double-free",
]


def test_fast_models_are_in_the_library():
    assert set(FAST) <= set(ALL)


@pytest.mark.parametrize("name", FAST)
def test_implementation_follows_the_spec(name):
    walk(name, steps=30, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_implementation_follows_the_spec_long(name):
    for seed in range(6):
        walk(name, steps=80, seed=seed)

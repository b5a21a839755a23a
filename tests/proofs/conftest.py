"""z3's quantifier instantiation follows term ids, which z3 reuses once Python frees the
terms; what earlier tests in the same worker left for the garbage collector then changes
how long a proof takes (proofs/audit.py's _job collects first for the same reason)."""

import gc

import pytest


@pytest.fixture(autouse=True)
def _collected_before_each_proof():
    gc.collect()
    yield

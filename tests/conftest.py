"""Test ordering for the parallel run (`pytest -n auto --dist loadfile`): the files that
keep a worker busiest go first. xdist hands out whole files in collection order, so a long
file collected late ran alone at the end while the other workers sat idle (about three
minutes of a 15-minute CI run). Sorting is stable: every other file keeps its place."""

# Worker seconds per file, longest first: an idle `python -m pytest -n auto --dist loadfile
# --durations=0` (two workers), the call/setup seconds summed per file.
SLOW_FILES_FIRST = (
    "tests/conformance/test_conformance_reference.py",  # 165 s
    "tests/proofs/test_proofs_unbounded.py",  # 133 s
    "tests/tla/test_tlc_counts.py",  # 62 s
    "tests/proofs/test_proofs_counting.py",  # 60 s
    "tests/proofs/test_proofs_rank_agreement.py",  # 56 s
    "tests/proofs/test_proofs_queue_sched.py",  # 47 s
    "tests/proofs/test_proofs_resolution_fields.py",  # 43 s
    "tests/conformance/test_conformance_prefetch_end.py",  # 42 s
    "tests/conformance/test_conformance_machinery.py",  # 40 s
    "tests/proofs/test_proofs_scheduler_evicts.py",  # 38 s
    "tests/checker/test_random_models.py",  # 38 s
    "tests/conformance/test_conformance_cp.py",  # 36 s
    "tests/proofs/test_proofs_agreement.py",  # 34 s
    "tests/proofs/test_proofs_queues.py",  # 33 s
    "tests/proofs/test_proofs_drain.py",  # 31 s
    "tests/conformance/test_s13_kills_gloo.py",  # 30 s
)


def pytest_collection_modifyitems(session, config, items):
    first = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::", 1)[0], len(first)))

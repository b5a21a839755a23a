"""Queue entries under insert and load_back with their own evictions, for any number of
pages (proofs/epr_queue_sched.py).

On reachable states of the eviction models (and of wb-evicts-2r with storage, so that a
staged victim's backup joins sq), every explicit insert / load_back that evicts by
itself is a behaviour of the queue encoding on every rank; a successor whose appended
entry is missing or covers the wrong chain is not; the write, load and backup queue and
storage_acks obligations of both actions are proved for any number of pages, and the
audit counts them so."""

import dataclasses

import pytest

from tiercheck.models.model_file import load
from tiercheck.proofs.epr_obligations import covered, prove_action
from tiercheck.proofs.epr_queue_agreement import admits
from tiercheck.spec.model import Model
from .proof_helpers import model
from .test_proofs_sched_evict_unbounded import _steps

QUEUE_TARGETS = ("write_queue", "load_queue", "backup_queue", "storage_acks")


def _storage_model() -> Model:
    """wb-evicts-2r on one rank with storage: make_room stages victims and backs them up."""
    cfg = load("models/library/wb-evicts-2r.toml").config
    return Model(dataclasses.replace(cfg, ranks=1, storage=True, faults=()))


def _models():
    return [(n, model(n)) for n in ("wt-evicts-1r", "wb-evicts-2r", "request-locks-evicts-1r")] + [
        ("wb-evicts-storage-1r", _storage_model())]


# -m slow: the two-rank model and the request locks (about 10 CPU-s each)
@pytest.mark.parametrize("name", ["wt-evicts-1r", "wb-evicts-storage-1r",
                                  pytest.param("wb-evicts-2r", marks=pytest.mark.slow),
                                  pytest.param("request-locks-evicts-1r", marks=pytest.mark.slow)])
def test_evicting_steps_are_behaviours_of_the_queue_encoding(name):
    m = dict(_models())[name]
    steps = _steps(m, n=4)
    assert steps, name
    for s, a, t in steps:
        for r in range(m.cfg.ranks):
            assert admits(m, s, a, t, r), (name, a, r)


def _appending(m, action, queue):
    for s, a, t in _steps(m, n=60, seeds=20):
        if a.name == action and len(getattr(t.ranks[0], queue)) > len(getattr(s.ranks[0], queue)):
            return s, a, t
    pytest.fail(f"no {action} appending to {queue}")


@pytest.mark.parametrize("action,queue,name", [("insert", "wq", "wt-evicts-1r"),
                                               ("load_back", "lq", "wb-evicts-2r"),
                                               ("insert", "sq", "wb-evicts-storage-1r")])
def test_a_missing_or_wrong_appended_entry_is_noticed(action, queue, name):
    m = dict(_models())[name]
    s, a, t = _appending(m, action, queue)
    rt = t.ranks[0]
    assert admits(m, s, a, t, 0)
    old = getattr(s.ranks[0], queue)
    missing = rt._replace(**{queue: old})
    assert not admits(m, s, a, t._replace(ranks=(missing,) + t.ranks[1:]), 0)
    start, end = getattr(rt, queue)[-1]
    if start != end:  # the chain one page short
        short = rt._replace(**{queue: getattr(rt, queue)[:-1] + ((end, end),)})
        assert not admits(m, s, a, t._replace(ranks=(short,) + t.ranks[1:]), 0)


def test_queue_obligations_of_insert_and_load_back_are_covered_for_any_pages():
    for action in ("insert", "load_back"):
        assert all(covered(t, action) for t in QUEUE_TARGETS)


def test_load_back_queue_obligations_proved_for_any_pages():
    results = prove_action("load_back", targets=list(QUEUE_TARGETS))
    assert len(results) == 4 and all(r.status == "proved" and r.pages == "any" for r in results), results


# -m slow: insert's four (both parts, its eviction on and off) take 10-20 CPU-s
@pytest.mark.slow
def test_insert_queue_obligations_proved_for_any_pages():
    results = prove_action("insert", targets=list(QUEUE_TARGETS))
    assert len(results) == 4 and all(r.status == "proved" and r.pages == "any" for r in results), results

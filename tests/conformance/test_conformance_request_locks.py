"""Request locks (spec lock_request / unlock_request) in the reference HiCache conform to
the spec on the two-rank model."""

from __future__ import annotations

from tiercheck.conformance import machine
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.models import model_file


class _Counting(ReferenceDriver):
    locked = 0

    def apply(self, action):
        super().apply(action)
        if action.name == "lock_request":
            _Counting.locked += 1


def test_reference_conforms_with_request_locks():
    cfg = model_file.load("request-locks-2r").config
    assert cfg.request_locks and cfg.ranks == 2
    _Counting.locked = 0
    machine.run(lambda: _Counting(cfg), examples=15, steps=30, seed=3)
    assert _Counting.locked >= 5

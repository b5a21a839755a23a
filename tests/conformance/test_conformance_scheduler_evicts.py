"""The scheduler's own eviction (insert_evicts, load_back_evicts) in the reference
HiCache conforms to the spec: an insert without room runs the production LRU
evict(num_tokens), a load_back without room its retry with eviction (the reference is
built with load_back_evicts from the model)."""

from __future__ import annotations

import pytest

from tiercheck.conformance import machine
from tiercheck.conformance.reference import ReferenceDriver, impl_config
from tiercheck.models import model_file


class _Evicting(ReferenceDriver):
    """Counts steps of insert / load_back that freed device pages."""

    seen: dict = {}

    def apply(self, action):
        before = self._spec_now
        super().apply(action)
        if action.name in ("insert", "load_back"):
            after = self.state()
            if any(a.dev_free > b.dev_free or _demoted(b, a) for b, a in zip(before.ranks, after.ranks)):
                _Evicting.seen[action.name] = _Evicting.seen.get(action.name, 0) + 1


def _demoted(b, a) -> bool:
    return any(n is not None and n.dev == 1 and (a.nodes[e] is None or a.nodes[e].dev == 0)
               for e, n in enumerate(b.nodes))


@pytest.mark.parametrize("name", ["wt-evicts-1r", "wb-evicts-2r"])
def test_reference_conforms_when_insert_and_load_back_evict(name):
    cfg = model_file.load(name).config
    assert impl_config(cfg).load_back_evicts
    _Evicting.seen = {}
    machine.run(lambda: _Evicting(cfg), examples=12, steps=30, seed=5)
    assert _Evicting.seen.get("insert", 0) >= 1 and _Evicting.seen.get("load_back", 0) >= 1

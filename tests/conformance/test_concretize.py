"""Action parameters are typed (spec/model.py ActionSpec.signature) and translated in one
place, conformance.refinement.concretize."""

from __future__ import annotations

import pytest

from tiercheck.conformance.refinement import RefinementError, concretize
from tiercheck.models import model_file
from tiercheck.spec.action import act
from tiercheck.spec.model import ACTION_SPECS, Model

# Small models that between them enable every spec action (faults, the CP planner,
# request locks and the prefetch endings included).
FAULTS = {"model": {"requests": [[1], [2]], "policy": "write_back", "storage": True,
                    "duplicate_reclaim": True, "faults": ["store_loss", "registry_skew"]}}
CONFIGS = [model_file.load(n).config for n in ("wt-mirror-prefetch-1r", "wt-alloc-2r", "cp-planner-2r", "request-locks-1r")]
CONFIGS.append(model_file.parse(FAULTS).config)
ENDINGS = {"model": {"requests": [[1], [2]], "device_pages": 1, "host_pages": 1, "storage": True, "prefetch": True, "prefetch_stop": "timeout",
                     "prefetch_read_fail": True, "prefetch_revoke": True}}  # how a prefetch ends
CONFIGS.append(model_file.parse(ENDINGS).config)


def _enabled(cfg, limit=400):
    """The actions enabled in the first ``limit`` states of a breadth-first search."""
    m = Model(cfg)
    seen, todo, out = set(), list(m.init_states()), set()
    while todo and len(seen) < limit:
        s = todo.pop(0)
        if s in seen:
            continue
        seen.add(s)
        for a, t in m.successors(s):
            out.add(a)
            todo.append(t)
    return out


def test_every_enumerated_action_matches_its_declared_signature():
    covered = set()
    for cfg in CONFIGS:
        for a in _enabled(cfg):
            signature = ACTION_SPECS[a.name].signature
            assert {k for k, _ in a.params} <= set(signature), f"{a}: not in {signature}"
            covered.add(a.name)
    assert covered == set(ACTION_SPECS)


def test_requests_nodes_and_pages_become_token_paths():
    m = Model(model_file.load("cp-planner-2r").config)
    reqs, paths = m.cfg.requests, m.pages.paths
    assert concretize(m, act("insert", req=1, fail=(0,))) == {"tokens": list(reqs[1]), "fail": (0,)}
    assert concretize(m, act("evict", node=2)) == {"node": paths[2]}
    assert concretize(m, act("local_access", rank=1, node=0)) == {"rank": 1, "node": paths[0]}
    assert concretize(m, act("storage_backup_done", rank=0, pages=2)) == {"rank": 0, "pages": 2}
    assert concretize(m, act("writing_check")) == {}
    faulty = Model(model_file.parse(FAULTS).config)
    assert concretize(faulty, act("store_lose", rank=0, page=1)) == {"rank": 0, "page": (2,)}


def test_a_parameter_outside_the_signature_is_refused():
    m = Model(model_file.load("wt-1r").config)
    with pytest.raises(RefinementError, match="'bogus' is not in its signature"):
        concretize(m, act("evict", node=0, bogus=1))

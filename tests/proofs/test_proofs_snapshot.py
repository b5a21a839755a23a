"""One definition, three uses: the z3 encodings of the state invariants, evaluated on
concrete states, agree with the Python predicates of spec/properties.py."""

import pytest

from tiercheck.errors import UserError
from tiercheck.proofs.snapshot import INVARIANTS, z3_invariant_check
from tiercheck.spec.properties import BY_NAME

from .proof_helpers import model, walk


def python_violations(m, s):
    return [n for n in INVARIANTS if BY_NAME[n].fn(m, s)]


@pytest.mark.parametrize("name", ["wt-2r", "wb-reclaim-2r", "wts-mirror-1r", "wt-prefetch-1r", "wt-prefetch-wait-2r",
                                  "lru-2r", "wt-durable-lru-1r"])
def test_z3_and_python_agree_on_reachable_states(name):
    m = model(name)
    n = 0
    for seed in range(6):
        for s in walk(m, seed, 30):
            assert z3_invariant_check(m, s) == python_violations(m, s) == []
            n += 1
    assert n > 50


def _broken_states(m, s):
    """Hand-broken copies of a reachable state, one per invariant family."""
    rs = s.ranks[0]
    live = [e for e, nd in enumerate(rs.nodes) if nd is not None]
    out = [("slot_conservation", s._replace(ranks=(rs._replace(host_free=rs.host_free + 1),) + s.ranks[1:]))]
    if live:
        e = live[0]
        nd = rs.nodes[e]
        ghost = nd._replace(dev=0, host=0)
        out.append(("no_ghost", s._replace(ranks=(rs._replace(nodes=rs.nodes[:e] + (ghost,) + rs.nodes[e + 1:]),) + s.ranks[1:])))
        neg = nd._replace(lock=-1)
        out.append(("counter_sanity", s._replace(ranks=(rs._replace(nodes=rs.nodes[:e] + (neg,) + rs.nodes[e + 1:]),) + s.ranks[1:])))
    out.append(("no_collective_hang", s._replace(hung="writing_check")))
    if len(s.ranks) > 1:
        out.append(("rank_agreement", s._replace(ranks=s.ranks[:1] + (s.ranks[1]._replace(dev_free=s.ranks[1].dev_free + 1),) + s.ranks[2:])))
    return out


@pytest.mark.parametrize("name", ["wt-2r", "wts-mirror-1r"])
def test_z3_and_python_agree_on_broken_states(name):
    m = model(name)
    seen = set()
    for s in walk(m, 1, 25)[5:]:
        for expect, b in _broken_states(m, s):
            py, zz = python_violations(m, b), z3_invariant_check(m, b)
            assert zz == py, (expect, py, zz)
            assert expect in zz
            seen.add(expect)
    assert {"slot_conservation", "no_ghost", "counter_sanity", "no_collective_hang"} <= seen


def test_options_are_refused():
    import dataclasses

    m = model("wt-1r")
    m2 = type(m)(dataclasses.replace(m.cfg, backup_chain=True))
    with pytest.raises(UserError, match="backup_chain"):
        z3_invariant_check(m2, m2.init_states()[0])

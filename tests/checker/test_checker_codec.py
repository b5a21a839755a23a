"""The packed state encoding is exact, and the spec's speed-ups change no result."""

from __future__ import annotations

import pickle
from collections import namedtuple

import pytest
from checker_helpers import reachable, shipped

from tiercheck.models.codec import Codec, Layout, Table, WorkerCodec, from_plain, to_plain
from tiercheck.spec import memo
from tiercheck.spec.state import Node, RankState, State, StorageAck, empty_rank


def test_keys_are_a_bijection_on_reachable_states():
    m = shipped("wt-mirror-2r")
    states = reachable(m, 3000)
    codec = Codec(m)
    keys = [codec.encode(s) for s in states]
    assert len(set(keys)) == len(states)  # distinct states never share a key
    for s, k in zip(states, keys):
        assert codec.decode(k) == s
        assert codec.encode(codec.decode(k)) == k


def test_layout_round_trip_at_the_field_limits():
    lay = Layout(ranks=3, pages=5)
    gids, stores, flag = (0, 2**32 - 1, 12345), (0b11111, 0, 0b10101), 2**16 - 1
    assert lay.unpack(lay.pack(gids, stores, flag)) == (gids, stores, flag)


def test_table_interns_equal_values_once_and_keeps_the_first_object():
    t = Table()
    a = (1, (2, 3))
    b = tuple([1, (2, 3)])  # equal, different object (constants would be shared)
    assert a is not b
    ga = t.add(a)
    assert t.add(b) == ga and t.lookup(b) == ga
    assert t.values[ga] is a
    assert t.add((1, (2, 4))) == ga + 1
    with pytest.raises(OverflowError):
        small = Table(limit_bits=1)
        for v in range(3):
            small.add(v)


def test_plain_transport_round_trip_is_exact():
    m = shipped("wb-reclaim-storage-1r")
    for s in reachable(m, 500):
        for rs in s.ranks:
            back = from_plain(pickle.loads(pickle.dumps(to_plain(rs))))
            assert back == rs and type(back) is RankState
            assert all(type(x) is Node for x in back.nodes if x is not None)
            assert all(type(x) is StorageAck for x in back.sdone)


def test_worker_codec_names_unknown_values_locally_and_resolves_after_sync():
    m = shipped("wt-2r")
    owner = Codec(m)
    s0 = m.init_states()[0]
    owner.encode(s0)
    worker = WorkerCodec(m)
    for v in owner.ranks.values:
        worker.ranks.adopt(v)
    t = next(t for _a, t in m.successors(s0) if t != s0)
    key, canon = worker.encode_canonical(t)
    assert isinstance(key, tuple) and min(key[0]) < 0  # a new rank state: a local reference
    assert canon == t
    ranks, flags = worker.take_local()
    gids = [owner.ranks.add(from_plain(p)) for p in ranks]
    resolved = owner.layout.pack([g if g >= 0 else gids[-g - 1] for g in key[0]], key[1], key[2])
    assert resolved == owner.encode(t)
    worker.sync([to_plain(v) for v in owner.ranks.values[len(worker.ranks):]], [])
    worker.reset_local()
    assert worker.encode(t) == owner.encode(t)


def test_fast_replace_matches_namedtuple_semantics():
    Ref = namedtuple("Ref", RankState._fields)
    rs = empty_rank(4, 3, 2)
    ref = Ref(*rs)
    for kw in ({}, {"wdone": 2}, {"dev_free": 0, "durable": 5}, {"nodes": (None,) * 4}):
        got = rs._replace(**kw)
        assert type(got) is RankState and tuple(got) == tuple(ref._replace(**kw))
    with pytest.raises(ValueError):
        rs._replace(bogus=1)
    n = Node(start=3)
    assert n._replace(lock=2) == Node(3, lock=2) and type(n._replace(lock=2)) is Node
    s = State((rs,), (0,))
    assert s._replace(hung="x").hung == "x"


def test_memo_identity_layer_returns_the_uncached_result():
    m = shipped("wt-mirror-1r")
    calls = []

    @memo.per_model
    def f(model, rs, k):
        calls.append(1)
        return (rs.dev_free + k, len(rs.wq))

    states = reachable(m, 300)
    for s in states:
        rs = s.ranks[0]
        copy = RankState(*rs)  # equal value, different object: must hit the value layer
        assert f(m, rs, 2) == (rs.dev_free + 2, len(rs.wq)) == f(m, copy, 2)
    distinct = len({s.ranks[0] for s in states})
    assert len(calls) == distinct  # computed once per distinct rank state


def test_memo_identity_layer_survives_being_cleared(monkeypatch):
    m = shipped("wt-1r")
    monkeypatch.setattr(memo, "IDENTITY_LIMIT", 4)

    @memo.per_model
    def g(model, rs):
        return rs.dev_free * 10 + rs.host_free

    for s in reachable(m, 60):
        rs = s.ranks[0]
        assert g(m, rs) == rs.dev_free * 10 + rs.host_free

"""SGLang's prefetch from storage (0.5.20 onwards) driven by the spec's prefetch actions
(conformance/sglang/core.py): the hit query's and the completion acks' MIN votes, the
timeout policy's MAX vote when a read is cut, on 1 and 2 gloo ranks, bytes verified; and
the MLA single writer: an MLA-shaped KV pool on CPU makes rank 0 the only storage writer
(backup_skip on the others), against the spec's single_writer."""

import importlib.metadata as md

import pytest

from tiercheck.spec.action import act


def _version():
    try:
        return md.version("sglang")
    except md.PackageNotFoundError:
        return None


def _mapped():
    """Whether the lane's release has the prefetch pipeline the adapter maps (0.5.20 on)."""
    from tiercheck.conformance.sglang.shims import select
    from tiercheck.errors import UserError

    try:
        return _version() is not None and select(_version()).no_prefetch is None
    except UserError:
        return False


pytestmark = [
    pytest.mark.sglang,
    pytest.mark.skipif(not _mapped(), reason="prefetch is mapped from SGLang 0.5.20 (run it in such a lane)"),
]

# [1, 2] goes to host and L3, is pushed off host by [3]'s backup, then is prefetched back.
STAGED = [
    act("insert", req=0), "write_dma_done", act("writing_check"), "storage_backup_done",
    act("drain_storage_control_queues"), act("evict", node=1),
    act("insert", req=1), "write_dma_done", act("writing_check"), act("evict", node=2),
    act("prefetch_from_storage", req=0),
]


def _expand(steps, ranks):
    """Local steps (names) on every rank in turn."""
    out = []
    for a in steps:
        if a == "write_dma_done":
            out += [act("write_dma_done", rank=r) for r in range(ranks)]
        elif a == "storage_backup_done":
            out += [act("storage_backup_done", rank=r, pages=2) for r in range(ranks)]
        else:
            out.append(a)
    return out


def _run(model, steps, backend="lockstep"):
    """Apply each step to SGLang and the spec; every state must agree, every byte verify."""
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.models import model_file

    driver = SGLangDriver(model_file.load(model).config, backend=backend)
    m = driver.model
    s = m.init_states()[0]
    try:
        for i, a in enumerate(steps):
            assert a in m.actions(s), f"step {i} ({a}) is not enabled in the spec"
            s = m.next_state(s, a)
            driver.apply(a)
            assert driver.state() == s, f"SGLang differs from the spec after step {i} ({a})"
            assert driver.verify() == []
        return s
    finally:
        driver.close()


def test_prefetch_brings_pages_back_one_rank():
    s = _run("sglang/wt-prefetch-1r", _expand(STAGED, 1) + [
        act("prefetch_io", rank=0, op=0), act("check_prefetch_progress", op=0),
        act("insert", req=0)])
    # [3]'s storage backup pins its host copy: one free slot, so a partial allocation
    # brought [1] back from L3 and the insert recomputed [2]
    assert s.ranks[0].nodes[0].host == 2 and s.ranks[0].nodes[1].host == 0


def test_cut_prefetch_queues_its_slots_one_rank():
    s = _run("sglang/wt-prefetch-1r", _expand(STAGED, 1) + [
        act("check_prefetch_progress", op=0), act("drain_storage_control_queues")])
    assert s.ranks[0].host_free == 1 and not s.ranks[0].pq and not s.ranks[0].relq  # [3] holds one


@pytest.mark.gloo
def test_prefetch_votes_on_gloo_ranks():
    # rank 1 stored one page of [1, 2]: the hit query's MIN takes one page on both ranks
    partial = [act("storage_backup_done", rank=0, pages=2), act("storage_backup_done", rank=1, pages=1)]
    base = [partial if a == "storage_backup_done" else [a] for a in STAGED]
    _run("sglang/wt-prefetch-2r", _expand([a for part in base for a in part], 2) + [
        act("prefetch_io", rank=1, op=0), act("prefetch_io", rank=0, op=0),
        act("check_prefetch_progress", op=0), act("insert", req=0)], backend="gloo")
    # a read cut on one rank: the MAX vote terminates on both, nothing is inserted
    _run("sglang/wt-prefetch-2r", _expand(STAGED, 2) + [
        act("prefetch_io", rank=0, op=0), act("check_prefetch_progress", op=0),
        act("drain_storage_control_queues")], backend="gloo")


@pytest.mark.gloo
def test_mla_only_rank_0_writes_to_storage():
    s = _run("sglang/wt-storage-mla-2r", [
        act("insert", req=0), act("write_dma_done", rank=0), act("write_dma_done", rank=1),
        act("writing_check"), act("storage_backup_done", rank=1, pages=2),
        act("storage_backup_done", rank=0, pages=1), act("drain_storage_control_queues"),
        act("evict", node=1), act("insert", req=1)], backend="gloo")
    assert s.store == (1 << 0, 0)  # the writer stored page [1] (a partial write), the follower none


def test_every_prefetch_model_action_is_taken_on_the_lane():
    from tiercheck.conformance.sglang.action_coverage import model_coverage, why_not
    from tiercheck.models import model_file

    cfg = model_file.load("sglang/wt-prefetch-1r").config
    out = model_coverage(cfg, "lockstep")
    taken = {name for name, cell in out.items() if "taken" in cell}
    # every action the model's features enable; registry_skew / local_access / request locks are off
    assert {"registry_skew", "local_access", "lock_request"} <= {n for n in out if why_not(cfg, n)}
    assert taken == {n for n in out if not why_not(cfg, n)}, out


@pytest.mark.gloo
@pytest.mark.slow
@pytest.mark.parametrize("model", ["sglang/wt-prefetch-2r", "sglang/wt-storage-2r", "sglang/wt-storage-mla-2r"])
def test_three_gloo_ranks(model):
    from dataclasses import replace

    from tiercheck.conformance import machine
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.models import model_file

    cfg = replace(model_file.load(model).config, ranks=3)
    stats = {}
    machine.run(lambda: SGLangDriver(cfg, backend="gloo"), examples=5, steps=20, seed=1, stats=stats,
                label="sglang")
    assert stats["examples"] >= 5

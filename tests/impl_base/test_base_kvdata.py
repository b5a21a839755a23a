"""Deterministic page contents: same inputs -> same bytes; any other page/rank/layer -> different."""

import pytest
import torch

from tiercheck.errors import UserError
from tiercheck.impl.kvdata import (
    KVLayout,
    expected_page,
    expected_pages,
    fill_page,
    fill_pages,
    page_seed,
    verify,
    verify_pages,
)
from tiercheck.impl.pools import DevicePool, HostPool

L = KVLayout(layers=3, heads=2, head_dim=4, page_size=4)


def test_expected_page_is_deterministic_and_shaped():
    a = expected_page(L, 0xDEADBEEF, rank=1)
    b = expected_page(L, 0xDEADBEEF, rank=1)
    assert a.shape == (3, 2, 4, 2, 4) and a.dtype == torch.float32
    assert torch.equal(a, b)
    assert a.abs().max() <= 0.5 and a.std() > 0.1  # spread values, not a constant


def test_pages_differ_by_hash_rank_layer_and_kv():
    base = expected_page(L, 12345, rank=0)
    assert not torch.equal(base, expected_page(L, 12346, rank=0))
    assert not torch.equal(base, expected_page(L, 12345, rank=1))
    # every (layer, K/V) block differs from every other one of the same page
    blocks = [base[layer, kv] for layer in range(L.layers) for kv in range(2)]
    for i in range(len(blocks)):
        for j in range(i + 1, len(blocks)):
            assert not torch.equal(blocks[i], blocks[j])


def test_no_two_of_many_pages_collide_elementwise():
    pages = expected_pages(L, list(range(2000)), rank=0).reshape(2000, -1)
    # any two distinct pages differ in almost every element, not just one
    same = (pages[:-1] == pages[1:]).float().mean(dim=1)
    assert same.max() < 0.05
    assert len({tuple(p[:8].tolist()) for p in pages}) == 2000


def test_hash_kinds_do_not_alias():
    seeds = {page_seed(1, 0), page_seed("1", 0), page_seed(b"1", 0), page_seed(-1, 0), page_seed(1, 1)}
    assert len(seeds) == 5
    with pytest.raises(TypeError):
        page_seed(1.5, 0)
    with pytest.raises(ValueError):
        page_seed(1, -1)


def test_batch_matches_single():
    hashes = [7, "abc", b"\x00\x01", 2**64 + 5]
    batch = expected_pages(L, hashes, rank=3)
    for i, h in enumerate(hashes):
        assert torch.equal(batch[i], expected_page(L, h, rank=3))


def test_fill_and_verify_detect_wrong_and_stale_pages():
    pool = DevicePool(L, 8)
    slots = pool.alloc(3)
    fill_pages(pool, slots, [10, 11, 12], rank=0)
    assert verify_pages(pool, slots, [10, 11, 12], rank=0) == []
    assert verify(pool, slots[0], 10, rank=0)
    assert not verify(pool, slots[0], 11, rank=0)  # wrong page
    assert not verify(pool, slots[0], 10, rank=1)  # wrong rank
    # one element of one layer's V flipped: detected
    pool.page(slots[1])[2, 1, 0, 0, 0] += 1e-3
    assert verify_pages(pool, slots, [10, 11, 12], rank=0) == [slots[1]]
    # a stale slot (old content, new owner expected) is detected
    pool.free([slots[2]])
    (again,) = pool.alloc(1)
    assert again == slots[2]
    assert not verify(pool, again, 99, rank=0)
    # a never-written slot (zeros) is detected
    (fresh,) = pool.alloc(1)
    assert not verify(pool, fresh, 0, rank=0)


def test_fill_refuses_free_slot():
    pool = HostPool(L, 4)
    from tiercheck.impl.pools import SlotError

    with pytest.raises(SlotError, match="not allocated"):
        fill_page(pool, pool.base, 1, rank=0)


def test_verify_is_bit_exact_for_half_precision():
    lay = KVLayout(dtype=torch.bfloat16)
    pool = HostPool(lay, 2)
    s = pool.alloc(2)
    fill_pages(pool, s, ["x", "y"], rank=0)
    assert verify_pages(pool, s, ["x", "y"], rank=0) == []
    assert verify_pages(pool, s, ["y", "x"], rank=0) == s


def test_layout_validation_and_page_math():
    with pytest.raises(UserError, match="page_size"):
        KVLayout(page_size=0)
    with pytest.raises(UserError, match="dtype"):
        KVLayout(dtype=torch.int32)
    assert L.tokens(3) == 12 and L.pages(12) == 3
    with pytest.raises(UserError, match="whole number of pages"):
        L.pages(13)
    assert L.page_bytes == L.page_numel * 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_expected_pages_identical_on_cuda_and_cpu():
    hashes = list(range(50))
    assert torch.equal(expected_pages(L, hashes, 2, "cuda").cpu(), expected_pages(L, hashes, 2, "cpu"))


def test_all_64_seed_bits_shape_the_page(monkeypatch):
    import tiercheck.impl.kvdata as kv

    for a, b in [(5 << 32 | 1, 5 << 32 | 2), (1 << 32 | 7, 2 << 32 | 7)]:  # low half / high half
        seeds = {"a": a, "b": b}
        monkeypatch.setattr(kv, "page_seed", lambda h, rank: seeds[h])
        pa, pb = expected_pages(L, ["a", "b"], rank=0)
        assert (pa != pb).float().mean() > 0.9

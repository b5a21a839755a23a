"""KV layout and deterministic page contents.

A page holds ``page_size`` tokens of every layer's K and V. Its bytes are a pure function of
(page content hash, layer, K/V, rank), so any copy of a page in any tier can be checked
against what it must contain: a page copied from the wrong slot, a slot reused before a copy
finished, or a stale slot all show up as a byte mismatch.

The generator is integer arithmetic in torch (no RNG state, no device-specific random
streams), so the expected bytes are identical on CPU and CUDA and can be computed on the
pool's own device, for many pages at once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from tiercheck.errors import UserError

_M32 = 0xFFFFFFFF
# Odd multiplier below 2**31: x * _MUL < 2**63 for any 32-bit x, so int64 math never overflows.
_MUL = 0x45D9F3B
_VALUE_BITS = 24  # float32 holds 24-bit integers exactly: the values are exact on every device


@dataclass(frozen=True)
class KVLayout:
    """Shape of one page: layers x 2 (K, V) x page_size tokens x heads x head_dim."""

    layers: int = 2
    heads: int = 2
    head_dim: int = 4
    page_size: int = 4
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        for name in ("layers", "heads", "head_dim", "page_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UserError(f"KV layout: {name} must be a positive integer, got {value!r}")
        if not isinstance(self.dtype, torch.dtype) or not self.dtype.is_floating_point:
            raise UserError(f"KV layout: dtype must be a torch floating dtype, got {self.dtype!r}")
        if self.page_numel >= 1 << 32:
            raise UserError(f"KV layout: a page of {self.page_numel} elements is too large")

    @property
    def page_shape(self) -> tuple[int, int, int, int, int]:
        return (self.layers, 2, self.page_size, self.heads, self.head_dim)

    @property
    def page_numel(self) -> int:
        return self.layers * 2 * self.page_size * self.heads * self.head_dim

    @property
    def page_bytes(self) -> int:
        return self.page_numel * torch.empty((), dtype=self.dtype).element_size()

    def tokens(self, pages: int) -> int:
        """Number of tokens held by ``pages`` pages."""
        return pages * self.page_size

    def pages(self, tokens: int) -> int:
        """Number of pages for ``tokens`` tokens; the protocol works in whole pages only."""
        if tokens < 0 or tokens % self.page_size:
            raise UserError(
                f"{tokens} tokens is not a whole number of pages (page_size={self.page_size})"
            )
        return tokens // self.page_size


def page_seed(page_hash: int | str | bytes, rank: int) -> int:
    """64-bit seed of a page on a rank. Distinct (hash, rank) pairs give distinct seeds
    (up to a 64-bit blake2b collision); ints, strings and bytes never alias each other."""
    if not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank must be a non-negative int, got {rank!r}")
    if isinstance(page_hash, bool) or not isinstance(page_hash, (int, str, bytes)):
        raise TypeError(f"page hash must be int, str or bytes, got {type(page_hash).__name__}")
    if isinstance(page_hash, int):
        raw = b"i" + page_hash.to_bytes((page_hash.bit_length() + 8) // 8, "little", signed=True)
    elif isinstance(page_hash, str):
        raw = b"s" + page_hash.encode("utf-8")
    else:
        raw = b"b" + page_hash
    digest = hashlib.blake2b(raw, digest_size=8, person=b"tc-page", salt=rank.to_bytes(8, "little"))
    return int.from_bytes(digest.digest(), "little")


def _mix32(x: torch.Tensor) -> torch.Tensor:
    # A bijection on 32-bit values (xor-shift / odd multiply), computed in int64 without overflow.
    x = x ^ (x >> 16)
    x = (x * _MUL) & _M32
    x = x ^ (x >> 16)
    x = (x * _MUL) & _M32
    return x ^ (x >> 16)


_CACHE_PAGES = 8192  # expected contents are a pure function: keep the recent ones
_page_cache: dict = {}


def expected_pages(
    layout: KVLayout,
    page_hashes: list[int | str | bytes],
    rank: int,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """The contents of the given pages: a tensor (n, *layout.page_shape) of layout.dtype.

    Memoised per page (verification asks for the same pages after every step)."""
    dev = str(device)
    lkey = (layout.page_shape, layout.dtype)
    keys = [(lkey, h, rank, dev) for h in page_hashes]
    missing = [k for k in dict.fromkeys(keys) if k not in _page_cache]
    if missing:
        fresh = _generate(layout, [k[1] for k in missing], rank, device)
        if len(_page_cache) + len(missing) > _CACHE_PAGES:
            _page_cache.clear()
        for k, page in zip(missing, fresh):
            _page_cache[k] = page
    if not keys:
        return torch.empty((0, *layout.page_shape), dtype=layout.dtype, device=device)
    return torch.stack([_page_cache[k] for k in keys])


def _generate(layout: KVLayout, page_hashes: list, rank: int, device) -> torch.Tensor:
    seeds = [page_seed(h, rank) for h in page_hashes]
    hi = torch.tensor([s >> 32 for s in seeds], dtype=torch.int64, device=device).unsqueeze(1)
    lo = torch.tensor([s & _M32 for s in seeds], dtype=torch.int64, device=device).unsqueeze(1)
    # Element index over (layer, K/V, token, head, dim): layer and K/V are part of the input.
    idx = torch.arange(layout.page_numel, dtype=torch.int64, device=device).unsqueeze(0)
    h = _mix32(_mix32(idx ^ hi) ^ lo)
    values = (h >> (32 - _VALUE_BITS)).to(torch.float32) / float(1 << _VALUE_BITS) - 0.5
    return values.to(layout.dtype).reshape(len(seeds), *layout.page_shape)


def expected_page(
    layout: KVLayout, page_hash: int | str | bytes, rank: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """The contents of one page: a tensor of layout.page_shape."""
    return expected_pages(layout, [page_hash], rank, device)[0]


def fill_pages(pool, slots: list[int], page_hashes: list[int | str | bytes], rank: int) -> None:
    """Write the pages' contents into ``slots`` of ``pool`` (what a forward pass would compute).
    The slots must be allocated: writing into a free slot is a protocol bug."""
    if len(slots) != len(page_hashes):
        raise ValueError(f"fill_pages: {len(slots)} slots but {len(page_hashes)} page hashes")
    idx = pool.index(slots, require_allocated=True, what="fill_pages")
    pool.data[idx] = expected_pages(pool.layout, page_hashes, rank, pool.data.device)


def fill_page(pool, slot: int, page_hash: int | str | bytes, rank: int) -> None:
    fill_pages(pool, [slot], [page_hash], rank)


def _bits(t: torch.Tensor) -> torch.Tensor:
    # Compare raw bits, not float values: -0.0 == 0.0 and NaN != NaN must not hide a difference.
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def verify_pages(
    pool, slots: list[int], page_hashes: list[int | str | bytes], rank: int
) -> list[int]:
    """The slots (in the given order) whose bytes differ from the expected page; [] when all match."""
    if len(slots) != len(page_hashes):
        raise ValueError(f"verify_pages: {len(slots)} slots but {len(page_hashes)} page hashes")
    if not slots:
        return []
    idx = pool.index(slots)
    got = _bits(pool.data[idx]).reshape(len(slots), -1)
    want = _bits(expected_pages(pool.layout, page_hashes, rank, pool.data.device)).reshape(len(slots), -1)
    ok = (got == want).all(dim=1).tolist()
    return [s for s, good in zip(slots, ok) if not good]


def verify(pool, slot: int, page_hash: int | str | bytes, rank: int) -> bool:
    """True when ``slot`` of ``pool`` holds exactly the page ``page_hash`` of ``rank``."""
    return not verify_pages(pool, [slot], [page_hash], rank)

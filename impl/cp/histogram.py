"""Per-owner page histograms of a node's device copy, the two ways the planners read them.

Both return the same tuple (pages of the node on each owner lane); they differ only in how
many device->host syncs they take: ``cp_size`` for the per-owner loop (the slow seed code),
one for ``bincount``.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from .layout import owners_of_pages, pages_of_token_locs
from .syncs import SyncCounter


def _owner_tensor(value: torch.Tensor, page_size: int, cp_size: int) -> torch.Tensor:
    return owners_of_pages(pages_of_token_locs(value, page_size), cp_size)


def counts_per_owner_syncs(
    value: Optional[torch.Tensor], page_size: int, cp_size: int, syncs: SyncCounter
) -> Tuple[int, ...]:
    """One ``.item()`` per owner lane (cp_size syncs per call)."""
    if value is None or value.numel() == 0:
        return (0,) * cp_size
    owners = _owner_tensor(value, page_size, cp_size)
    return tuple(int(syncs.item((owners == lane).sum())) for lane in range(cp_size))


def counts_bincount(
    value: Optional[torch.Tensor], page_size: int, cp_size: int, syncs: SyncCounter
) -> Tuple[int, ...]:
    """One ``bincount().tolist()`` (a single sync per call)."""
    if value is None or value.numel() == 0:
        return (0,) * cp_size
    owners = _owner_tensor(value, page_size, cp_size)
    return tuple(syncs.tolist(torch.bincount(owners, minlength=cp_size)))

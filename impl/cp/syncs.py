"""Counting device->host synchronisations.

Every ``.item()`` / ``.tolist()`` the planners do goes through a ``SyncCounter`` so tests and
the benchmark can see how many host round-trips a plan costs. On CUDA each one blocks the
host until the device queue drains; on CPU they are cheap but counted the same way.
"""

from __future__ import annotations

import torch


def default_device() -> torch.device:
    """CUDA when present (the syncs are then real), CPU otherwise."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class SyncCounter:
    """Performs and counts device->host reads."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def item(self, tensor: torch.Tensor):
        self.count += 1
        return tensor.item()

    def tolist(self, tensor: torch.Tensor):
        self.count += 1
        return tensor.tolist()

"""The small node protocol the owner-lane planner reads, and a plain node that has it.

The planner reads a radix tree of device nodes and never mutates it. What it needs from a
node (names follow SGLang's TreeNode so the implementation's tree can bind directly):

- ``id``: int, unique in the tree and identical on every CP rank.
- ``parent``: the parent node, ``None`` only for the root.
- ``children``: a mapping (child key -> node); only ``.values()`` is used.
- ``value``: 1-D int64 tensor of device token locations (page ``p`` covers tokens
  ``[p * page_size, (p + 1) * page_size)``), or ``None`` once the device copy is evicted.
  Device residency is prefix-closed: an evicted node has no device-resident descendants.
- ``lock_ref``: int; > 0 means in use (a binding folds pinning in here too).
- ``backuped``: bool, a host copy exists (the victim is demoted, not deleted).
- ``access_seq``: int, a *replicated* logical access counter (same on every rank).
- ``last_access_time``: float, a *per-rank* wall clock; read only by the
  ``planner-local-tiebreak`` bug variant, never by the correct planner.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Protocol

import torch


class DeviceNode(Protocol):
    id: int
    parent: Optional["DeviceNode"]
    children: Mapping[Any, "DeviceNode"]
    value: Optional[torch.Tensor]
    lock_ref: int
    backuped: bool
    access_seq: int


class CpNode:
    """A plain tree node with the protocol's fields (used by tests and the benchmark)."""

    __slots__ = ("id", "parent", "children", "value", "lock_ref", "backuped",
                 "access_seq", "last_access_time")

    def __init__(
        self, node_id: int, value: Optional[torch.Tensor] = None, *, lock_ref: int = 0,
        backuped: bool = False, access_seq: int = 0, last_access_time: float = 0.0,
    ) -> None:
        self.id = node_id
        self.parent: Optional[CpNode] = None
        self.children: Dict[int, CpNode] = {}
        self.value = value
        self.lock_ref = lock_ref
        self.backuped = backuped
        self.access_seq = access_seq
        self.last_access_time = last_access_time

    @property
    def evicted(self) -> bool:
        return self.value is None

    def add_child(self, child: "CpNode") -> "CpNode":
        if child.parent is not None:
            raise ValueError(f"node {child.id} already has a parent")
        child.parent = self
        self.children[child.id] = child
        return child

    def __repr__(self) -> str:
        pages = None if self.value is None else int(self.value.numel())
        return f"CpNode(id={self.id}, locs={pages}, lock_ref={self.lock_ref})"

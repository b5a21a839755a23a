"""The driver interface: what any implementation adapter provides to conformance.

An adapter performs exactly one spec action on the implementation it wraps, reports the
implementation's state as spec state (through the one refinement mapping in
``tiercheck.conformance.refinement``) and verifies the bytes it holds. The same action
values drive the spec, the adapters, the traces on disk and the replays.
"""

from __future__ import annotations

from typing import List, Protocol

from tiercheck.spec.action import Action
from tiercheck.spec.config import Config
from tiercheck.spec.model import Model
from tiercheck.spec.state import State


class Driver(Protocol):
    model: Model  # the spec instance whose constants the implementation was built with

    def apply(self, action: Action) -> None:
        """Perform one spec action. A step the implementation refuses leaves it unchanged
        (a disabled action must be a no-op there, as it is in the spec)."""

    def state(self) -> State:
        """The implementation's state, mapped to spec state."""

    def verify(self) -> List[str]:
        """Byte and ownership problems found in the implementation ([] when none)."""

    def close(self) -> None:
        ...


class SpecDriver:
    """The specification itself as an 'implementation', possibly with bug variants on.

    Conformance runs against it check the machinery (a mutant of the spec must be told
    apart from the spec); they also give the kill matrix a baseline that needs no torch.
    """

    name = "spec"

    def __init__(self, cfg: Config, variants=frozenset()):
        self.model = Model(cfg)
        from dataclasses import replace

        # The model's own variants apply to both sides; ``variants`` to the mutant only.
        self.impl = Model(replace(cfg, variants=cfg.variants | frozenset(variants)))
        self._state = self.impl.init_states()[0]

    def apply(self, action: Action) -> None:
        nxt = self.impl.next_state(self._state, action)
        if nxt is not None:
            self._state = nxt

    def state(self) -> State:
        return self._state

    def verify(self) -> List[str]:
        return []

    def close(self) -> None:
        pass

"""Actions as plain data: a name plus named parameters.

The same values are listed by the spec (``actions(state)``), applied by the spec
(``next_state``), applied to implementations by conformance drivers, written to trace files
and replayed. Parameters are small ints, tuples of ints or strings; nodes are named by
their end page id, which a trace file translates to the page's token path.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Tuple

# Who takes the step. REPLICATED: the scheduler issues it on every rank (requests, evictions
# and load-backs are replicated). LOCAL: one rank's own timing (a DMA or storage operation
# finishing there). SYNC: a collective round in which all ranks agree. ENV: the outside
# world (the store loses a key).
REPLICATED, LOCAL, SYNC, ENV = "replicated", "local", "sync", "env"

# What an action parameter names (spec/model.py ActionSpec.signature). REQUEST: an index
# into cfg.requests; NODE: a node by its end page id; PAGE: a page id; RANK: one rank;
# RANKS: a tuple of ranks (whose host allocation fails); COUNT: a number of pages;
# OP: an index into a rank's queue of in-flight prefetches. The first three are what the
# refinement mapping translates to token paths (tiercheck.conformance.refinement.concretize).
REQUEST, NODE, PAGE, RANK, RANKS, COUNT, OP = "request", "node", "page", "rank", "ranks", "count", "op"


class Action(NamedTuple):
    name: str
    params: Tuple[Tuple[str, Any], ...] = ()

    def __getitem__(self, key):  # a["node"]; tuple indexing stays available via .params
        if isinstance(key, int):
            return tuple.__getitem__(self, key)
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(key)

    def get(self, key, default=None):
        for k, v in self.params:
            if k == key:
                return v
        return default

    def __str__(self) -> str:
        if not self.params:
            return self.name
        inner = ", ".join(f"{k}={_fmt(v)}" for k, v in self.params)
        return f"{self.name}({inner})"

    def to_json(self) -> dict:
        out = {"action": self.name}
        for k, v in self.params:
            out[k] = list(v) if isinstance(v, tuple) else v
        return out

    @staticmethod
    def from_json(obj: dict) -> "Action":
        if not isinstance(obj, dict) or not isinstance(obj.get("action"), str):
            raise ValueError(f"not an action: {obj!r}")
        params = tuple(
            (k, tuple(v) if isinstance(v, list) else v)
            for k, v in obj.items()
            if k != "action"
        )
        return Action(obj["action"], params)


def act(name: str, **params) -> Action:
    return Action(name, tuple(params.items()))


def _fmt(v) -> str:
    if isinstance(v, (tuple, frozenset, set)):
        return "{" + ",".join(str(x) for x in sorted(v)) + "}"
    return str(v)

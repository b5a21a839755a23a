"""Spec states as TLA+ values of the twin (tla/HiCache.tla), to compare state sets with TLC.

``state_value(m, s)`` writes a ``State`` as the record ``[ranks |-> ..., store |-> ...,
hung |-> ..., halted |-> ...]`` in the twin's encoding (docs/tla.md: bitmasks are sets,
``None`` nodes are ``NoNode``, tuples are sequences, functions over pages, ranks and
requests are 0-based, a feature's fields stay ``<< >>`` or ``{}`` while it is off).
``reach_module(...)`` adds the set of such records and the invariant ``InSpecReach`` (the
state TLC reached is one of them) to an exported MC.tla: with equal distinct counts, TLC
holding it means both tools reached the same states.
"""

from __future__ import annotations

from typing import Iterable, List, Tuple

from tiercheck.spec.prefetch_end import FREED, REVOKED, TERMINATED, TIMED_OUT, tracks_flags

_FLAGS = ((TIMED_OUT, '"timed_out"'), (TERMINATED, '"terminated"'), (REVOKED, '"revoked"'), (FREED, '"freed"'))
_NO_NODE = "NoNode"


def _bool(b) -> str:
    return "TRUE" if b else "FALSE"


def _seq(items) -> str:
    return "<<" + ", ".join(items) + ">>"


def _fn0(items) -> str:
    """A function with domain 0..n-1 (pages, ranks, requests)."""
    return f"Z({_seq(items)})" if items else "Z(<< >>)"


def _set(xs) -> str:
    return "{" + ", ".join(str(x) for x in sorted(xs)) + "}"


def _mask(mask: int, n: int) -> str:
    return _set(i for i in range(n) if mask >> i & 1)


def _ints(xs) -> str:
    return _seq(str(x) for x in xs)


def _node(n) -> str:
    if n is None:
        return _NO_NODE
    return (f"[start |-> {n.start}, dev |-> {n.dev}, host |-> {n.host}, lock |-> {n.lock}, "
            f"href |-> {n.href}, hits |-> {n.hits}, lbp |-> {_bool(n.lbp)}, rel |-> {_bool(n.rel)}]")


def _rank(m, rs) -> str:
    cfg, npages = m.cfg, m.pages.count
    running = dict(rs.running)
    fields: List[Tuple[str, str]] = [
        ("owner", _fn0([str(o) for o in rs.owner])),
        ("nodes", _fn0([_node(n) for n in rs.nodes])),
        ("dev_free", str(rs.dev_free)),
        ("host_free", str(rs.host_free)),
        ("durable", _mask(rs.durable, npages)),
        ("wq", _seq(_ints(op) for op in rs.wq)),
        ("wdone", str(rs.wdone)),
        ("lq", _seq(_ints(op) for op in rs.lq)),
        ("ldone", str(rs.ldone)),
        ("sq", _seq(_ints(op) for op in rs.sq)),
        ("sdone", _seq(_ints((a.reported, a.actual)) for a in rs.sdone)),
        ("pq", _seq(_ints(op) for op in rs.pq)),
        ("pdone", _ints(rs.pdone)),
        ("relq", _ints(rs.relq)),
        ("plan", _ints(rs.plan)),
        ("mismatch", str(rs.mismatch)),
        ("closed", _bool(rs.closed)),
        ("dups", _ints(rs.dups)),
        ("digest", _ints(rs.digest)),
        ("clock", _ints(rs.clock)),
        ("lru", _ints(rs.lru)),
        ("running", _fn0([str(running.get(r, -1)) for r in range(len(m.pages.request_pages))])
         if cfg.request_locks else "<< >>"),
        ("dslot", _fn0([str(x) for x in rs.dslot]) if cfg.slots else "<< >>"),
        ("hslot", _fn0([str(x) for x in rs.hslot]) if cfg.slots else "<< >>"),
        ("dfree", _mask(rs.dfree, cfg.device_pages) if cfg.slots else "{}"),
        ("hfree", _mask(rs.hfree, cfg.host_pages) if cfg.slots else "{}"),
        ("pslots", _seq(_ints(x) for x in rs.pslots)),
        ("rslots", _seq(_ints(x) for x in rs.rslots)),
        ("dlru", _seq(_ints(x) for x in rs.dlru)),
        ("pflags", _seq("{" + ", ".join(n for bit, n in _FLAGS if f & bit) + "}" for f in rs.pflags)
         if tracks_flags(cfg) else "<< >>"),
    ]
    return "[" + ", ".join(f"{k} |-> {v}" for k, v in fields) + "]"


def state_value(m, s) -> str:
    """A spec State as the twin's TLA+ value of << ranks, store, hung, halted >>."""
    store = _fn0([_mask(mask, m.pages.count) for mask in s.store])
    return (f"[ranks |-> {_fn0([_rank(m, rs) for rs in s.ranks])}, store |-> {store}, "
            f"hung |-> \"{s.hung}\", halted |-> \"{s.halted}\"]")


def reach_module(mc_text: str, m, states: Iterable) -> str:
    """MC.tla with ``SpecReach`` (the given spec states) and the invariant ``InSpecReach``."""
    defs = [
        "Z(s) == [i \\in 0 .. Len(s) - 1 |-> s[i + 1]]",
        "SpecReach == {" + ",\n    ".join(state_value(m, s) for s in states) + "}",
        "InSpecReach == [ranks |-> ranks, store |-> store, hung |-> hung, halted |-> halted] \\in SpecReach",
    ]
    head, end = mc_text.rsplit("====", 1)
    return head + "\n".join(defs) + "\n====" + end

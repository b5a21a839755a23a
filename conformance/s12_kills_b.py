"""Units for survivors of the seed-12 mutation sample (second batch, session 13).

- a situation: a 257-page request whose last page falls inside a cached 258-page node
  (past 256, CPython's shared small ints, so a page position compared by identity with
  the request's length never meets it);
- an auto-mode check of a second prefetch while its read is held and the first, settled,
  is still queued: the held read's result must settle its own prefetch, not the head of
  the queue;
- a node left with no usable copy (its device copy dropped with no host copy, as a lost
  copy would leave it): the self-check must name it.
"""

from __future__ import annotations

import time
from dataclasses import replace

from tiercheck.models import model_file
from tiercheck.spec.model import Model

from .auto_mode import READ_HOLD, AutoDriver, _compare, flush_and_compare, hold_reads, settle, successors, tick
from .reference import ReferenceDriver
from .situations import Situation, first_path


def _inside_long_node(m, s, a, t) -> bool:
    """The insert of request 1 (257 pages) once request 0 (258 pages) is cached."""
    return a.name == "insert" and a["req"] == 1 and s.ranks[0].owner[0] >= 0


SITUATIONS = (
    # Request 1 is request 0 less its last page: every walk of it (the insert, the
    # observed match) stops at position 257 inside the one 258-page node.
    Situation("a 257-page request inside a cached 258-page node", "wt-1r", (), _inside_long_node,
              overrides=(("requests", (tuple(range(1, 259)), tuple(range(1, 258)))), ("device_pages", 258),
                         ("host_pages", 258), ("faults", frozenset()))),
)


# Three one-page requests, one device page: each is evicted to the store in turn, then
# two prefetches are queued (the first settled by a scheduler iteration).
SECOND_PREFETCH = ("wt-prefetch-1r", (("requests", ((1,), (2,), (3,))), ("device_pages", 1),
                                      ("host_pages", 2), ("faults", frozenset())))


def second_prefetch_read_held(model_name: str = SECOND_PREFETCH[0], overrides=SECOND_PREFETCH[1]) -> str:
    """Auto mode: the shortest walk to a second queued prefetch, its read held READ_HOLD s,
    then check_prefetch_progress of that second prefetch: the rank waits for the held
    read, whose result must settle the second prefetch (the first, settled long ago, is
    still at the head of the queue). Then the state, bytes and a flush must agree with
    the spec. "" when they do, else the first disagreement."""
    cfg = replace(model_file.load(model_name).config, **dict(overrides))
    model = Model(cfg)
    path = first_path(model, lambda s, a, t: a.name == "prefetch_from_storage" and len(t.ranks[0].pq) == 2,
                      successors=lambda s: successors(model, s))
    if path is None:
        return f"no walk of {model_name} queues two prefetches"
    driver = AutoDriver(cfg)
    try:
        s = model.init_states()[0]
        for i, a in enumerate(path[:-1]):
            s = settle(model, tick(model, s, driver.separate_rounds) if a.name == "check_events" else model.next_state(s, a))
            driver.apply(a)
            problems = _compare(driver, s, f"step {i + 1} ({a})")
            if problems:
                return problems[0]
        held = {}

        def hold():
            held["from"] = time.monotonic()
            time.sleep(READ_HOLD)

        hold_reads(driver, hold)
        start = path[-1]
        s = model.next_state(s, start)  # the read is in flight: no settle
        ReferenceDriver.apply(driver, start)
        check = next((a for a in model.actions(s) if a.name == "check_prefetch_progress" and a["op"] == 1), None)
        if check is None:
            return f"{start}: the spec has no check of the second prefetch"
        asked = time.monotonic()
        s = settle(model, model.next_state(s, check))
        ReferenceDriver.apply(driver, check)
        driver.settle()
        if "from" not in held:
            return f"{start}: no storage read was started"
        if asked > held["from"] + READ_HOLD:
            return ""  # the read finished before the check came (a stalled machine): no verdict here
        problems = _compare(driver, s, f"{start}, {check} with the read held")
        return (problems or flush_and_compare(model, driver, s) or [""])[0]
    finally:
        driver.close()


def lost_copy_named() -> str:
    """A node whose device copy is gone while it has no host copy (what a copy lost by a
    bug leaves): the self-check must name it as having no usable copy. "" when it does."""
    # write_through_selective: a first insert makes no host copy
    driver = ReferenceDriver(replace(model_file.load("wt-1r").config, policy="write_through_selective"))
    try:
        driver.apply(next(a for a in driver.model.actions(driver.model.init_states()[0]) if a.name == "insert"))
        rank = driver.group.ranks[0]
        node = next(n for n in rank.tree.nodes() if n.dev == "resident" and n.host == "absent")
        rank.device_pool.free(node.dev_slots)  # the slots go back: only the copy is missing
        node.dev, node.dev_slots = "absent", None
        lines = rank.verify()
        want = f"node {rank._p(node.end)}: no usable copy (device absent, host absent)"
        if not any(want in line for line in lines):
            return f"the self-check does not name the node without a copy: {lines or 'no problem found'}"
        return ""
    finally:
        driver.close()


def scenarios() -> list:
    """(name, scenario) for the mutation suite's fault units: each returns "" or what went wrong."""
    return [
        ("a second prefetch checked with its read held, the first still queued", second_prefetch_read_held),
        ("a node left with no usable copy is named by the self-check", lost_copy_named),
    ]

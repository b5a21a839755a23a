"""The scheduler's ``evict(num_tokens)`` called on its own, against the spec's evict_lru.

No spec action is this call: the spec runs it inside an insert or a load-back that lacks
device room (insert_evicts, load_back_evicts), where only the pages it must free are
asked for and nothing reads what it returns. A scheduler calls it directly too, with any
token count, and reads the tokens freed. Here, on top of the shortest spec trace to two
evictable device leaves (wt-evicts-1r with two-token pages), ``evict(5)`` must free whole
pages in victim order until it has at least ceil(5 / 2) = 3 (4 here: the last victim
has two), as the spec's ``evict_lru`` does from the same state, and return the tokens
freed (pages times the page size), the number the device_evicted counter counts too.
"""

from __future__ import annotations

from dataclasses import replace

from tiercheck.impl.hicache.metrics import DEVICE_EVICTED
from tiercheck.models import model_file
from tiercheck.spec.eviction import device_leaves, evict_lru
from tiercheck.spec.model import Model

from .compare import describe_difference, observable
from .reference import ReferenceDriver
from .runner import replay
from .situations import first_path

TOKENS = 5  # not a whole number of two-token pages: the call rounds up to pages


def _two_leaves(m, s, a, t) -> bool:
    return len(device_leaves(m, t.ranks[0])) >= 2


def evict_tokens_frees_whole_pages() -> str:
    """"" when evict(TOKENS) leaves the spec's state and returns the tokens it freed."""
    cfg = replace(model_file.load("wt-evicts-1r").config, page_size=2,
                  requests=((1, 2), (1, 2, 3, 4), (5, 6, 7, 8)), device_pages=4)
    model = Model(cfg)
    trace = first_path(model, lambda s, a, t: _two_leaves(model, s, a, t))
    driver = ReferenceDriver(cfg)
    try:
        out = replay(driver, trace)
        if out.mismatch is not None:
            return f"before evict({TOKENS}): {out.mismatch.message}"
        s = out.states[-1]
        pages = -(-TOKENS // cfg.page_size)
        want = s._replace(ranks=tuple(evict_lru(model, s.ranks, [pages] * len(s.ranks))))
        was = [m.get(DEVICE_EVICTED, 0) for m in driver.group.metrics()]
        got = driver.group.evict(TOKENS)
        counted = [m.get(DEVICE_EVICTED, 0) - w for m, w in zip(driver.group.metrics(), was)]
        state = driver.state()
    finally:
        driver.close()
    if observable(state) != observable(want):
        return f"evict({TOKENS}) is not the spec's evict_lru: " + "; ".join(
            describe_difference(model, observable(want), observable(state)))
    freed = [(rs.dev_free - b.dev_free) * cfg.page_size for rs, b in zip(want.ranks, s.ranks)]
    if list(got) != freed or counted != freed:
        return f"evict({TOKENS}) returned {list(got)} tokens freed, counted {counted}, the spec frees {freed}"
    return ""

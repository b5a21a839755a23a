"""Traffic shapes for the SGLang starvation workload (pure logic, no SGLang).

Both shapes are tiercheck's reference workload sessions (``impl/workload/sessions``:
multi-turn sessions over shared system prompts, round 1 cold, round 2 warm) at page
size 1, sized in tokens against a device pool:

* ``plain``: many sessions over 8 short shared prompts; what stays on device is decided
  by LRU alone, so a host mirror becomes reclaimable only when its device copy is evicted.
* ``hot``: the same sessions over 2 long shared prompts (together 3/4 of the host pool)
  that every request touches: they stay device-resident, so without a release their
  mirrors hold most of the host pool for good.
"""

from __future__ import annotations

from dataclasses import dataclass

from tiercheck.errors import UserError
from tiercheck.impl.workload.sessions import Request, SessionLoad, build_rounds

SHAPES = ("plain", "hot")


@dataclass(frozen=True)
class Traffic:
    shape: str
    load: SessionLoad

    def rounds(self) -> list[list[Request]]:
        return build_rounds(self.load)

    def distinct_tokens(self) -> int:
        """Tokens of every distinct prefix the run inserts (each request's full path)."""
        seen: set = set()
        for rnd in self.rounds():
            for req in rnd:
                full = req.full
                for i in range(1, len(full) + 1):
                    seen.add(full[:i])
        return len(seen)


def traffic(shape: str, host_tokens: int, sessions: int = 32, seed: int = 0) -> Traffic:
    """The shape's session load for a host pool of ``host_tokens``."""
    if shape == "plain":
        load = SessionLoad(sessions=sessions, rounds=2, groups=8, system_pages=16, user_pages=16,
                           output_pages=8, page_size=1, seed=seed)
    elif shape == "hot":
        hot = max(1, (3 * host_tokens) // 8)  # 2 prompts: 3/4 of the host pool
        load = SessionLoad(sessions=sessions, rounds=2, groups=2, system_pages=hot, user_pages=16,
                           output_pages=8, page_size=1, seed=seed)
    else:
        raise UserError(f"sglang workload: unknown traffic shape {shape!r} (known: {', '.join(SHAPES)})")
    return Traffic(shape, load)


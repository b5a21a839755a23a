"""Units for survivors of the seed-13 mutation sample (session 15, kB).

(write_path.py:101, split-slice-off-by-one's slice, is killed by the twin situation "a
split with an upper half of two pages" in conformance/situations.py.)

- (situation, early-return-collective) a writing_check every rank enters with copies in
  flight and none finished: every rank returns before the all-reduce (no hang, nothing
  committed) and must report 0 commits; the reference adapter compares each rank's
  return with the spec's change of its write queue (counters.returned_problems).
"""

from __future__ import annotations

from .situations import Situation


def _all_ranks_return_early(m, s, a, t) -> bool:
    """writing_check with copies in flight on every rank and none finished anywhere."""
    return (a.name == "writing_check" and all(rs.wq for rs in s.ranks)
            and all(rs.wdone == 0 for rs in s.ranks))


SITUATIONS = (
    Situation("a writing_check every rank returns from early (copies in flight, none done)",
              "variants/early-return-collective", (), _all_ranks_return_early),
)

"""rank_agreement under insert and load_back with their own eviction (make_room:
``insert_evicts``, ``load_back_evicts``) over two ranks' views, for any number of pages.

make_room (proofs.epr_sched_evict) is, per rank, a free set of reclaimed duplicates, one
of device victims, one of nodes that leave the tree and whether the request or chain
then fits, each constrained by what the spec guarantees of it. Over two views
(proofs.epr_rank_agreement) the reclaim reads each rank's own registry, so by the taint
pass everything after it would be per rank, and nothing would make the ranks' outcomes
equal. What makes them equal is what spec/eviction.py's make_room guarantees
(``congruent`` in tests/proofs/test_proofs_room_pair.py checks it on the spec): its
outcome is a function of the tree it reads, the free counters, the held path, the
victim order (the replicated LRU order) and the sequence of duplicates it reclaims. The
registry enters only through that sequence: given the same sequence every round goes
alike on every rank (each round's victim is the smallest key among the same leaves,
each agreed host allocation sees the same host room).

The agree case then splits on the ranks' reclaim sequences (each rank's reclaimed-victim
list of the step, RankState.digest; the pre-state's is empty, a replicated step waits
for a due round):

- different: the ranks' victim digests differ and the next round halts on their
  comparison (spec/sync.py; spec/digest.py compares the sequences exactly, the ideal
  hash proofs.epr_drain also assumes), which rank_agreement excuses, as it excuses
  evict_host's reclaim sets differing (epr_rank_agreement.excused). Nothing to prove;
- equal: the reclaimed sets are equal and, by the congruence, so are the victims, what
  leaves the tree and the fit: one choice for both ranks, constrained by both views
  (the spec's outcome satisfies both). ``SHARED`` names them; this case is what z3
  proves.

Not under the variants whose make_room reads per-rank data (``PER_RANK_UNDER``): each
rank's clock orders its victims (lru-local-clock), each rank's allocation goes its own
way (partial-backup-leak); and not where different sequences are not excused (the
digest comparison skipped or overflowing: digest-unchecked, negated-pair-overflow).
There the outcome stays per rank.

load_back's obligation is proved this way with load_back_evicts on. insert's with
insert_evicts on too, through the view after the eviction (proofs.epr_insert_room):
decided at once, z3's effort on it depended on the names the symbols got (1.5 to 42 s).
"""

from __future__ import annotations

# make_room's outcome, by the names proofs.epr_sched_evict gives it (``<step>.reclaim``,
# ``.victim``, ``.gone``, ``.fits``), for insert's and load_back's eviction
ROOMS = ("insert_room", "load_room")
OUTCOME = ("reclaim", "victim", "gone", "fits")
SHARED = tuple(f"{r}.{o}" for r in ROOMS for o in OUTCOME)
PER_RANK_VARIANTS = ("lru-local-clock", "partial-backup-leak", "digest-unchecked", "negated-pair-overflow")
PER_RANK_UNDER = {n: PER_RANK_VARIANTS for n in SHARED}

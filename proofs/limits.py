"""z3 resource limits (``rlimit``) of the checks that had wall-clock timeouts.

An rlimit counts z3's own work, so a verdict does not depend on the machine's load the
way a timeout's did. Each limit is per solver call, read at call time (a test may
lower it). A call that runs out reports inconclusive / undecided, never proved, and
`tiercheck prove` exits 3. Each was sized from z3's "rlimit count" over the default
audits (benchmarks/rlimit_use.py; docs/proofs.md, "Resource limits everywhere"):
a safe multiple of the largest use measured. The other bounded checks keep their own
limits where they are sized (obligations.TARGET_RLIMIT, epr_queues.TIER_RLIMIT, ...).
"""

from __future__ import annotations

# epr_obligations.check's direct solver (the page-sorted obligations): largest use
# 8.3M (an upper bound: benchmarks/rlimit_use.py) of 621 calls in `prove --unbounded`;
# about 5x that.
EPR_CHECK_RLIMIT = 40_000_000
# the same with the step's own eviction on (epr_sched_evict.parts: more quantifier
# rounds; its timeout was 3x too): largest use 10.6M (test_proofs_counting_evict's
# insert targets; 5.6M in the audit); about 11x. Both were once passed as milliseconds
# (30000 / 90000) where an rlimit was meant: the insert_evicts obligations ran out, and
# the finite search below ran all its sizes instead (minutes of CPU).
EPR_EVICTS_RLIMIT = 120_000_000

# forest.finite_model, per forest size: the counterexample search over finite forests
# once model-based instantiation gives up (never reached by a clean audit). Largest use
# 183K on the tests that reach it (test_proofs_counting_evict / _insert_room: CTIs at
# small sizes); a size with no model costs more, so 200x that. The timeout was 20 s a
# size, so the sizes' worst case stays about the old one (8 x 40M: minutes).
FINITE_MODEL_RLIMIT = 40_000_000

# consensus.run_theorem (bit-vector theorems and the resolution lemmas): largest use
# 1.44M of 18 theorems; about 7x that.
THEOREM_RLIMIT = 10_000_000

# case_vacuity.vacuous / diverged_excused (through obligations.solve): largest use 68K
# (diverged_excused; vacuous 5.4K); a milliseconds value (30000 / 60000) was passed here
# as the rlimit before, at or under the use. 60x the largest: an undecided case only
# falls back to the full encoding (vacuous) or an unknown rank_agreement (excused).
CASE_VACUITY_RLIMIT = 4_000_000


def resource_units() -> int:
    """z3's resource counter in this process so far (its ``rlimit count``, the context's
    running total): the work done, the same on every run of the same job in a fresh
    process, where CPU seconds move with the machine."""
    import z3

    st = z3.Solver().statistics()
    return next((int(st.get_key_value(k)) for k in st.keys() if k == "rlimit count"), 0)

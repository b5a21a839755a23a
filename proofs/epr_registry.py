"""The duplicate registry and the reclaimed-victim list across the steps that write them,
for page forests of any size.

The page-sorted view (proofs.paged ``REGISTRY``) holds each list's shape, not its
contents: ``dups_wf`` / ``digest_wf`` (distinct page ids) and ``dups_empty`` /
``digest_empty``. registry (proofs/strengthen.py) says both lists are well formed, the
registry empty unless write_back with duplicate reclaim is on (``on``), the victim
list empty unless the digest is tracked (``on`` with more than one rank, spec
sync.tracks_digest). What the spec does to them, by its code, for every list length:

- RankState.dups: entries leave by filters (remove_nodes, reclaim_duplicates' lazy
  deregistration and its reclaims), which keep a list distinct, and join only through
  register_duplicate, which appends ``end`` only if it is not there already and returns
  at once unless ``on``. So the registry stays well formed, and stays as it was
  (empty, by registry at the pre-state) where ``on`` is off.
- RankState.digest: only reclaim_duplicates appends (each reclaimed node once: a
  reclaim drops the node from the registry and its host copy, so neither pass meets it
  again; a step's later evict_host meets what the earlier one left), and only where
  the digest is tracked; untracked, a reclaim sets it to (). The replicated steps
  (insert, evict, load_back, prefetch_from_storage) run only when no round is due
  (spec/model.py: ``round_due``, every rank's list empty while tracked), so after one
  the list is exactly the step's reclaims: distinct. writing_check, loading_check and
  the drain round run digest_round first (tracked: the lists are compared, then
  cleared, or the group halts with them kept) and reclaim nothing;
  check_prefetch_progress leaves the list alone.

``step`` states these per step on the view's registry scalars (in place of the free
values proofs.epr_actions gives the ``REGISTRY_WRITERS``); which reclaims happened,
whether a round cleared the lists, and a tracked registry's emptiness are free. The
agreement tests (tests/proofs/test_proofs_unbounded.py, ``same_view`` compares the
registry scalars) check every explicit step of these actions against it.
"""

from __future__ import annotations

import itertools

import z3

from .epr_properties import b_
from .paged import Paged

_ids = itertools.count()

REPLICATED = ("insert", "evict", "load_back", "prefetch_from_storage")
ROUNDS = ("writing_check", "loading_check", "drain_storage_control_queues")
UNTOUCHED_DIGEST = ("check_prefetch_progress",)
# the steps under which registry is proved here, for any number of pages
ACTIONS = REPLICATED + ROUNDS + UNTOUCHED_DIGEST


def _fresh(name: str):
    return z3.Bool(f"registry.{name}!{next(_ids)}")


def on(u):
    return z3.And(b_(u.cfg.wb), b_(u.cfg.dupr))


def guard(u, pre: Paged) -> list:
    """A replicated step runs only when no round is due: while the victim list is
    tracked, every rank's is empty (spec/model.py ``round_due``)."""
    return [z3.Implies(z3.And(on(u), u.multi), pre.digest_empty)]


def step(u, name: str, pre: Paged, post: Paged) -> Paged:
    """The registry scalars after step ``name`` (one of ``ACTIONS``) from the
    pre-state's (module docstring); the rest of ``post`` as it is."""
    tracked = z3.And(on(u), u.multi)
    # an empty list is well formed (a fact of lists)
    u.facts += [z3.Implies(pre.dups_empty, pre.dups_wf), z3.Implies(pre.digest_empty, pre.digest_wf)]
    dups_empty = z3.If(on(u), _fresh("dups_empty"), pre.dups_empty)
    if name in REPLICATED:
        u.facts += guard(u, pre)
        cleared = _fresh("cleared")  # untracked: a reclaim sets the list to ()
        # tracked: the step's reclaims (each once) appended; one of them may already be
        # listed unless the list was empty
        collides = _fresh("collides")
        digest_wf = z3.If(tracked, z3.And(pre.digest_wf, z3.Or(pre.digest_empty, z3.Not(collides))),
                          z3.Or(pre.digest_wf, cleared))
        digest_empty = z3.If(tracked, _fresh("digest_empty"), z3.Or(pre.digest_empty, cleared))
    elif name in ROUNDS:
        reset = _fresh("round_passed")  # a passing round clears the lists, a halt keeps them
        digest_wf, digest_empty = z3.Or(pre.digest_wf, reset), z3.Or(pre.digest_empty, reset)
    else:
        digest_wf, digest_empty = pre.digest_wf, pre.digest_empty
    return post.update(dups_wf=pre.dups_wf, dups_empty=dups_empty, digest_wf=digest_wf, digest_empty=digest_empty)

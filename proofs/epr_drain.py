"""The sync rounds' collective outcomes over the page sort: the drain round's plan
consensus, durable marks and release queue, check_prefetch_progress's release queue, and
the hung / halted codes and the digest check of every sync round.

One rank's view (proofs.paged) holds its own scalars and the first rank's copies
(``r0_*``). A round's collective outcome is a free choice of the step (``drain_params``),
constrained by what the spec guarantees, and the properties that read the outcome read
the same choice; so every explicit round is one of the encoding's behaviours with the
choices bound to the spec's values (``bind``: tests/proofs/test_proofs_drain.py checks
it), and a proof over all choices covers it.

- Halting and hanging (``flag_facts``): a round halts only on the digest comparison
  (write_back with duplicate reclaim on more than one rank, spec/sync.py), with its own
  code; writing_check hangs only under early-return-collective, check_prefetch_progress
  only under prefetch-vote-skipped and timeout-local-vote, each with its code. A round
  that passes the digest comparison saw this rank's victims equal the first rank's
  (``digest_passed``: ``digest_r0``), except where the comparison is skipped or
  overflows (digest-unchecked, negated-pair-overflow).
- The release queue (``relq``): every rank's queue is the first rank's (shared_queues at
  the pre-state, for every rank), so the drain's MIN over the ranks' lengths is the whole
  queue: the round empties it. check_prefetch_progress appends the unused tail (some
  t >= 0 pages, one entry when t > 0), the same on every rank (the prefetch entry is
  replicated and the completed count is a MIN).
- The plan round (spec/storage_path.py _commit_round): any rank fail-closed (every rank's
  flag is the first rank's, shared_queues), any rank holding a plan (this one holding one
  implies it), whether the property's triples agree (``agree``: proofs/protocol.py
  compares each rank's triple of its committable entries in the pre-state) and whether
  the negated-pair all-reduce passed (``passes``). The step commits where it passes; the
  fixed protocol passes only where the triples agree (values in [0, 2^(w-1) - 1) pass iff
  identical, consensus.agree_iff_identical_at_width, and equal digests of ascending lists
  are equal lists, consensus.plan_digest_injective; the step judges committable entries
  after retiring revoked prefetches, the property before, and the retirement drops the
  same anchors' references on every rank, rank_agreement, so a rank's entries before are
  its entries after with a reference count of 0 before: equal after means equal before).
  Under negated-pair-overflow and the variants whose replicas diverge the two are not
  related. A commit releases planned release candidates only; a mismatch counts the first
  rank's count + 1 on every rank and closes at fail_close_after; the next plan (when the
  round goes on) is any well-formed plan of an open rank.
- The durable marks (``marks``): a page newly marked durable is cached, on one of the
  first MIN-over-ranks acked backups (``drained``, a set of acked pages) and inside the
  prefix this rank takes as completed (``srep``; durable-on-ack: the whole chain); the
  hypothesis ``acks_stored`` (storage_acks, proved for any pages: a writer reports what it
  stored) puts that prefix inside the stored one (``sstored``), which is what
  durable_only_when_acked allows. Acked backups are disjoint chains (backup_queue), so
  the page sets name the entries' prefixes exactly.
"""

from __future__ import annotations

import itertools
from typing import Dict

import z3

from ..spec.state import ABSENT, HOST_RESIDENT, RESIDENT
from . import epr_counting as count
from .epr_properties import DRAIN, SYNC_ROUNDS, b_, node_has_page, released as _released
from .forest import PageSort, forall
from .paged import Paged
from .state import HALT_WHERE, HUNG

_ids = itertools.count()
# the variants under which a round may hang, by round
HANGS = {"writing_check": ("early-return-collective",),
         "check_prefetch_progress": ("prefetch-vote-skipped", "timeout-local-vote")}
# the digest comparison skipped, or its wire arithmetic overflowing
UNCHECKED = ("digest-unchecked", "negated-pair-overflow")

# What these encodings decide, by action (added to epr_actions.UACTIONS targets).
TARGETS = {
    DRAIN: ("durable_only_when_acked", "fail_closed_is_final", "mismatch_fail_closes", "release_after_consensus",
            "release_plan", "release_queue", "shared_queues", "flags", "reclaim_digest_checked"),
    "check_prefetch_progress": ("flags", "no_collective_hang", "release_queue", "shared_queues"),
    "writing_check": ("flags", "no_collective_hang", "reclaim_digest_checked"),
    "loading_check": ("flags", "reclaim_digest_checked"),
}


def tracks(u):
    return u.cfg.tracks_digest(u.multi)


# --- hung, halted and the digest check ------------------------------------------------------


def flag_facts(u, name: str, pre: Paged, post: Paged) -> None:
    """The hung and halted codes a sync round may leave (the pre-state has neither)."""
    if name not in HANGS and name not in SYNC_ROUNDS:
        return
    hang = any(u.cfg.has(v) for v in HANGS.get(name, ()))
    hung_ok = z3.Or(post.hung == 0, post.hung == HUNG[name]) if hang else post.hung == 0
    if name in SYNC_ROUNDS:
        halt_ok = z3.Or(post.halted == 0, z3.And(post.halted == HALT_WHERE[name], b_(tracks(u)), post.hung == 0))
    else:
        halt_ok = post.halted == pre.halted
    u.facts += [hung_ok, halt_ok]


def digest_passed(su) -> list:
    """A sync round that passed (no halt, no hang) with the digest tracked compared this
    rank's victims with the first rank's and found them equal (a fact of the step, given
    to reclaim_digest_checked's solver only: it relates a per-rank field to the shared
    outcome, which the two-view proofs must not see as per-rank)."""
    u, pre, post = su.u, su.pre, su.post
    if su.params.get("action") not in SYNC_ROUNDS or any(u.cfg.has(v) for v in UNCHECKED):
        return []
    return [z3.Implies(z3.And(b_(tracks(u)), post.halted == 0, post.hung == 0), pre.digest_r0)]


def reclaim_digest_checked(u, s, t, a):
    """proofs/protocol.py reclaim_digest_checked for this rank: a passing round saw its
    victim list equal the first rank's."""
    return z3.Implies(z3.And(b_(tracks(u)), s.halted == 0, s.hung == 0, t.halted == 0, t.hung == 0), s.digest_r0)


# --- check_prefetch_progress ------------------------------------------------------------------


def prefetch_tail(u, pre: Paged, post: Paged):
    """The unused tail joins the release queue: some t >= 0 pages, an entry when t > 0, the
    same on the first rank (facts on the step's fresh release-queue values); returns t."""
    t = z3.Int(f"prefetch_tail!{next(_ids)}")
    one = z3.If(t > 0, 1, 0)
    u.facts += [t >= 0] + [post.f[p + "relq_n"] == pre.f[p + "relq_n"] + one for p in ("", "r0_")] + [
        post.f[p + "relq_sum"] == pre.f[p + "relq_sum"] + t for p in ("", "r0_")]
    return t


def prefetch_counts(u, v: Paged, have, new, t) -> Paged:
    """check_prefetch_progress's counters (spec/prefetch.py), on the view after the step:
    the prefetch's n reserved pages leave ``pq_held``; of its completed pages the ones the
    tree had (``have``, the cached part of the fetched segment) go back to host_free and
    the others (``new``, the new host-only node) are held by the tree (a taken set of the
    step's ledger, the counter unmoved); the tail t = n - completed >= 0 joins the release
    queue (``prefetch_tail``), and prefetch-double-free frees it at once as well."""
    n_have, n_new = count.size(u, have, "fetched_had"), count.size(u, new, "fetched_new")
    if hasattr(u, "ledger"):
        u.ledger.append(count.Entry("host_free", -1, new, n_new))
    freed = n_have + (t if u.cfg.has("prefetch-double-free") else 0)
    return v.update(host_free=v.host_free + freed, pq_held=v.pq_held - (n_have + n_new + t))


def drain_counts(u, v: Paged, out: Paged, released, halt) -> Paged:
    """The drain round's counters (spec/storage_path.py): the released mirrors' host pages
    (a freed set of the step's ledger), the release queue's pages (the whole queue: every
    rank's is the first rank's) and the retired revoked prefetches' reserved pages (some
    n >= 0, none if freed already) go back to host_free; the device pool is untouched."""
    out = count.moved(u, out, "host_free", +1, count.node_pages(v, released), name="released")
    out = count.unreserve(u, out)
    return out.update(host_free=out.host_free + z3.If(halt, 0, v.relq_sum))


# --- the drain round ------------------------------------------------------------------------------


def drain_params(u) -> Dict:
    i = next(_ids)
    out = {n: z3.Bool(f"drain_{n}!{i}") for n in ("halt", "any_closed", "any_plan", "agree", "passes", "next_plan")}
    out["drained"] = z3.Function(f"drained!{i}", PageSort, z3.BoolSort())  # the first MIN-over-ranks acks' pages
    out["new_plan"] = z3.Function(f"new_plan!{i}", PageSort, z3.BoolSort())  # the next plan's entries
    return out


def drain_round(u, v: Paged, a) -> Paged:
    """drain_storage_control_queues on one rank: the digest comparison (halt), acks and
    retired prefetches drop host references, the release queue is freed, a committed plan
    releases some of its mirrors, acks add durable marks, the next plan; the tree, the
    locks and every device copy stay.

    The references after the round are not computed (they are counts), only bounded by
    what href_accounting and backup_queue at the pre-state (part of the audit's Inv)
    give for every page count: a live node's count stays >= 0 (the round subtracts, per
    node, the acked backups covering it and the retired prefetches anchored at it, each
    of which the count included), and a node with a page under a backup whose ack has
    not come keeps >= 1 (that backup stays in sq and covers the node: entries cover
    whole nodes). A released mirror is a release candidate when the round commits it
    (spec/host_eviction.py is_redundant_mirror, mirror release on): device and host
    resident, every page durable (before the round's marks, or after them for the
    variants that mark first), unlocked, unreferenced after the acks and not pending a
    load-back (release-busy: not checked); without release-no-consensus it is an entry
    of the plan, committed (module docstring)."""
    from .epr_actions import choice, havoc, reads_settle

    cfg = u.cfg
    halt, any_closed, any_plan, passes = a["halt"], a["any_closed"], a["any_plan"], a["passes"]
    go = z3.Not(halt)
    mirror = b_(cfg.mirror_release_on())
    nocons = cfg.has("release-no-consensus")
    u.facts += [z3.Implies(halt, b_(tracks(u))), any_closed == v.r0_closed, z3.Implies(v.planned, any_plan),
                forall(lambda p: z3.Implies(a["drained"](p), v.sacked(p)))]
    if not cfg.has("negated-pair-overflow"):
        u.facts.append(z3.Implies(passes, a["agree"]))
    open_ = z3.And(go, mirror, z3.Not(any_closed))
    commit = z3.BoolVal(False) if nocons else z3.And(open_, any_plan, passes)
    bad = z3.BoolVal(False) if nocons else z3.And(open_, any_plan, z3.Not(passes))

    released = choice("released")
    out = havoc(v.set_node(released, host=lambda x: z3.IntVal(ABSENT), rel=lambda x: z3.BoolVal(True)),
                "drain", "href", "durable", "sacked", "srep", "sstored")
    busy_ok = lambda x: z3.BoolVal(True) if cfg.has("release-busy") else z3.And(
        v.lock(x) == 0, out.href(x) == 0, z3.Not(v.lbp(x)))
    planned_ok = (lambda x: open_) if nocons else (lambda x: z3.And(commit, v.inplan(x)))
    u.facts.append(forall(lambda x: z3.Implies(released(x), z3.And(
        planned_ok(x), v.live(x), v.dev(x) == RESIDENT, v.host(x) == HOST_RESIDENT, busy_ok(x),
        forall(lambda p: z3.Implies(node_has_page(u, v, x, p), z3.Or(v.durable(p), out.durable(p))))))))
    u.facts.append(forall(lambda x: z3.Implies(v.live(x), out.href(x) >= 0)))
    u.facts.append(forall(lambda p: z3.Implies(z3.And(v.sfly(p), v.cached(p)), out.href(v.own(p)) >= 1)))
    # the marks: cached pages of the drained acks, inside the completed prefix
    acked = v.sacked if cfg.has("durable-on-ack") else v.srep
    u.facts.append(forall(lambda p: z3.Implies(out.durable(p), v.cached(p))))
    u.facts.append(forall(lambda p: z3.Implies(z3.And(out.durable(p), z3.Not(v.durable(p))),
                                               z3.And(go, mirror, a["drained"](p), acked(p)))))
    # revoked prefetches retired: their anchors may stop being anchored
    kept = choice("still_anchored")
    out = out.update(anchored=lambda x: z3.And(v.anchored(x), kept(x)))
    # the plan round (module docstring), on this rank and on the first
    mism = v.r0_mismatch + 1
    closing = mism >= cfg.fail_close_after
    prepared = z3.BoolVal(False) if nocons else z3.And(open_, z3.Not(z3.And(bad, closing)))
    new = {}
    for p in ("", "r0_"):
        new[p + "mismatch"] = z3.If(commit, 0, z3.If(bad, mism, v.f[p + "mismatch"]))
        new[p + "closed"] = z3.If(bad, closing, v.f[p + "closed"])
        new[p + "relq_n"] = z3.If(halt, v.f[p + "relq_n"], 0)
        new[p + "relq_sum"] = z3.If(halt, v.f[p + "relq_sum"], 0)
    new["planned"] = z3.If(prepared, a["next_plan"], z3.If(bad, False, v.planned))
    new["plan_wf"] = z3.If(z3.Or(prepared, bad), True, v.plan_wf)
    new["halted"] = z3.If(halt, HALT_WHERE[DRAIN], 0)
    inplan = lambda p: z3.If(prepared, a["new_plan"](p), z3.And(z3.Not(bad), v.inplan(p)))
    out = out.update(inplan=inplan, **new)
    # the free counters and, retiring settled prefetches, no read into freed slots starts
    out = drain_counts(u, v, out, released, halt)
    return reads_settle(u, out, a).named("drained", u.facts)


# --- the round's properties ----------------------------------------------------------------------


def release_after_consensus(u, s, t, a):
    """proofs/protocol.py release_after_consensus on the drain round: a released mirror is
    an entry of this rank's plan and every rank proposed the identical triple."""
    return forall(lambda e: z3.Implies(_released(u, s, t, e), z3.And(a["agree"], s.inplan(e))))


def mismatch_fail_closes(u, s, t, a):
    """proofs/protocol.py mismatch_fail_closes for this rank: a round (mirror release on,
    no rank closed, some rank planned) whose triples differ and that did not halt releases
    nothing, counts the first rank's mismatch + 1, and closes at fail_close_after."""
    mism = s.r0_mismatch + 1
    round_ = z3.And(b_(u.cfg.mirror_release_on()), s.halted == 0, z3.Not(a["any_closed"]), a["any_plan"],
                    z3.Not(a["agree"]), t.halted == 0)
    none = forall(lambda e: z3.Not(_released(u, s, t, e)))
    return z3.Implies(round_, z3.And(none, t.mismatch == mism,
                                     z3.Implies(mism >= u.cfg.fail_close_after, z3.And(t.closed, z3.Not(t.planned)))))


def durable_only_when_acked(u, s, t, a):
    """spec durable_only_when_acked on the drain round: a page newly marked durable is on
    one of the drained acks, inside the prefix the writer stored."""
    return forall(lambda p: z3.Implies(z3.And(t.durable(p), z3.Not(s.durable(p))),
                                       z3.And(a["drained"](p), s.sstored(p))))


def acks_stored(u, v: Paged):
    """storage_acks in page form (a hypothesis, a consequence of storage_acks and
    backup_queue, proved for any pages in proofs.epr_queues): the prefix a rank takes as
    completed is inside the prefix the writer stored, both on acked chains."""
    return forall(lambda p: z3.And(z3.Implies(v.srep(p), v.sstored(p)), z3.Implies(v.sstored(p), v.sacked(p))))


HYPOTHESES = {"acks_stored": acks_stored}


def hypotheses(su, target: str, action: str) -> list:
    """What an obligation of these encodings assumes besides Inv: the digest comparison's
    outcome (reclaim_digest_checked), acks_stored (durable_only_when_acked, the drain)."""
    if target == "reclaim_digest_checked":
        return digest_passed(su)
    if target == "durable_only_when_acked" and action == DRAIN:
        return [h(su.u, su.pre) for h in HYPOTHESES.values()]
    return []


# --- concrete states and steps (agreement) -------------------------------------------------------


def drain_pages(m, s, r: int) -> dict:
    """The ``DRAIN_PAGES`` relations of rank r of explicit state s, as page index sets."""
    rs = s.ranks[r]
    writer = s.ranks[0] if m.cfg.single_writer else rs
    chain = lambda op: m.pages.chain(*op)
    acked = rs.sq[:len(rs.sdone)]
    n_w = min(len(rs.sdone), len(writer.sdone))
    return {"inplan": set(rs.plan),
            "sacked": {p for op in acked for p in chain(op)},
            "srep": {p for i, op in enumerate(acked) for p in chain(op)[:max(_completed(m, s, r, i), 0)]},
            "sstored": {p for i, op in enumerate(acked[:n_w]) for p in chain(op)[:max(writer.sdone[i].actual, 0)]}}


def _completed(m, s, r: int, i: int) -> int:
    """What rank r takes as completed for its ack slot i (spec _synced_completed; under a
    single writer the writer's report, which every rank gets once the writer acked)."""
    if not m.cfg.single_writer:
        return s.ranks[r].sdone[i].reported
    w = s.ranks[0]
    return w.sdone[i].reported if i < len(w.sdone) and w.sdone[i].reported != -1 else 0


def bind(m, s, a, r: int, params, pages, **fix) -> list:
    """The drain round's collective choices as the explicit step makes them (the
    properties read them): any rank closed or planned, the property's triples agreeing
    (proofs/protocol.py: each rank's committable entries in the pre-state), the drained
    acks' pages. ``fix``: other values for some of them (a test's broken round)."""
    if a.name != DRAIN:
        return []
    from ..spec.storage_path import committable, plan_triple

    triples = [plan_triple(m, rs, committable(m, rs)) for rs in s.ranks]
    nb = min(len(rs.sdone) for rs in s.ranks)
    chosen = {"any_closed": any(rs.closed for rs in s.ranks), "any_plan": any(rs.plan for rs in s.ranks),
              "agree": all(t == triples[0] for t in triples), **fix}
    drained = {p for op in s.ranks[r].sq[:nb] for p in m.pages.chain(*op)}
    return [params[n] == x for n, x in chosen.items()] + [params["drained"](c) == (p in drained)
                                                          for p, c in enumerate(pages)]

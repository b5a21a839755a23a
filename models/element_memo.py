"""Expansion memoised per rank: footprints over single ranks, one template per rank tuple.

The field engine (tiercheck.models.footprint) files each entry of the spec's ACTIONS under
the state fields it read, and ``ranks`` is one field: every new combination of rank
states reran every entry, and an entry that read the store (``storage_backup_done``
writes it) reran on every state. This engine refines both ways:

* **Elements.** The parts a step may read are each rank's state, each rank's store mask
  and the flag pair (tiercheck.models.codec ``Layout.element_masks``), wrapped one by one
  (tiercheck.models.tracked): a step that copies the rank tuple and replaces rank r reads
  rank r only, and the other ranks pass through to the successor's key unread.
* **One guard at a time.** An entry is split into its candidate list
  (``Model.candidates``: parameters, before guards) and, per candidate, its guard, effect
  and transition properties, each memoised on its own footprint. A one-rank step (a DMA
  or a storage write finishing) is then computed once per state of its own rank (and
  store mask), whatever the other ranks hold.
* **Templates.** States that agree on every rank and the flags, and differ only in the
  store, share a template: the expansion's records that did not read the store, and, in
  order, the memo entries that did (looked up per state). Given the ranks and the flags,
  whether a computation reads the store at all is decided by what it read before, so a
  template is the same for every state of its class. Expanding a state is then one
  lookup, the store-reading lookups, and completing each successor's key from the state's.

Records are the plain engine's, bit for bit (keys, parents, action positions, edges,
hits; tested on the shipped models). As there, a successor's key is filed with the bits
of the elements its step passed through unread cleared, comparing a successor with its
state (stuttering) counts as reading what the step wrote, and a wrapper meeting an
operation it lacks reruns that computation on the plain state, unmemoised.
"""

from __future__ import annotations

from tiercheck.models.expand import Expander, failures, steps_from_memo
from tiercheck.models.memo_tables import MISS, file_under, find, open_violations
from tiercheck.models.tracked import Tracked, TrackedRank, TrackedSeq
from tiercheck.spec.model import ACTIONS
from tiercheck.spec.state import RankState, State

RECORD_LIMIT = 3_000_000  # memoised results kept before the tables are cleared
PROBES = 16  # wrapped runs of a memo entry before it may run with only the store wrapped


class ElementMemoExpander(Expander):
    """``Expander`` with the spec's work memoised on per-rank footprints (same records)."""

    def __init__(self, model, props, codec, canon=None):
        super().__init__(model, props, codec, canon)
        lay = codec.layout
        r = lay.ranks
        self.rank_bits = [1 << i for i in range(r)]
        self.store_bits = [1 << (r + i) for i in range(r)]
        self.flag_bit = 1 << (2 * r)
        self.all_bits = (1 << (2 * r + 1)) - 1
        self.elem_masks = lay.element_masks()
        self.store_key = 0
        for mk in self.elem_masks[r : 2 * r]:
            self.store_key |= mk
        self.template_mask = self.elem_masks[2 * r]  # the ranks and the flags
        for mk in self.elem_masks[:r]:
            self.template_mask |= mk
        self._key_masks: dict = {}
        self.rank_hash: dict = {}  # rank gid -> hash of its state (hashing walks nested tuples)
        self.units = [(spec, self.name_id[spec.name], spec.effect) for spec in ACTIONS]
        self.cands: list = []  # candidate id -> (action, unit index)
        self.all_rank_bits = sum(self.rank_bits)
        self.all_store_bits = sum(self.store_bits)
        self.coarse_bits = self.all_rank_bits | self.flag_bit
        self.probes: dict = {}  # memo entry -> wrapped runs so far (see _fine)
        self.narrow: set = set()  # memo entries seen to read fewer than every rank
        self.cand_id: dict = {}
        self.probe_limit = PROBES
        self._ctx_key = None  # the key whose decoded state _context holds
        self._ctx = None
        self.clear()

    def clear(self) -> None:
        self.state_tables: list = []  # [(footprint key mask, {key & mask: record})]
        self.cand_tables = [[] for _ in self.units]  # per unit: candidate ids
        self.step_tables = [[] for _ in self.cands]  # per candidate: its step or None
        self.templates: dict = {}
        self.records = 0
        self.computed = 0  # computations run on the spec (misses), for tests and benchmarks

    def key_mask(self, bits: int) -> int:
        mk = self._key_masks.get(bits)
        if mk is None:
            mk = 0
            for i, m in enumerate(self.elem_masks):
                if bits >> i & 1:
                    mk |= m
            self._key_masks[bits] = mk
        return mk

    _find = staticmethod(find)

    def _file(self, tables, read, key, rec) -> int:
        mask = self.key_mask(read)
        if self.records >= RECORD_LIMIT:
            self.clear()
            return mask  # filed nowhere: the tables were just replaced
        file_under(tables, mask, key, rec)
        self.records += 1
        return mask

    # -- expanding one state ------------------------------------------------------------

    def expand(self, key, open_props=None) -> tuple:
        if self.canon is not None or type(key) is not int:
            return super().expand(key, open_props)
        tpl = self.templates.get(key & self.template_mask)
        if tpl is None:
            tpl = self._template(key)
        srec, items = tpl
        if srec is None:  # the invariants read the store
            srec = self._state_rec(key)
        viols, expanded = srec
        viols = open_violations(viols, open_props)
        if not expanded:
            return (viols, False, [], False)
        if type(items) is tuple:  # every record read only the ranks and flags
            return (viols, True) + steps_from_memo(items, key, open_props)
        recs = []
        for it in items:
            if type(it) is tuple:
                recs.append(it)
            elif it >= 0:  # a candidate whose guard, effect or properties read the store
                rec = self._step_rec(it, key)
                if rec is not None:
                    recs.append(rec)
            else:  # an entry whose candidate list reads the store
                for c in self._cand_rec(-1 - it, key):
                    rec = self._step_rec(c, key)
                    if rec is not None:
                        recs.append(rec)
        steps, frees = steps_from_memo(recs, key, open_props)
        return (viols, True, steps, frees)

    def _template(self, key):
        """The template of ``key``'s class (filed when every part of it is memoisable)."""
        self._ctx_key = None
        self._cacheable = True
        store = self.store_key
        # A record computed unmemoised (mask -1) is right for this state only; it goes
        # into the template as it is, and the template is not filed.
        srec, mask = self._find(self.state_tables, key)
        if srec is MISS:
            srec, mask = self._state_run(key)
        s_item = None if mask & store and mask != -1 else srec
        items = []
        if srec[1]:
            for u in range(len(self.units)):
                cids, mask = self._find(self.cand_tables[u], key)
                if cids is MISS:
                    cids, mask = self._cand_run(u, key)
                if mask & store and mask != -1:
                    items.append(-1 - u)
                    continue
                for c in cids:
                    rec, mask = self._find(self.step_tables[c], key)
                    if rec is MISS:
                        rec, mask = self._step_run(c, key)
                    if mask & store and mask != -1:
                        items.append(c)
                    elif rec is not None:
                        items.append(rec)
        if all(type(it) is tuple for it in items):
            items = tuple(items)  # expand() then completes the records without a look-up
        tpl = (s_item, items)
        if self._cacheable:
            self.templates[key & self.template_mask] = tpl
            self.records += 1
        self._ctx_key = None
        return tpl

    # -- the memo entries, looked up or computed ----------------------------------------

    def _state_rec(self, key):
        rec = self._find(self.state_tables, key)[0]
        return rec if rec is not MISS else self._state_run(key)[0]

    def _cand_rec(self, u, key):
        rec = self._find(self.cand_tables[u], key)[0]
        return rec if rec is not MISS else self._cand_run(u, key)[0]

    def _step_rec(self, c, key):
        rec = self._find(self.step_tables[c], key)[0]
        return rec if rec is not MISS else self._step_run(c, key)[0]

    def _context(self, key):
        """(plain state, rank gids), decoded once per state whose template is missing."""
        if self._ctx_key == key:
            return self._ctx
        ctx = self._ctx = self.codec.decode_gids(key)
        self._ctx_key = key
        return ctx

    def _wrapped(self, key, fine):
        """(plain state, rank gids, box, state to run on, rank wrappers, store wrappers,
        state with only the store masks wrapped). Fresh wrappers for every computation:
        the spec's memo caches remember the arguments they met by identity and answer
        them again without touching them, so a wrapper seen by an earlier computation
        would hide its reads from a later one. A coarse run (``fine`` False) reads the
        ranks and flags plain, so only the store masks are wrapped (no rank wrappers)."""
        s, sgids = self._context(key)
        box = [0]
        selems = [Tracked(v, box, b) for v, b in zip(s.store, self.store_bits)]
        store = TrackedSeq(s.store, box, self.all_store_bits, selems)
        coarse = tuple.__new__(State, (s.ranks, store, s.hung, s.halted))
        if not fine:
            return (s, sgids, box, coarse, None, selems, coarse)
        hashes = self.rank_hash
        relems = []
        for v, g, b in zip(s.ranks, sgids, self.rank_bits):
            h = hashes.get(g)
            if h is None:
                h = hashes[g] = hash(v)
            relems.append(TrackedRank(v, box, b, h))
        x = tuple.__new__(State, (
            TrackedSeq(s.ranks, box, self.all_rank_bits, relems),
            store,
            Tracked(s.hung, box, self.flag_bit),
            Tracked(s.halted, box, self.flag_bit),
        ))
        return (s, sgids, box, x, relems, selems, coarse)

    def _fine(self, tag) -> bool:
        """Whether to run memo entry ``tag`` with every element wrapped. Wrapped ranks cost
        the spec its per-rank memo caches' identity path, so an entry that reads every
        rank in its first PROBES runs (a replicated step, a sync round,
        the invariants) is afterwards run with only the store masks wrapped, and filed as
        having read all ranks and the flags (a superset of what it read: sound, and no
        coarser than what it was seen to read)."""
        if tag in self.narrow:
            return True
        n = self.probes.get(tag, 0)
        if n < self.probe_limit:
            self.probes[tag] = n + 1
            return True
        return False

    def _run(self, tag, tables, key, compute):
        """Look-up miss: ``compute(ctx, state, fine)`` -> (record, may be filed), filed
        under what it read; returns (record, footprint key mask, or -1 when unfiled)."""
        fine = self._fine(tag)
        ctx = self._wrapped(key, fine)
        self.computed += 1
        box = ctx[2]
        try:
            rec, ok = compute(ctx, ctx[3], fine)
        except Exception:  # a wrapper met an operation it lacks: plain, for this state
            self._cacheable = False
            return compute(ctx, ctx[0], None)[0], -1
        if not ok:
            self._cacheable = False
            return rec, -1
        read = box[0]
        if not fine:
            read |= self.coarse_bits
        elif read & self.all_rank_bits != self.all_rank_bits:
            self.narrow.add(tag)
        if read | self.flag_bit == self.coarse_bits:
            # Read the ranks (and perhaps the flags), not the store: only the template
            # of this class can look it up, and the template holds it.
            return rec, self.template_mask
        return rec, self._file(tables, read, key, rec)

    def _state_run(self, key):
        return self._run(-1, self.state_tables, key, lambda ctx, x, fine: (self.state_checks(x), True))

    def _cand_run(self, u, key):
        spec = self.units[u][0]
        return self._run(("u", u), self.cand_tables[u], key, lambda ctx, x, fine: (self._cand_ids(self.m.candidates(x, spec), u), True))

    def _cand_ids(self, acts, u):
        ids = []
        for a in acts:
            c = self.cand_id.get(a)
            if c is None:
                c = self.cand_id[a] = len(self.cands)
                self.cands.append((a, u))
                self.step_tables.append([])
            ids.append(c)
        return tuple(ids)

    def _step_run(self, c, key):
        return self._run(c, self.step_tables[c], key, lambda ctx, x, fine: self._step(c, key, ctx, x, fine))

    def _step(self, c, key, ctx, x, fine):
        """Candidate ``c``'s record from ``key``, run on ``x`` (every element wrapped when
        ``fine``, only the store masks when False, plain when None): None when its guard
        is false, else (name id, successor key with passed elements cleared, their key
        bits, transition violations, frees); and whether it may be filed."""
        m = self.m
        a, u = self.cands[c]
        spec, name_id, effect = self.units[u]
        s, sgids, box = ctx[0], ctx[1], ctx[2]
        if not spec.guard(m, x, a):
            return None, True
        t = effect(m, x, a)
        passed = 0
        if fine is not None:
            t, passed = self._unwrap_successor(t, x, ctx, fine)
            box[0] |= self.all_bits & ~passed  # the stutter test reads what the step wrote
        tkey, canon = self.codec.encode_step(t, s, sgids)
        cacheable = True
        if type(tkey) is not int:
            cacheable = False
            partial, pmask = tkey, 0
        else:
            pmask = self.key_mask(passed)
            partial = tkey & ~pmask
        tv, fr = (), False
        if tkey != key:
            if fine is not None:
                canon = self._as_seen(canon, s, x, ctx, passed, fine)
            tv = failures(self.transitions, m, x, a, canon)
            if a.name == "evict":
                fr = t.ranks[0].dev_free > s.ranks[0].dev_free
                box[0] |= self.rank_bits[0]
        return (name_id, partial, pmask, tv, fr), cacheable

    def _unwrap_successor(self, t, x, ctx, fine):
        """The plain successor of a step run on ``x``, and the element bits it passed
        through unread (the very wrappers, in their own places). A wrapper anywhere else
        is a read of its own element."""
        box, relems, selems = ctx[2], ctx[4], ctx[5]
        store, same = self._unwrap_seq(t.store, x.store, selems, self.store_bits, box)
        hung, halted = t.hung, t.halted
        if fine:
            ranks, r_same = self._unwrap_seq(t.ranks, x.ranks, relems, self.rank_bits, box)
            same |= r_same
            if hung is x.hung and halted is x.halted:
                same |= self.flag_bit
        else:  # coarse: the ranks and flags count as read whatever the step did
            ranks = t.ranks
            if type(ranks) is not tuple or any(type(v) is not RankState for v in ranks):
                ranks = tuple([_plain(v, box) for v in ranks])
        hung, halted = _plain(hung, box), _plain(halted, box)
        for v in ranks:
            if type(v) is not RankState:
                raise TypeError(f"a rank state of type {type(v).__name__}")
        for v in store:
            if type(v) is not int:
                raise TypeError(f"a store mask of type {type(v).__name__}")
        if type(hung) is not str or type(halted) is not str:
            raise TypeError("a flag that is not a str")
        return tuple.__new__(State, (ranks, store, hung, halted)), same

    @staticmethod
    def _unwrap_seq(tv, wv, elems, bits, box):
        if tv is wv:
            return tuple([e.v for e in elems]), sum(bits)
        if isinstance(tv, Tracked):
            tv = tv._get()
        out, same = [], 0
        for i, x in enumerate(tv):
            if i < len(elems) and x is elems[i]:
                same |= bits[i]
                out.append(x.v)
            else:
                out.append(_plain(x, box))
        return tuple(out), same

    def _as_seen(self, canon, s, x, ctx, passed, fine):
        """The successor the transition properties see: an element the step passed
        through (or, wrapped, left equal) is the state's own wrapper, so ``rs is rt``
        between a state and its successor answers as between canonical (interned)
        objects."""
        relems, selems = ctx[4], ctx[5]
        store = tuple([w if passed & b else v for v, w, b in zip(canon.store, selems, self.store_bits)])
        if not fine:
            return tuple.__new__(State, (canon.ranks, store, canon.hung, canon.halted))
        ranks = tuple([
            w if passed & b or v is old else v for v, old, w, b in zip(canon.ranks, s.ranks, relems, self.rank_bits)
        ])
        if passed & self.flag_bit:
            return tuple.__new__(State, (ranks, store, x.hung, x.halted))
        return tuple.__new__(State, (ranks, store, canon.hung, canon.halted))


def _plain(x, box):
    """A value with any wrapper of a state part unwrapped (a read of that part, recorded
    in this computation's box too: a wrapper handed back by a spec memo cache may belong
    to an earlier computation)."""
    if isinstance(x, Tracked):
        box[0] |= x.bit
        return x._get()
    return x

"""Expansion memoised on the state fields each ACTIONS entry reads (``--engine fields``).

The first memo engine, kept for cross-checks and benchmarks; the default,
tiercheck.models.element_memo, refines its footprints to single ranks and single guards.

A global state has a few fields (spec State: the ranks, the store, two flags) and most of
the spec reads only some of them: in wt-mirror-2r the replicated steps and the sync rounds
never read the store, whose contents multiply the state count about tenfold. So the
expander runs the state's invariants, and then each entry of the spec's ACTIONS (its
enabled actions, their effects and the transition properties of their steps), on a state
whose fields are wrapped in ``Tracked`` values that record being read, and files the
result under the fields read: the packed key masked to their bits
(tiercheck.models.codec ``Layout.field_masks``). A later state that agrees on those bits
gets the same result without running the spec: the spec is deterministic and read
nothing else, so it would compute the same. A successor's key is filed with the bits of
the fields its step passed through unread cleared, and completed from the current key;
comparing a successor with its state (stuttering) counts as reading the fields the step
wrote.

Soundness rests on the wrappers seeing every read. A wrapper is not a tuple or a str, so
an operation it does not define fails (TypeError) instead of reading around it, and such
a failure reruns the entry on the plain state, unmemoised. What a wrapper cannot see is
``isinstance``/``type``/``is`` applied to a state field; the spec does none of these (tests
compare memoised and plain expansion on every shipped model, and the pinned state counts
hold). Under symmetry reduction the plain expansion runs (successors are canonicalised).
"""

from __future__ import annotations

import operator
from functools import reduce

from tiercheck.models.expand import Expander, failures, steps_from_memo
from tiercheck.models.memo_tables import MISS, file_under, find, open_violations
from tiercheck.models.tracked import Tracked
from tiercheck.spec.model import ACTIONS
from tiercheck.spec.state import State

RECORD_LIMIT = 3_000_000  # memoised results kept before the tables are cleared


class MemoExpander(Expander):
    """``Expander`` with the spec's work memoised on footprints (same records)."""

    def __init__(self, model, props, codec, canon=None):
        super().__init__(model, props, codec, canon)
        masks = codec.layout.field_masks()
        missing = [f for f in State._fields if f not in masks]
        if missing:
            raise RuntimeError(f"the codec packs no bits for state fields {missing}")
        self.fields = State._fields
        self.masks = [masks[f] for f in State._fields]
        self.bits = [1 << i for i in range(len(self.fields))]
        self.ranks_bit = self.bits[self.fields.index("ranks")]  # what the frees test reads
        # A field whose bits it shares with another (hung, halted) passes through a step
        # only with its partners.
        partners = [sum(b for j, b in enumerate(self.bits) if self.masks[j] & self.masks[i]) for i in range(len(self.fields))]
        n = len(self.fields)
        self.all_bits = (1 << n) - 1
        # By a set of field bits: the key bits of those fields; and, for the fields a
        # step passed through, those whose partners all passed too.
        self.key_mask = [reduce(operator.or_, (self.masks[i] for i in range(n) if bits >> i & 1), 0) for bits in range(1 << n)]
        self.passable = [
            sum(1 << i for i in range(n) if bits >> i & 1 and not partners[i] & ~bits) for bits in range(1 << n)
        ]
        self.entries = [(spec, self.name_id[spec.name], spec.effect) for spec in ACTIONS]
        self.clear()

    def clear(self) -> None:
        # Per unit (0: invariants and constraint, 1 + k: ACTIONS[k]): [(footprint mask,
        # {key & mask: record})], one pair per footprint met.
        self.tables = [[] for _ in range(1 + len(self.entries))]
        self.records = 0
        self.computed = 0  # units run on the spec (misses), for tests and benchmarks

    def _find(self, unit, key):
        rec = find(self.tables[unit], key)[0]
        return None if rec is MISS else rec

    def _file(self, unit, read, key, rec) -> None:
        if self.records >= RECORD_LIMIT:
            self.clear()
        file_under(self.tables[unit], self.key_mask[read], key, rec)
        self.records += 1

    # ------------------------------------------------------------------------------

    def expand(self, key, open_props=None) -> tuple:
        if self.canon is not None or type(key) is not int:
            return super().expand(key, open_props)
        ctx = None  # (state, rank gids, box, wrapped state), built on the first miss
        rec = self._find(0, key)
        if rec is None:
            ctx = self._context(key)
            rec = self._state_unit(key, ctx)
        viols, expanded = rec
        viols = open_violations(viols, open_props)
        if not expanded:
            return (viols, False, [], False)
        recs = []
        for unit in range(1, len(self.tables)):
            rec = self._find(unit, key)
            if rec is None:
                if ctx is None:
                    ctx = self._context(key)
                rec = self._action_unit(unit, key, ctx)
            recs += rec
        steps, frees = steps_from_memo(recs, key, open_props)
        return (viols, True, steps, frees)

    def _context(self, key):
        s, sgids = self.codec.decode_gids(key)
        box = [0]
        ws = tuple.__new__(State, [Tracked(v, box, b) for v, b in zip(s, self.bits)])
        return s, sgids, box, ws

    def _state_unit(self, key, ctx):
        s, _sgids, box, ws = ctx
        self.computed += 1
        box[0] = 0
        try:
            rec = self.state_checks(ws)
        except Exception:
            return self.state_checks(s)  # a wrapper met an operation it lacks: plain
        self._file(0, box[0], key, rec)
        return rec

    def _action_unit(self, unit, key, ctx):
        s, sgids, box, ws = ctx
        self.computed += 1
        box[0] = 0
        try:
            rec, cacheable = self._steps(unit, key, s, sgids, ws, box)
        except Exception:
            rec, cacheable = self._steps(unit, key, s, sgids, s, None)
            return rec
        if cacheable:
            self._file(unit, box[0], key, rec)
        return rec

    def _steps(self, unit, key, s, sgids, ws, box):
        """The records of one ACTIONS entry's steps from ``s``, run on ``ws`` (the wrapped
        state; ``s`` itself when ``box`` is None): (name id, successor key with passed
        fields cleared, their bits, transition violations, frees)."""
        m, codec = self.m, self.codec
        spec, name_id, effect = self.entries[unit - 1]
        out = []
        cacheable = True
        bits = self.bits
        for a in m.enabled(ws, spec):
            t = effect(m, ws, a)
            passed = 0  # field bits passed through unread
            if box is not None:
                same = 0  # fields the step left as they were (the very wrapper)
                for b, x, y in zip(bits, t, ws):
                    if x is y:
                        same |= b
                passed = self.passable[same]
                box[0] |= self.all_bits & ~passed  # the stutter test reads what it wrote
                # Unwrap: a wrapper in another field's place is a read of its own field.
                t = tuple.__new__(State, [(x.v if x is y else x._get()) if type(x) is Tracked else x for x, y in zip(t, ws)])
            tkey, canon = codec.encode_step(t, s, sgids)
            if type(tkey) is not int:
                cacheable = False
                pmask = 0
                partial = tkey
            else:
                pmask = self.key_mask[passed]
                partial = tkey & ~pmask
            tv, fr = (), False
            if tkey != key:
                if passed:  # the properties see passed fields wrapped
                    canon = tuple.__new__(State, [y if passed & b else x for b, x, y in zip(bits, canon, ws)])
                tv = failures(self.transitions, m, ws, a, canon)
                if a.name == "evict":
                    fr = t.ranks[0].dev_free > s.ranks[0].dev_free
                    if box is not None:
                        box[0] |= self.ranks_bit
            out.append((name_id, partial, pmask, tv, fr))
        return tuple(out), cacheable

"""Symmetry reduction: explore one representative per orbit of interchangeable ranks and
interchangeable prefixes.

Two kinds of symmetry, used only where they are sound for this spec:

* Rank permutations. TP ranks run the same code on replicas; a permutation of the ranks
  (with their store shards) maps runs to runs. Not with ``single_writer`` (rank 0 is the
  writer) nor with the ``partial-backup-leak`` variant (write_backup then reads rank 0's
  view first).

* Prefix relabelings: automorphisms of the page forest that map the request set onto
  itself (e.g. the four one-page requests [1], [2], [3], [4] may be permuted freely).
  The spec is *not* invariant under these in general: host-side victims (evict_host) and
  the mirror-release plan follow page-id order, the lexicographic order of token paths,
  and a relabeling that swaps two prefixes reverses their order. The order only decides
  when two nodes hold host pages at once (two host leaves, two release candidates), so
  relabelings are used only when that cannot happen: the host pool is smaller than two
  of the smallest possible nodes. Plans then hold at most one node, so plan digests are
  compared on single values and stay injective. Relabelings are also refused under any
  bug variant (a variant may add an order dependence).

The canonical representative of a state is the least image under the group, in an order
computed from the values alone (not from interning ids), so every process picks the
same one. Only safety properties are checked on the reduced graph; progress and liveness
properties name nodes and rank 0 and are refused (tiercheck.models.checker).

The explored count times nothing is the reduced count; the report also gives the number
of states the representatives stand for (the sum of orbit sizes), which equals the
unreduced count when the group is a symmetry (a test checks this on shipped models).
"""

from __future__ import annotations

from itertools import permutations
from typing import Dict, List, Optional, Tuple

from tiercheck.spec.config import changed
from tiercheck.spec.state import RankState, State

MAX_GROUP = 5040  # prefix relabelings enumerated at most


def _rank_breaking(cfg) -> bool:
    """Ranks are interchangeable only while their replicas agree: replicated steps take
    their parameters from one rank's view. A variant whose bug is replica divergence (its
    record says ``breaks_rank_symmetry``) ends that."""
    from tiercheck.spec.variants import VARIANTS

    return any(VARIANTS[v].breaks_rank_symmetry for v in cfg.variants)


def _unaudited_options(cfg) -> List[str]:
    """Config fields set away from their default whose effect on page order was not
    reviewed for prefix relabelings (spec/config.py, ``symmetry``): an unreviewed option
    may order victims or backups by page id, so it turns relabelings off. Rank
    permutations stay (every option is per rank)."""
    return changed(cfg, lambda c: not c.symmetry)


# --- the group ----------------------------------------------------------------------------


def _signatures(pages, ends) -> List[tuple]:
    sig = [None] * pages.count
    for p in sorted(range(pages.count), key=lambda x: -pages.depth(x)):
        sig[p] = (ends.get(p, 0), tuple(sorted(sig[c] for c in pages.children[p])))
    return sig


def _matchings(ps, qs, sig, pages, budget):
    """Every isomorphism (dict page -> page) mapping the subtrees rooted at ``ps`` onto
    those rooted at ``qs``, signature for signature; OverflowError past ``budget``."""
    classes: Dict[tuple, List[int]] = {}
    for p in ps:
        classes.setdefault(sig[p], []).append(p)
    targets: Dict[tuple, List[int]] = {}
    for q in qs:
        targets.setdefault(sig[q], []).append(q)
    out = [{}]
    for sg, members in classes.items():
        options = []
        for perm in permutations(targets[sg]):
            partial = [{}]
            for p, q in zip(members, perm):
                below = _matchings(pages.children[p], pages.children[q], sig, pages, budget)
                partial = [{**a, **b, p: q} for a in partial for b in below]
                if len(partial) > budget:
                    raise OverflowError
            options += partial
            if len(options) > budget:
                raise OverflowError
        out = [{**a, **b} for a in out for b in options]
        if len(out) > budget:
            raise OverflowError
    return out


def prefix_automorphisms(pages) -> Optional[List[Tuple[Tuple[int, ...], Tuple[int, ...]]]]:
    """(page permutation, request permutation) pairs of the page forest that map the
    request set onto itself, identity first; None when there are more than MAX_GROUP."""
    ends: Dict[int, int] = {}
    for req in pages.request_pages:
        ends[req[-1]] = ends.get(req[-1], 0) + 1
    sig = _signatures(pages, ends)
    try:
        maps = _matchings(pages.roots, pages.roots, sig, pages, MAX_GROUP)
    except OverflowError:
        return None
    by_end: Dict[int, List[int]] = {}
    for i, req in enumerate(pages.request_pages):
        by_end.setdefault(req[-1], []).append(i)
    out = []
    for phi in maps:
        perm = tuple(phi[p] for p in range(pages.count))
        rq = [0] * len(pages.request_pages)
        for e, reqs in by_end.items():
            for i, j in zip(reqs, by_end[perm[e]]):
                rq[i] = j
        out.append((perm, tuple(rq)))
    ident = tuple(range(pages.count))
    out.sort(key=lambda x: x[0] != ident)
    return out


def _min_node_pages(cfg, pages) -> int:
    """The fewest pages a node can have: 1 once nodes can split (two requests share a
    first page) or prefetch can insert a partial run; else the shortest request."""
    reqs = pages.request_pages
    if cfg.prefetch or len({r[0] for r in reqs}) < len(reqs):
        return 1
    return min(len(r) for r in reqs)


def for_model(m):
    """(Symmetry, '') or (None, why no symmetry applies)."""
    cfg = m.cfg
    why = []
    cp = getattr(cfg, "cp_planner", False)
    ranks = cfg.ranks > 1 and not cfg.single_writer and not cp and not _rank_breaking(cfg)
    if cfg.ranks > 1 and not ranks:
        why.append(
            "ranks are not interchangeable (single_writer, the CP planner's owner lanes, or a "
            "variant whose replicas diverge)"
        )
    maps = [(tuple(range(m.pages.count)), tuple(range(len(m.pages.request_pages))))]
    autos = prefix_automorphisms(m.pages)
    if autos is not None and len(autos) > 1:
        if cfg.variants:
            why.append("prefix relabelings are not used under bug variants")
        elif _unaudited_options(cfg):
            why.append(
                "prefix relabelings are not used with option(s) "
                f"{', '.join(_unaudited_options(cfg))} (not audited for page-order dependence)"
            )
        elif UNKNOWN_FIELDS:
            why.append(f"prefix relabelings do not know the state field(s) {', '.join(UNKNOWN_FIELDS)}")
        elif getattr(cfg, "cp_planner", False):
            why.append("prefix relabelings are not used with the CP planner (it orders victims by page)")
        elif cfg.host_pages >= 2 * _min_node_pages(cfg, m.pages):
            why.append(
                "prefixes are interchangeable but the host pool can hold two nodes, whose "
                "victim order (page order) a relabeling would change"
            )
        else:
            maps = autos
    elif autos is None:
        why.append(f"more than {MAX_GROUP} prefix relabelings")
    if not ranks and len(maps) == 1:
        return None, "; ".join(why) or "no interchangeable ranks or prefixes"
    return Symmetry(m, ranks, maps, "; ".join(why)), ""


# --- canonical representatives ------------------------------------------------------------


def _bits(mask: int, perm) -> int:
    out = 0
    while mask:
        low = mask & -mask
        out |= 1 << perm[low.bit_length() - 1]
        mask ^= low
    return out


# How each RankState field changes under a relabeling: "page" fields hold page ids,
# "pages" tuples of them, "spans" (start, end) pairs, "paged" (page, value) pairs; the
# rest are counts and flags.
# A field not listed here (added to the spec later) disables prefix relabelings.
FIELD_KINDS = {
    "owner": "owner", "nodes": "nodes", "dev_free": "same", "host_free": "same",
    "durable": "mask", "wq": "spans", "wdone": "same", "lq": "spans", "ldone": "same",
    "sq": "spans", "sdone": "same", "pq": "prefetches", "pdone": "same", "relq": "same",
    "plan": "pages", "mismatch": "same", "closed": "same", "dups": "pages", "digest": "pages",
    "clock": "pages", "running": "held", "lru": "pages",
    # slot identities: per-page slot arrays move with their pages; slot ids are not pages
    "dslot": "per_page", "hslot": "per_page", "dfree": "same", "hfree": "same",
    "pslots": "same", "rslots": "same",
    # the durable LRU: (page, age) in recency order (non-empty only with options that turn
    # prefix relabelings off, see _unaudited_options)
    "dlru": "page_pairs",
    # prefetch endings: flag bits per prefetch (non-empty only with options that turn
    # prefix relabelings off)
    "pflags": "same",
}
UNKNOWN_FIELDS = [f for f in RankState._fields if f not in FIELD_KINDS]


def relabel_rank(rs: RankState, perm, rq) -> RankState:
    """Rename pages by ``perm`` and requests by ``rq`` in one rank's state."""
    n = len(perm)
    out = []
    for name, v in zip(RankState._fields, rs):
        kind = FIELD_KINDS[name]
        if kind == "same":
            out.append(v)
        elif kind == "owner":
            owner = [-1] * n
            for p in range(n):
                if v[p] >= 0:
                    owner[perm[p]] = perm[v[p]]
            out.append(tuple(owner))
        elif kind == "nodes":
            nodes = [None] * n
            for p in range(n):
                if v[p] is not None:
                    nodes[perm[p]] = v[p]._replace(start=perm[v[p].start])
            out.append(tuple(nodes))
        elif kind == "mask":
            out.append(_bits(v, perm))
        elif kind == "spans":
            out.append(tuple((perm[a], perm[b]) for a, b in v))
        elif kind == "pages":
            out.append(tuple(perm[e] for e in v))
        elif kind == "per_page":
            moved = [-1] * len(v)
            for p, x in enumerate(v):
                moved[perm[p]] = x
            out.append(tuple(moved))
        elif kind == "page_pairs":
            out.append(tuple((perm[p], x) for p, x in v))
        elif kind == "held":
            out.append(tuple(sorted((rq[r], perm[e]) for r, e in v)))
        elif kind == "prefetches":
            out.append(tuple((rq[r], perm[a] if a >= 0 else -1, k, c) for r, a, k, c in v))
    return RankState(*out)


_NODES = RankState._fields.index("nodes")


def _order_key(rs: RankState):
    """A total order on rank states computed from the value alone (hash first, then the
    value itself to break ties), the same in every process."""
    vals = list(rs)
    vals[_NODES] = tuple([() if x is None else x for x in rs.nodes])  # None is unordered
    value = tuple(vals)
    return (hash(value), value)


class Symmetry:
    def __init__(self, m, ranks: bool, maps, note: str = ""):
        self.m = m
        self.ranks = ranks
        self.maps = maps  # [(page perm, request perm)], identity first
        self.note = note
        self._images: Dict[RankState, tuple] = {}  # rank value -> (hashes, images) per map
        self._stores: Dict[tuple, tuple] = {}
        self._interned: Dict[RankState, RankState] = {}

    @property
    def size(self) -> int:
        from math import factorial

        return len(self.maps) * (factorial(self.m.cfg.ranks) if self.ranks else 1)

    def describe(self) -> str:
        parts = []
        if self.ranks:
            parts.append(f"{self.m.cfg.ranks}! rank permutations")
        if len(self.maps) > 1:
            parts.append(f"{len(self.maps)} prefix relabelings")
        return " x ".join(parts)

    def _imgs(self, rs):
        """(order hashes, images) of one rank state under every map (cached by value)."""
        hit = self._images.get(rs)
        if hit is None:
            # Equal images share one object, so ties can be settled by identity.
            intern = self._interned
            imgs = tuple(
                intern.setdefault(x, x)
                for x in (
                    rs if k == 0 else relabel_rank(rs, perm, rq) for k, (perm, rq) in enumerate(self.maps)
                )
            )
            hit = self._images[rs] = (tuple(_order_key(x)[0] for x in imgs), imgs)
        return hit

    def _store_imgs(self, mask: int):
        hit = self._stores.get(mask)
        if hit is None:
            hit = self._stores[mask] = tuple(_bits(mask, perm) for perm, _rq in self.maps)
        return hit

    def _image(self, k, imgs, stores, n):
        """Image of the state under map k, ranks sorted when they permute: a list of
        (order hash, store, rank image); hash ties are broken by the value itself."""
        items = [(imgs[r][0][k], stores[r][k], imgs[r][1][k]) for r in range(n)]
        if self.ranks:
            items.sort(key=lambda x: (x[0], x[1]))
            for a, b in zip(items, items[1:]):
                if a[:2] == b[:2] and a[2] != b[2]:  # a 64-bit hash tie: order by value
                    items.sort(key=lambda x: (x[0], x[1], _order_key(x[2])[1]))
                    break
        return items

    def canonical(self, s: State) -> State:
        n = len(s.ranks)
        imgs = [self._imgs(rs) for rs in s.ranks]
        stores = [self._store_imgs(x) for x in s.store]
        shift = self.m.pages.count
        # One int per (rank, map): order hash then store; compared first, values on ties.
        cols = [[(h << shift) | st for h, st in zip(imgs[r][0], stores[r])] for r in range(n)]
        best_k, best_key, ties = 0, None, []
        for k in range(len(self.maps)):
            key = [c[k] for c in cols]
            if self.ranks:
                key.sort()
            if best_key is None or key < best_key:
                best_k, best_key, ties = k, key, []
            elif key == best_key:
                ties.append(k)
        items = self._image(best_k, imgs, stores, n)
        if self.ranks and len(set(best_key)) < n:
            # Two ranks with equal hash and store: the same object, or decide by value.
            first = {}
            for c, x in zip(best_key, items):
                if first.setdefault(c, x[2]) is not x[2]:
                    return self._canonical_slow(s, imgs, stores, n)
        if ties:  # a stabiliser gives the very same image; anything else: by value
            at = {(h << shift) | st: img for h, st, img in items}
            for k in ties:
                for r in range(n):
                    if at.get(cols[r][k]) is not imgs[r][1][k]:
                        return self._canonical_slow(s, imgs, stores, n)
        return State(tuple(x[2] for x in items), tuple(x[1] for x in items), s.hung, s.halted)

    def _canonical_slow(self, s, imgs, stores, n) -> State:
        """Ties on the order hash (a stabiliser, or a hash collision): decide by value."""
        best, best_full = None, None
        for k in range(len(self.maps)):
            items = self._image(k, imgs, stores, n)
            full = [(h, st, _order_key(img)[1]) for h, st, img in items]
            if best_full is None or full < best_full:
                best, best_full = items, full
        return State(tuple(x[2] for x in best), tuple(x[1] for x in best), s.hung, s.halted)

    def orbit_size(self, s: State) -> int:
        n = len(s.ranks)
        imgs = [self._imgs(rs) for rs in s.ranks]
        stores = [self._store_imgs(x) for x in s.store]
        seen = set()
        for k in range(len(self.maps)):
            items = [(stores[r][k], imgs[r][1][k]) for r in range(n)]
            if self.ranks:
                seen.update(permutations(items))
            else:
                seen.add(tuple(items))
        return len(seen)

    def report(self, search) -> dict:
        decode = search.codec.decode
        return self.summary(len(search.keys), sum(self.orbit_size(decode(k)) for k in search.keys))

    def summary(self, explored: int, represented: int) -> dict:
        """The report of a reduced run: ``explored`` representatives standing for
        ``represented`` states."""
        return {
            "group": self.describe(),
            "group_size": self.size,
            "explored": explored,
            "represented": represented,
            "factor": represented / explored if explored else 1.0,
            "note": self.note,
        }

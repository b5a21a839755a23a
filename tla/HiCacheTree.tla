---------------------------- MODULE HiCacheTree ----------------------------
(***************************************************************************)
(* One rank's state and the pure operators over it: tree queries           *)
(* (spec/state.py), structural edits (spec/tree.py), digests               *)
(* (spec/digest.py) and making room in the host pool                       *)
(* (spec/host_eviction.py).  A rank state is a record with the fields of   *)
(* RankState; a node is named by its end page, nodes[e] is NoNode when no  *)
(* node ends at page e.  Python loops over ordered containers become       *)
(* RECURSIVE operators that walk the same order.                           *)
(***************************************************************************)
EXTENDS HiCacheConfig

ABSENT == 0
RESIDENT == 1
LOADING == 2           \* device states
WRITING == 1
HOST_RESIDENT == 2     \* host states (ABSENT = 0)
SKIP == -1             \* a single-writer follower's storage ack
NOT_DONE == -1         \* pdone entry of a prefetch read still running
\* How a prefetch is ending (spec/prefetch_end.py pflags bits; here a set of them).
TIMED_OUT == "timed_out"
TERMINATED == "terminated"
REVOKED == "revoked"
FREED == "freed"

NoNode == [start |-> -1, dev |-> ABSENT, host |-> ABSENT, lock |-> 0, href |-> 0,
           hits |-> 0, lbp |-> FALSE, rel |-> FALSE]
NewNode(start) == [NoNode EXCEPT !.start = start, !.dev = RESIDENT]

\* lru (victim_order = "lru"): live node ends, least recently used first, by the
\* replicated logical clock; clock is then the rank's wall-clock order of the same touches
\* and its own local ones.
\* (A feature's fields stay << >> or {} while it is off, as in the spec.)
\* Slots only (spec/slots.py): dslot / hslot[p] the device / host slot of page p (-1:
\* none), dfree / hfree the free slots (the spec's bitmasks as sets), pslots / rslots the
\* host slots each prefetch / release-queue entry holds.
\* dlru (durable_capacity / refresh_rounds only): << page, drain rounds since marked >>,
\* least recently marked first.
\* pflags (TracksFlags only): per prefetch, aligned with pq, the set of its ending flags.
\* running[req]: the node end request req locked, -1 when it is not running (the
\* spec's sorted tuple of (request, end) pairs, one per running request).
EmptyRank ==
    [owner |-> TLCEval([p \in Pages |-> -1]), nodes |-> TLCEval([p \in Pages |-> NoNode]),
     dev_free |-> DevicePages, host_free |-> HostPages, durable |-> {},
     wq |-> << >>, wdone |-> 0, lq |-> << >>, ldone |-> 0, sq |-> << >>, sdone |-> << >>,
     pq |-> << >>, pdone |-> << >>, relq |-> << >>, plan |-> << >>, mismatch |-> 0,
     closed |-> FALSE, dups |-> << >>, digest |-> << >>, clock |-> << >>,
     lru |-> << >>, running |-> IF RequestLocks THEN TLCEval([i \in Reqs |-> -1]) ELSE << >>,
     dslot |-> IF Slots THEN TLCEval([p \in Pages |-> -1]) ELSE << >>,
     hslot |-> IF Slots THEN TLCEval([p \in Pages |-> -1]) ELSE << >>,
     dfree |-> IF Slots THEN 0 .. DevicePages - 1 ELSE {},
     hfree |-> IF Slots THEN 0 .. HostPages - 1 ELSE {},
     pslots |-> << >>, rslots |-> << >>, dlru |-> << >>, pflags |-> << >>]

-----------------------------------------------------------------------------
(* Tree queries (spec/state.py).                                           *)

Live(rs, e) == rs.nodes[e].start >= 0
LiveNodes(rs) == {e \in Pages : Live(rs, e)}
NodePages(rs, e) == Chain(rs.nodes[e].start, e)
NodeLen(rs, e) == Depth(e) - Depth(rs.nodes[e].start) + 1

ChildNodes(rs, e) == {rs.owner[c] : c \in {c \in Children[e] : rs.owner[c] >= 0}}

\* The node above e (spec/state.py parent_node), -1 for a child of the root.
ParentNode(rs, e) == IF Parent[rs.nodes[e].start] < 0 THEN -1 ELSE rs.owner[Parent[rs.nodes[e].start]]

\* The tree walks of spec/state.py follow parent and child pointers.  Here they read
\* the constant page tree instead (no recursion): the tree is prefix-closed (a node
\* is only ever added under a cached page and removed with its subtree), a node is
\* named by its end page, and a node's inner pages have no other children, so the
\* nodes above e are the owners of e's ancestor pages, and their ends lie on e's path.

\* inc_lock_ref's walk: e's node and every node above it.
PathToRoot(rs, e) == IF e < 0 THEN {} ELSE {rs.owner[AncAt[e][d]] : d \in 1 .. Depth(e)}

\* The nodes on e's path, top-down (their end pages).
PathEnds(rs, e) == SelectSeq(AncAt[e], LAMBDA p : rs.owner[p] = p)

\* e's node and every node below it.
Subtree(rs, e) == {x \in Pages : Live(rs, x) /\ Depth(x) >= Depth(e) /\ AncAt[x][Depth(e)] = e}

\* Ends of the nodes holding pages of the chain start..end, deduplicated, top-down:
\* a node's pages are consecutive in the chain, so it is named where its run starts.
NodesCovering(rs, s, e) ==
    LET ch == Chain(s, e)
        at == SelectSeq([i \in 1 .. Len(ch) |-> i],
                        LAMBDA i : rs.owner[ch[i]] >= 0 /\ (i = 1 \/ rs.owner[ch[i]] # rs.owner[ch[i - 1]]))
    IN  [j \in 1 .. Len(at) |-> rs.owner[ch[at[j]]]]

AllDurable(rs, e) == \A p \in Range(NodePages(rs, e)) : p \in rs.durable

\* Seed 000's durable LRU (spec/durable.py): a mark's age in drain rounds, capped.
AgeOf(rs, p) ==
    IF \E i \in DOMAIN rs.dlru : rs.dlru[i][1] = p
    THEN rs.dlru[CHOOSE i \in DOMAIN rs.dlru : rs.dlru[i][1] = p][2]
    ELSE RefreshRounds

\* Every mark of the node is younger than refresh_rounds (always, without the gate).
Fresh(rs, e) == RefreshRounds = 0 \/ \A p \in Range(NodePages(rs, e)) : AgeOf(rs, p) < RefreshRounds

\* A drain round passes: every mark is one round older.
AgeRound(rs) ==
    IF rs.dlru = << >> \/ RefreshRounds = 0 THEN rs
    ELSE [rs EXCEPT !.dlru = [i \in DOMAIN rs.dlru |-> << rs.dlru[i][1], Min2(rs.dlru[i][2] + 1, RefreshRounds) >>]]

\* Some mark is younger than the gate: an idle drain round still ages it.
Ageing(rs) == RefreshRounds > 0 /\ \E i \in DOMAIN rs.dlru : rs.dlru[i][2] < RefreshRounds

\* Mark page p durable (most recent, age 0); over capacity the least recently marked
\* pages lose their marks.
MarkPage(rs, p) ==
    LET lru == Append(SelectSeq(rs.dlru, LAMBDA x : x[1] # p), << p, 0 >>)
        drop == IF DurableCapacity > 0 THEN Max2(0, Len(lru) - DurableCapacity) ELSE 0
    IN  [rs EXCEPT !.durable = (@ \cup {p}) \ {lru[j][1] : j \in 1 .. drop},
                   !.dlru = SubSeq(lru, drop + 1, Len(lru))]

RECURSIVE MarkPages(_, _)
MarkPages(rs, ps) ==
    IF ~TracksDurableLru THEN [rs EXCEPT !.durable = @ \cup Range(ps)]
    ELSE IF ps = << >> THEN rs ELSE MarkPages(MarkPage(rs, Head(ps)), Tail(ps))

\* In evictable_leaves: resident, unlocked, no child holds a device copy.
IsDeviceLeaf(rs, e) ==
    /\ rs.nodes[e].dev = RESIDENT
    /\ rs.nodes[e].lock <= 0
    /\ \A c \in ChildNodes(rs, e) : rs.nodes[c].dev = ABSENT

DeviceLeaves(rs) == {e \in LiveNodes(rs) : IsDeviceLeaf(rs, e)}

\* In evictable_host_leaves: evicted, unlocked, host-resident, childless.
IsHostLeaf(rs, e) ==
    /\ rs.nodes[e].dev = ABSENT
    /\ rs.nodes[e].lock = 0
    /\ rs.nodes[e].host = HOST_RESIDENT
    /\ ChildNodes(rs, e) = {}

\* How many leading pages of request req are cached.
MatchedPrefix(rs, req) ==
    LET path == ReqPages[req]
        miss == {i \in 1 .. Len(path) : rs.owner[path[i]] < 0}
    IN  IF miss = {} THEN Len(path) ELSE Min(miss) - 1

\* The pages of a set of live nodes (every page has at most one owner).
SumLenSet(rs, S) == Cardinality({p \in Pages : rs.owner[p] \in S})
SumLen(rs, es) == SumLenSet(rs, Range(es))   \* es: distinct live nodes

-----------------------------------------------------------------------------
(* CP owner lanes of the device pool (spec/cp_planner.py).                 *)

\* Owner lanes (cp_lanes): a page's lane is its path position mod CpLanes; each lane
\* holds an even share of DevicePages (the first lanes take the rest).
Lanes == 0 .. CpLanes - 1
LaneOf(p) == (Depth(p) - 1) % CpLanes
LaneCapacity(l) == DevicePages \div CpLanes + (IF l < DevicePages % CpLanes THEN 1 ELSE 0)
LaneCounts(ps) == [l \in Lanes |-> Cardinality({p \in ps : LaneOf(p) = l})]
SumLanes(f) == SumSeq([i \in 1 .. CpLanes |-> f[i - 1]])

\* Per lane, the pages a device allocation of the page set ps lacks (one lane: the
\* total shortfall).
LaneDeficits(rs, ps) ==
    IF CpLanes = 1 THEN [l \in Lanes |-> Max2(0, Cardinality(ps) - rs.dev_free)]
    ELSE LET need == LaneCounts(ps)
             used == LaneCounts({p \in Pages : rs.owner[p] >= 0 /\ rs.nodes[rs.owner[p]].dev # ABSENT})
         IN  [l \in Lanes |-> Max2(0, need[l] - (LaneCapacity(l) - used[l]))]

AnyDeficit(d) == \E l \in Lanes : d[l] > 0

-----------------------------------------------------------------------------
(* Structural edits (spec/tree.py).                                        *)

AddNode(rs, s, e, node) ==
    LET ps == Range(Chain(s, e))
    IN  [rs EXCEPT !.owner = TLCEval([p \in Pages |-> IF p \in ps THEN e ELSE rs.owner[p]]),
                   !.nodes[e] = [node EXCEPT !.start = s]]

IsDuplicate(rs, e) ==
    Live(rs, e) /\ rs.nodes[e].dev # ABSENT /\ rs.nodes[e].host = HOST_RESIDENT

\* _update_duplicate_tracking at a birth point (ordered dict: re-registering keeps order).
\* (Option settled_duplicates: a node a load-back still reads joins at the load's ack.)
RegisterDuplicate(rs, e) ==
    IF \/ ~(WriteBack /\ DuplicateReclaim) \/ InSeq(e, rs.dups) \/ ~IsDuplicate(rs, e)
       \/ SettledDuplicates /\ rs.nodes[e].lbp
    THEN rs
    ELSE [rs EXCEPT !.dups = Append(@, e)]

RECURSIVE RegisterDuplicates(_, _)
RegisterDuplicates(rs, es) ==
    IF es = << >> THEN rs ELSE RegisterDuplicates(RegisterDuplicate(rs, Head(es)), Tail(es))

-----------------------------------------------------------------------------
(* Slot identities (spec/slots.py): allocation takes the lowest free slots, *)
(* assigned to the pages in path order.  No-ops without Slots.             *)

LowestSlots(free, n) == SubSeq(Sorted(free), 1, Min2(n, Cardinality(free)))

\* owner with the i-th page of `pages` given the i-th slot of `got` (zip: the shorter wins).
Assign(owner, pages, got) ==
    LET n == Min2(Len(pages), Len(got))
        at == {pages[i] : i \in 1 .. n}
    IN  [p \in Pages |-> IF p \in at THEN got[CHOOSE i \in 1 .. n : pages[i] = p] ELSE owner[p]]

\* Give the pages (a sequence) the lowest free slots of pool "d" or "h".
TakeSlots(rs, pool, pages) ==
    IF ~Slots THEN rs
    ELSE IF pool = "d"
    THEN LET got == LowestSlots(rs.dfree, Len(pages))
         IN  [rs EXCEPT !.dslot = Assign(@, pages, got), !.dfree = @ \ Range(got)]
    ELSE LET got == LowestSlots(rs.hfree, Len(pages))
         IN  [rs EXCEPT !.hslot = Assign(@, pages, got), !.hfree = @ \ Range(got)]

\* Return the slots of a set of pages to the pool's free set.
GiveSlots(rs, pool, ps) ==
    IF ~Slots THEN rs
    ELSE IF pool = "d"
    THEN [rs EXCEPT !.dfree = @ \cup {rs.dslot[p] : p \in {q \in ps : rs.dslot[q] >= 0}},
                    !.dslot = [p \in Pages |-> IF p \in ps THEN -1 ELSE @[p]]]
    ELSE [rs EXCEPT !.hfree = @ \cup {rs.hslot[p] : p \in {q \in ps : rs.hslot[q] >= 0}},
                    !.hslot = [p \in Pages |-> IF p \in ps THEN -1 ELSE @[p]]]

\* A prefetch reserves n host slots: << rank state, slots >>.
ReserveSlots(rs, n) ==
    IF ~Slots THEN << rs, << >> >>
    ELSE LET got == LowestSlots(rs.hfree, n) IN << [rs EXCEPT !.hfree = @ \ Range(got)], got >>

ReleaseSlots(rs, got) == IF ~Slots THEN rs ELSE [rs EXCEPT !.hfree = @ \cup Range(got)]

\* Reserved host slots become the host copies of the pages (a prefetch inserted).
AdoptSlots(rs, pages, got) == IF ~Slots THEN rs ELSE [rs EXCEPT !.hslot = Assign(@, pages, got)]

\* Variant split-slice-off-by-one: the lower half's device slots are sliced one page
\* early: its first page takes the upper half's last slot, its own last slot is lost.
SplitSlots(rs, lower, at) ==
    IF ~Slots THEN rs
    ELSE LET old == << rs.dslot[at] >> \o [i \in DOMAIN lower |-> rs.dslot[lower[i]]]
         IN  [rs EXCEPT !.dslot = Assign(@, lower, old)]

-----------------------------------------------------------------------------
(* Access order (victim_order = "lru", spec/tree.py touch).                *)

Moved(order, es) == SelectSeq(order, LAMBDA x : ~InSeq(x, es)) \o es

\* The nodes a replicated step accessed become the most recent, in access order.
TouchLru(rs, es) ==
    IF ~Lru \/ es = << >> THEN rs
    ELSE [rs EXCEPT !.lru = Moved(@, es), !.clock = Moved(@, es)]

\* A split's upper half `at` copies `end`'s stamp, just before it.
CopyStamp(order, end, at) ==
    LET i == CHOOSE j \in DOMAIN order : order[j] = end
    IN  SubSeq(order, 1, i - 1) \o << at >> \o SubSeq(order, i, Len(order))

\* The order host-side victims are taken in: the replicated LRU order, or (variant
\* lru-local-clock) the rank's wall-clock order.
VictimOrderOf(rs) == IF Has("lru-local-clock") THEN rs.clock ELSE rs.lru

\* The first victim of a nonempty set of live nodes.
FirstVictim(rs, S) == IF Lru THEN SelectSeq(VictimOrderOf(rs), LAMBDA x : x \in S)[1] ELSE Min(S)

-----------------------------------------------------------------------------

\* _split_node: cut node `e` after page `at`; the upper half ends at `at`.
SplitNode(rs, e, at) ==
    LET old == rs.nodes[e]
        lowerStart == CHOOSE p \in Range(Chain(old.start, e)) : Parent[p] = at
        backups == Cardinality({i \in DOMAIN rs.sq : at \in Range(Chain(rs.sq[i][1], rs.sq[i][2]))})
        upper == [old EXCEPT !.href = IF Has("split-during-backup") THEN 0 ELSE backups,
                             !.lbp = IF Has("split-drops-pending-mark") THEN FALSE ELSE old.lbp]
        rs1 == AddNode(rs, old.start, at, upper)
        rs2 == [rs1 EXCEPT !.nodes[e] = [old EXCEPT !.start = lowerStart]]
        rs3 == IF Has("split-slice-off-by-one") /\ old.dev # ABSENT
               THEN SplitSlots(rs2, Chain(lowerStart, e), at) ELSE rs2
        rs4 == IF Lru THEN [rs3 EXCEPT !.lru = CopyStamp(@, e, at), !.clock = CopyStamp(@, e, at)]
               ELSE rs3
    IN  RegisterDuplicate(rs4, at)

EnsureBoundary(rs, page) ==
    LET e == rs.owner[page] IN IF e >= 0 /\ e # page THEN SplitNode(rs, e, page) ELSE rs

\* Take nodes out of the tree: durable marks revoked, registry entries dropped.
RemoveNodes(rs, ends) ==
    LET ps == UNION {Range(NodePages(rs, e)) : e \in ends}
    IN  [rs EXCEPT !.owner = TLCEval([p \in Pages |-> IF p \in ps THEN -1 ELSE rs.owner[p]]),
                   !.nodes = TLCEval([p \in Pages |-> IF p \in ends THEN NoNode ELSE rs.nodes[p]]),
                   !.durable = @ \ ps,
                   !.dlru = SelectSeq(@, LAMBDA x : x[1] \notin ps),
                   !.dups = SelectSeq(@, LAMBDA d : d \notin ends),
                   !.lru = IF Lru THEN SelectSeq(@, LAMBDA d : d \notin ends) ELSE @,
                   !.clock = IF Lru THEN SelectSeq(@, LAMBDA d : d \notin ends) ELSE @]

\* inc_lock_ref / dec_lock_ref: every node from e up to the root.
LockPath(rs, e, delta) ==
    LET up == PathToRoot(rs, e)
    IN  [rs EXCEPT !.nodes = TLCEval([x \in Pages |-> IF x \in up
                                                       THEN [rs.nodes[x] EXCEPT !.lock = @ + delta]
                                                       ELSE rs.nodes[x]])]

FreeNodeHost(rs, e) ==
    [GiveSlots(rs, "h", Range(NodePages(rs, e))) EXCEPT !.host_free = @ + NodeLen(rs, e),
                                                        !.nodes[e].host = ABSENT]

-----------------------------------------------------------------------------
(* Digests (spec/digest.py).  TLC integers are 32-bit, so products are     *)
(* taken modulo the wire width by doubling (MulMod), which needs m < 2^30. *)

Mult == 1000003

RECURSIVE MulModBits(_, _, _)
MulModBits(a, b, m) ==
    IF b = 0 THEN 0
    ELSE LET h == MulModBits(a, b \div 2, m)
         IN  (((2 * h) % m) + (IF b % 2 = 1 THEN a ELSE 0)) % m

\* a * b % m for 0 <= a, b < m: directly while m * m fits in 31 bits.
MulMod(a, b, m) == IF m <= 46340 THEN (a * b) % m ELSE MulModBits(a, b, m)

Wrap(x) ==   \* two's-complement wrap to a signed DigestBits-wide integer
    LET m == 2 ^ DigestBits  y == x % m IN IF y >= m \div 2 THEN y - m ELSE y

Mix(d, node) ==
    IF Has("negated-pair-overflow")
    THEN LET m == 2 ^ DigestBits IN Wrap(MulMod(d % m, Mult % m, m) + node + 1)
    ELSE LET m == 2 ^ (DigestBits - 1) - 1 IN (MulMod(d % m, Mult % m, m) + node + 1) % m

RECURSIVE WireFrom(_, _)
WireFrom(d, s) == IF s = << >> THEN d ELSE WireFrom(Mix(d, Head(s)), Tail(s))
WireDigest(s) == WireFrom(0, s)

\* What every rank concludes from MIN over [x, -x] in DigestBits-wide arithmetic.
NegatedPairsAgree(values) ==
    LET lo == Min({Wrap(v) : v \in values})
        negLo == Min({Wrap(-v) : v \in values})
    IN  lo = Wrap(-negLo)

\* seqs: rank -> victims since the last round.
DigestsAgree(seqs) ==
    IF Has("negated-pair-overflow")
    THEN NegatedPairsAgree({WireDigest(seqs[r]) : r \in RankIds})
    ELSE \A r \in RankIds : seqs[r] = seqs[0]

-----------------------------------------------------------------------------
(* Making room in the host pool (spec/host_eviction.py).                   *)

CanReclaimDuplicate(rs, e) ==
    /\ Live(rs, e)
    /\ IsDuplicate(rs, e)
    /\ rs.nodes[e].href <= 0
    /\ (~rs.nodes[e].lbp \/ Has("reclaim-during-loadback"))

\* One pass of _reclaim_full_host_duplicates over the registry snapshot `todo`:
\* << rank state, pages freed, stopped because enough was freed >>.
RECURSIVE ReclaimPass(_, _, _, _, _)
ReclaimPass(rs, todo, need, freed, spare) ==
    IF todo = << >> THEN << rs, freed, FALSE >>
    ELSE IF freed >= need THEN << rs, freed, TRUE >>
    ELSE LET e == Head(todo) IN
         IF ~CanReclaimDuplicate(rs, e)
         THEN ReclaimPass(IF IsDuplicate(rs, e) THEN rs ELSE [rs EXCEPT !.dups = Remove(@, e)],
                          Tail(todo), need, freed, spare)
         ELSE IF spare /\ IsDeviceLeaf(rs, e)
         THEN ReclaimPass(rs, Tail(todo), need, freed, spare)
         ELSE LET rs1 == FreeNodeHost(rs, e)
                  rs2 == [rs1 EXCEPT !.dups = Remove(@, e),
                                     !.digest = IF TracksDigest THEN Append(@, e) ELSE << >>]
              IN  ReclaimPass(rs2, Tail(todo), need, freed + NodeLen(rs, e), spare)

\* First pass spares evictable device leaves, the second does not: << rs, freed >>.
ReclaimDuplicates(rs, need) ==
    IF Has("reclaim-demote-leaf")
    THEN LET p == ReclaimPass(rs, rs.dups, need, 0, FALSE) IN << p[1], p[2] >>
    ELSE LET p1 == ReclaimPass(rs, rs.dups, need, 0, TRUE)
         IN  IF p1[3] THEN << p1[1], p1[2] >>
             ELSE LET p2 == ReclaimPass(p1[1], p1[1].dups, need, p1[2], FALSE)
                  IN  << p2[1], p2[2] >>

\* Host leaves in victim order (lowest end page first, or LRU) until `need` pages are freed.
RECURSIVE EvictHostLeaves(_, _, _)
EvictHostLeaves(rs, need, freed) ==
    IF freed >= need THEN rs
    ELSE LET leaves == {e \in LiveNodes(rs) : IsHostLeaf(rs, e) /\ rs.nodes[e].href = 0}
         IN  IF leaves = {} THEN rs
             ELSE LET v == FirstVictim(rs, leaves)  size == NodeLen(rs, v)
                  IN  EvictHostLeaves([RemoveNodes(GiveSlots(rs, "h", Range(NodePages(rs, v))), {v})
                                          EXCEPT !.host_free = rs.host_free + size],
                                      need, freed + size)

\* evict_host(need): free at least `need` host pages if it can.
EvictHost(rs, need) ==
    IF WriteBack /\ DuplicateReclaim
    THEN LET r == ReclaimDuplicates(rs, need) IN EvictHostLeaves(r[1], need, r[2])
    ELSE EvictHostLeaves(rs, need, 0)

\* Host allocation of need[i] pages on each rank i with evict_host as the fallback:
\* << ranks, ok per rank >>.  `agree`: the outcome is agreed by a MIN all-reduce.
\* (Option evict_host_shortfall: the fallback asks evict_host for what is missing.)
AllocateHost(rks, need, failing, agree) ==
    LET LocalOk(x, i) == i \notin failing /\ x[i].host_free >= need[i]
        Evict(rs, i) == EvictHost(rs, IF EvictHostShortfall THEN Max2(0, need[i] - rs.host_free) ELSE need[i]) IN
    IF agree
    THEN IF \A i \in RankIds : LocalOk(rks, i)
         THEN << rks, [i \in RankIds |-> TRUE] >>
         ELSE LET r2 == TLCEval([i \in RankIds |-> Evict(rks[i], i)])
                  ok == \A i \in RankIds : LocalOk(r2, i)
              IN  << r2, [i \in RankIds |-> ok] >>
    ELSE LET r2 == TLCEval([i \in RankIds |-> IF LocalOk(rks, i) THEN rks[i] ELSE Evict(rks[i], i)])
         IN  << r2, TLCEval([i \in RankIds |-> LocalOk(r2, i)]) >>

\* Seed 000's release candidate: a mirror the storage tier makes redundant.
IsRedundantMirror(rs, e) ==
    /\ Live(rs, e)
    /\ rs.nodes[e].dev = RESIDENT
    /\ rs.nodes[e].host = HOST_RESIDENT
    /\ AllDurable(rs, e)
    /\ \/ Has("release-busy")
       \/ rs.nodes[e].lock = 0 /\ rs.nodes[e].href = 0 /\ ~rs.nodes[e].lbp

=============================================================================

------------------------------ MODULE HiCache ------------------------------
(***************************************************************************)
(* HiCache node tier states: the TLA+ twin of tiercheck.spec (spec/*.py).  *)
(*                                                                         *)
(* One operator per entry of spec/model.py ACTIONS, named like the Python  *)
(* function, with the same guard and effect.  The state is State of        *)
(* spec/state.py: per rank a record with the fields of RankState, the      *)
(* store (per rank: the set of pages it holds) and the two stop flags.     *)
(* Sequences are 1-based here where Python tuples are 0-based; page, rank  *)
(* and request ids are the same numbers as in Python.                      *)
(*                                                                         *)
(* Generate a runnable model with `tiercheck tla MODEL.toml -o DIR`.        *)
(***************************************************************************)
EXTENDS HiCacheTree

VARIABLES
    ranks,    \* rank id -> rank state (RankState)
    store,    \* rank id -> set of pages whose shard the store holds
    hung,     \* "" or the sync point where a rank waits for peers that skipped it
    halted    \* "" or the message of a sync round that detected diverged replicas

vars == << ranks, store, hung, halted >>

Init ==
    /\ ranks = [r \in RankIds |-> EmptyRank]
    /\ store = [r \in RankIds |-> {}]
    /\ hung = ""
    /\ halted = ""

-----------------------------------------------------------------------------
(* Sync rounds (spec/sync.py): the digest part every ready-count round     *)
(* carries.  A failed [digest, -digest] check stops the group.             *)

DigestHalts ==
    TracksDigest /\ ~Has("digest-unchecked") /\ ~DigestsAgree([r \in RankIds |-> ranks[r].digest])

HaltMessage(where) == where \o ": duplicate-reclaim victims diverged across ranks"

\* The ranks after a passing digest round: victims since the last round cleared.
AfterDigest ==
    IF TracksDigest /\ \E r \in RankIds : ranks[r].digest # << >>
    THEN TLCEval([r \in RankIds |-> [ranks[r] EXCEPT !.digest = << >>]])
    ELSE ranks

\* The next round's digest comparison (as its arithmetic computes it) fails.
DigestCheckWillFire == DigestHalts

\* A reclaim happened since the last round: no replicated step before the round.
RoundDue == TracksDigest /\ \E r \in RankIds : ranks[r].digest # << >>

MinOver(f) == Min({f[r] : r \in RankIds})

-----------------------------------------------------------------------------
(* evict (spec/eviction.py).                                               *)

\* _evict_backuped: free the device copy; the host copy stays.
Demote(rs, e) ==
    [GiveSlots(rs, "d", Range(NodePages(rs, e))) EXCEPT !.dev_free = @ + NodeLen(rs, e),
                                                       !.nodes[e].dev = ABSENT]

\* Every node below e is host-only and free of references.
Prunable(rs, e) ==
    \A d \in Subtree(rs, e) \ {e} : rs.nodes[d].href = 0 /\ rs.nodes[d].lock = 0

\* _evict_regular without a host copy: delete e and prune its host-only subtree.
Delete(rs, e) ==
    LET below == Subtree(rs, e) \ {e}
        freedHost == IF Has("orphan-host-subtree") THEN 0 ELSE SumLenSet(rs, below)
        rs1 == GiveSlots(rs, "d", Range(NodePages(rs, e)))
        rs2 == IF Has("orphan-host-subtree") THEN rs1
               ELSE GiveSlots(rs1, "h", {p \in Pages : rs.owner[p] \in below})
    IN  RemoveNodes([rs2 EXCEPT !.dev_free = @ + NodeLen(rs, e), !.host_free = @ + freedHost],
                    {e} \cup below)

\* e is evicted as a device leaf on this rank: an evictable leaf, or (forced: variant
\* lru-evicts-locked-parent) a resident node without device children whatever its lock.
LeafOn(rs, e, forced) ==
    /\ e >= 0
    /\ Live(rs, e)
    /\ IF forced THEN rs.nodes[e].dev = RESIDENT /\ \A c \in ChildNodes(rs, e) : rs.nodes[c].dev = ABSENT
       ELSE IsDeviceLeaf(rs, e)

\* One rank's eviction of a leaf when no host write is needed.
EvictLeaf(rs, e) ==
    IF rs.nodes[e].host = HOST_RESIDENT THEN Demote(rs, e)
    ELSE IF Has("orphan-host-subtree") \/ Prunable(rs, e) THEN Delete(rs, e)
    ELSE rs    \* a busy host-only descendant keeps the node for now

EvictOne(rs, e, forced) == IF LeafOn(rs, e, forced) THEN EvictLeaf(rs, e) ELSE rs

\* write_back: stage the node to host (blocking writing_check), then demote.
StageAndDemote(rs, e) ==
    LET n == rs.nodes[e]
        rs1 == [TakeSlots(rs, "h", NodePages(rs, e))
                EXCEPT !.host_free = @ - NodeLen(rs, e),
                       !.nodes[e] = [n EXCEPT !.host = HOST_RESIDENT,
                                                 !.href = @ + (IF Storage THEN 1 ELSE 0)]]
        rs2 == RegisterDuplicate(rs1, e)
        rs3 == IF Storage THEN [rs2 EXCEPT !.sq = Append(@, << n.start, e >>)] ELSE rs2
    IN  Demote(rs3, e)

\* Option wb_drop_unbacked: nothing in e's subtree is locked, host-referenced or
\* load-back pending (its descendants are host-only: e is a device leaf).
Droppable(rs, e) ==
    \A d \in Subtree(rs, e) : rs.nodes[d].lock = 0 /\ rs.nodes[d].href = 0 /\ ~rs.nodes[d].lbp

\* A write_back victim whose backup was rejected stays on the device, or (option
\* wb_drop_unbacked, drop_subtree_no_host) is dropped with its host-only subtree.
Unbacked(rs, e) == IF WbDropUnbacked /\ Droppable(rs, e) THEN Delete(rs, e) ELSE rs

\* One device eviction on every rank (spec/eviction.py evict_nodes): rank r evicts leaf
\* victims[r] (-1: none), forced[r] whatever its lock.  Under write_back a victim without
\* a host copy is staged first, with an agreed host allocation: every rank asks for the
\* lowest writing rank's node length and takes its own node's (partial-backup-leak: each
\* rank asks for its own, alone).
EvictNodes(rks, victims, fail, forced) ==
    LET needsWrite == TLCEval([r \in RankIds |-> /\ LeafOn(rks[r], victims[r], forced[r])
                                                 /\ rks[r].nodes[victims[r]].host = ABSENT])
    IN  IF ~(WriteBack /\ \E r \in RankIds : needsWrite[r])
        THEN TLCEval([r \in RankIds |-> EvictOne(rks[r], victims[r], forced[r])])
        ELSE LET holder == Min({r \in RankIds : needsWrite[r]})
                 agree == ~Has("partial-backup-leak")
                 need == IF agree THEN [r \in RankIds |-> NodeLen(rks[holder], victims[holder])]
                         ELSE [r \in RankIds |-> IF needsWrite[r] THEN NodeLen(rks[r], victims[r]) ELSE 0]
                 alloc == AllocateHost(rks, need, fail, agree)
             IN  TLCEval([r \in RankIds |->
                            IF ~needsWrite[r] THEN EvictOne(alloc[1][r], victims[r], forced[r])
                            ELSE IF ~alloc[2][r] THEN Unbacked(alloc[1][r], victims[r])
                            ELSE StageAndDemote(alloc[1][r], victims[r])])

\* The evict action names the same node on every rank.
EvictEffect(e, fail) == EvictNodes(ranks, [r \in RankIds |-> e], fail, [r \in RankIds |-> FALSE])

evict(e, fail) ==
    /\ \E r \in RankIds : Live(ranks[r], e) /\ IsDeviceLeaf(ranks[r], e)
    /\ ranks' = EvictEffect(e, fail)
    /\ UNCHANGED << store, hung, halted >>

-----------------------------------------------------------------------------
(* The scheduler's own eviction (spec/eviction.py evict_lru, make_room):   *)
(* seed 004's evict(num_tokens), run by insert (insert_evicts) and by       *)
(* load_back (load_back_evicts) when the device pool lacks room.           *)

\* Per rank, pop evictable device leaves in victim order (FirstVictim: the end page, or
\* the LRU order) until want[r] device pages are freed or no leaf is left; a victim
\* that frees nothing (busy host-only descendants, a rejected write-back) is skipped
\* (stuck).  Variant lru-evicts-locked-parent: after a victim, its parent joins the
\* candidates once no child holds a device copy, and is popped without the lock check.
RECURSIVE EvictLruLoop(_, _, _, _, _, _)
EvictLruLoop(rks, want, freed, stuck, pushed, fail) ==
    LET Cands(r) == IF freed[r] >= want[r] THEN {}
                    ELSE {e \in LiveNodes(rks[r]) \ stuck[r] :
                             IsDeviceLeaf(rks[r], e) \/ (e \in pushed[r] /\ LeafOn(rks[r], e, TRUE))}
        victims == TLCEval([r \in RankIds |-> LET c == Cands(r) IN IF c = {} THEN -1 ELSE FirstVictim(rks[r], c)])
    IN  IF \A r \in RankIds : victims[r] = -1 THEN rks
        ELSE LET forced == [r \in RankIds |-> victims[r] >= 0 /\ ~IsDeviceLeaf(rks[r], victims[r])]
                 after == EvictNodes(rks, victims, fail, forced)
                 got == TLCEval([r \in RankIds |-> after[r].dev_free - rks[r].dev_free])
                 Up(r) == ParentNode(rks[r], victims[r])
             IN  EvictLruLoop(after, want,
                              [r \in RankIds |-> IF victims[r] >= 0 THEN freed[r] + got[r] ELSE freed[r]],
                              [r \in RankIds |-> IF victims[r] >= 0 /\ got[r] = 0 THEN stuck[r] \cup {victims[r]}
                                                 ELSE stuck[r]],
                              [r \in RankIds |-> IF /\ Has("lru-evicts-locked-parent")
                                                    /\ victims[r] >= 0 /\ got[r] # 0
                                                    /\ Up(r) >= 0 /\ Live(after[r], Up(r))
                                                 THEN pushed[r] \cup {Up(r)} ELSE pushed[r]],
                              fail)

\* Every rank short of needs[r] device pages evicts the shortfall while hold[r] (a node
\* end, or -1) and its path stay locked.
MakeRoom(rks, needs, hold, fail) ==
    LET locked == TLCEval([r \in RankIds |-> IF hold[r] >= 0 THEN LockPath(rks[r], hold[r], 1) ELSE rks[r]])
        done == EvictLruLoop(locked, [r \in RankIds |-> Max2(0, needs[r] - rks[r].dev_free)],
                             [r \in RankIds |-> 0], [r \in RankIds |-> {}], [r \in RankIds |-> {}], fail)
    IN  TLCEval([r \in RankIds |-> IF hold[r] >= 0 /\ Live(done[r], hold[r])
                                   THEN LockPath(done[r], hold[r], -1) ELSE done[r]])

-----------------------------------------------------------------------------
(* insert (spec/write_path.py).                                            *)

\* Variant page-ceil-match: the walk takes a cached sibling page whose leading token
\* matches (the token match rounded up to the page), so it follows the tree itself.
SamePage(cached, wanted) ==
    \/ cached = wanted
    \/ Has("page-ceil-match") /\ Parent[cached] = Parent[wanted] /\ Tokens(cached)[1] = Tokens(wanted)[1]

\* The cached page the walk takes for request page `wanted` at a node boundary, -1 if none.
CachedAs(rs, wanted) ==
    IF rs.owner[wanted] >= 0 THEN wanted
    ELSE LET sibs == {c \in (IF Parent[wanted] >= 0 THEN Children[Parent[wanted]] ELSE Roots) :
                         rs.owner[c] >= 0 /\ SamePage(c, wanted)}
         IN  IF sibs = {} THEN -1 ELSE Min(sibs)

RECURSIVE CeilWalk(_, _, _, _)
CeilWalk(rs, path, pos, items) ==
    IF pos >= Len(path) \/ CachedAs(rs, path[pos + 1]) < 0 THEN items
    ELSE LET e == rs.owner[CachedAs(rs, path[pos + 1])]
             np == NodePages(rs, e)
             k == Max({j \in 0 .. Min2(Len(np), Len(path) - pos) :
                          \A i \in 1 .. j : SamePage(np[i], path[pos + i])})
         IN  CeilWalk(rs, path, pos + k,
                      Append(items, [end |-> e, k |-> k, split |-> IF k < Len(np) THEN np[k] ELSE -1]))

\* The cached part of request req: per node << end, pages matched, split page or -1 >>.
\* The walk from the root meets each node at the first page of its run on the path
\* and matches the run; a node whose run stops short of its end is split there (only
\* the last one can be: a node's inner pages have no other children).
Walk(rs, req) ==
    IF Has("page-ceil-match") THEN CeilWalk(rs, ReqPages[req], 0, << >>) ELSE
    LET path == ReqPages[req]
        m == MatchedPrefix(rs, req)
        starts == SelectSeq([j \in 1 .. m |-> j],
                            LAMBDA j : j = 1 \/ rs.owner[path[j]] # rs.owner[path[j - 1]])
    IN  [i \in 1 .. Len(starts) |->
            LET e == rs.owner[path[starts[i]]]
                k == Cardinality({j \in 1 .. m : rs.owner[path[j]] = e})
            IN  [end |-> e, k |-> k, split |-> IF k < NodeLen(rs, e) THEN path[starts[i] + k - 1] ELSE -1]]

\* Device pages insert(req) allocates: un-evicted nodes plus the new leaf.
InsertDeviceNeed(rs, req) ==
    IF Has("page-ceil-match")
    THEN LET w == Walk(rs, req)
         IN  Len(ReqPages[req]) - SumSeq([i \in DOMAIN w |-> w[i].k])
             + SumSeq([i \in DOMAIN w |-> IF rs.nodes[w[i].end].dev = ABSENT THEN w[i].k ELSE 0])
    ELSE
    LET path == ReqPages[req]
        m == MatchedPrefix(rs, req)
    IN  Cardinality({j \in 1 .. m : rs.nodes[rs.owner[path[j]]].dev = ABSENT}) + Len(path) - m

\* _inc_hit_count: << rank state, nodes to write >>; write-through stages a node
\* on its threshold-th hit unless it is fully durable (anti-churn, seed 000).
Hit(rs, e, toWrite) ==
    IF WriteBack THEN << rs, toWrite >>
    ELSE LET n == rs.nodes[e]
             hits == Min2(n.hits + 1, WriteThreshold)
             rs1 == [rs EXCEPT !.nodes[e].hits = hits]
             churnGuard == MirrorRelease /\ AllDurable(rs1, e) /\ Fresh(rs1, e)
         IN  << rs1, IF n.host = ABSENT /\ hits >= WriteThreshold /\ ~churnGuard
                     THEN Append(toWrite, e) ELSE toWrite >>

\* One walk item of insert(): split at the divergence, un-evict or count a hit.
RECURSIVE InsertWalk(_, _, _, _)
InsertWalk(rs, items, toWrite, pos) ==
    IF items = << >> THEN << rs, toWrite, pos >>
    ELSE LET it == Head(items)
             rs0 == IF it.split >= 0 THEN SplitNode(rs, it.end, it.split) ELSE rs
             e == IF it.split >= 0 THEN it.split ELSE it.end
         IN  IF rs0.nodes[e].dev = ABSENT
             THEN LET rs1 == RegisterDuplicate(TakeSlots([rs0 EXCEPT !.nodes[e].dev = RESIDENT,
                                                                     !.dev_free = @ - it.k],
                                                         "d", NodePages(rs0, e)), e)
                      \* option prefetch_at_hit: SGLang counts a hit on the nodes it un-evicts too
                      h == IF PrefetchAtHit THEN Hit(rs1, e, toWrite) ELSE << rs1, toWrite >>
                  IN  InsertWalk(h[1], Tail(items), h[2], pos + it.k)
             ELSE LET h == Hit(rs0, e, toWrite)
                  IN  InsertWalk(h[1], Tail(items), h[2], pos + it.k)

\* insert() on one rank: << rank state, nodes _inc_hit_count wants written >>.
\* (victim_order = "lru": the nodes the walk met and the new leaf are touched last.)
InsertOnRank(rs, req) ==
    LET path == ReqPages[req]
        items == Walk(rs, req)
        w == InsertWalk(rs, items, << >>, 0)
        rs1 == w[1]  pos == w[3]
        met == [i \in DOMAIN items |-> IF items[i].split >= 0 THEN items[i].split ELSE items[i].end]
    IN  IF pos < Len(path)
        THEN LET rs2 == AddNode(rs1, path[pos + 1], path[Len(path)], NewNode(path[pos + 1]))
                 rs3 == TakeSlots([rs2 EXCEPT !.dev_free = @ - (Len(path) - pos)],
                                  "d", Chain(path[pos + 1], path[Len(path)]))
                 h == Hit(rs3, path[Len(path)], w[2])
             IN  << TouchLru(h[1], Append(met, path[Len(path)])), h[2] >>
        ELSE << TouchLru(rs1, met), w[2] >>

\* (Option backup_path_lock: the write locks the node's whole path, not the node alone.)
StageWrite(rs, e) ==
    LET n == rs.nodes[e]
        rs1 == [TakeSlots(rs, "h", NodePages(rs, e))
                EXCEPT !.host_free = @ - NodeLen(rs, e), !.wq = Append(@, << n.start, e >>),
                       !.nodes[e] = [n EXCEPT !.host = WRITING, !.lock = @ + (IF BackupPathLock THEN 0 ELSE 1)]]
    IN  IF BackupPathLock THEN LockPath(rs1, e, 1) ELSE rs1

\* write_backup for the i-th node some rank wants staged, then the rest.  Option
\* backup_chain: a rank whose allocation rejected a node stages none after it (stopped).
RECURSIVE WriteBackupFrom(_, _, _, _, _)
WriteBackupFrom(rks, wanted, failing, i, stopped) ==
    LET w == TLCEval([r \in RankIds |-> IF i <= Len(wanted[r]) /\ r \notin stopped THEN wanted[r][i] ELSE -1])
    IN
    IF \A r \in RankIds : w[r] = -1 THEN rks
    ELSE LET holder == Min({r \in RankIds : w[r] # -1})
             e == w[holder]
             need == [r \in RankIds |-> IF w[r] = -1 THEN 0 ELSE NodeLen(rks[r], w[r])]  \* each its own node's
             agree == ~Has("partial-backup-leak")
             alloc == IF agree /\ \E r \in RankIds : w[r] # e
                      THEN << rks, [r \in RankIds |-> FALSE] >>   \* replicas disagree: nobody stages
                      ELSE AllocateHost(rks, need, failing, agree)
             rks1 == TLCEval([r \in RankIds |-> IF alloc[2][r] /\ w[r] # -1
                                                THEN StageWrite(alloc[1][r], w[r])
                                                ELSE alloc[1][r]])
             rejected == IF BackupChain THEN {r \in RankIds : w[r] # -1 /\ ~alloc[2][r]} ELSE {}
         IN  WriteBackupFrom(rks1, wanted, failing, i + 1, stopped \cup rejected)

\* res: rank -> << rank state, nodes to stage >> of insert() on that rank.
InsertEffect(res, fail) ==
    LET rks == TLCEval([r \in RankIds |-> res[r][1]])
        wanted == TLCEval([r \in RankIds |-> res[r][2]])
    IN  IF \E r \in RankIds : wanted[r] # << >>
        THEN WriteBackupFrom(rks, wanted, fail, 1, {})
        ELSE rks

\* CP owner lanes (CpLanes > 1): each lane has room for the pages the insert takes.
LanesFit(rs, req) ==
    \/ CpLanes = 1
    \/ ~AnyDeficit(LaneDeficits(rs, {p \in Range(ReqPages[req]) :
                                       rs.owner[p] < 0 \/ rs.nodes[rs.owner[p]].dev = ABSENT}))

InsertFits(rks, req) == \A r \in RankIds : InsertDeviceNeed(rks[r], req) <= rks[r].dev_free /\ LanesFit(rks[r], req)

\* insert() on every rank, then write_backup of the nodes it wants staged.
InsertAll(rks, req, fail) == InsertEffect(TLCEval([r \in RankIds |-> InsertOnRank(rks[r], req)]), fail)

\* insert_evicts: the scheduler's evict(num_tokens) before the allocation, on every rank
\* short of device pages, while the request holds the last node its walk reaches (and
\* that node's path); none when the pool has room (a CP lane may still lack it).
InsertRoom(req, fail) ==
    LET needs == TLCEval([r \in RankIds |-> InsertDeviceNeed(ranks[r], req)])
        Last(r) == LET w == Walk(ranks[r], req) IN IF w = << >> THEN -1 ELSE w[Len(w)].end
    IN  IF \A r \in RankIds : needs[r] <= ranks[r].dev_free THEN ranks
        ELSE MakeRoom(ranks, needs, [r \in RankIds |-> Last(r)], fail)

\* After its own eviction the insert goes on if it fits now; else (DeviceFullError) the
\* request waits and the step only evicted.
InsertEvictEffect(req, fail) ==
    LET room == TLCEval(InsertRoom(req, fail))
    IN  IF InsertFits(room, req) THEN InsertAll(room, req, fail) ELSE room

\* Without room, insert_evicts makes the insert a step when its eviction changes something.
insert(req, fail) ==
    IF InsertFits(ranks, req)
    THEN /\ ranks' = InsertAll(ranks, req, fail)
         /\ UNCHANGED << store, hung, halted >>
    ELSE /\ InsertEvicts
         /\ ranks' = InsertEvictEffect(req, fail)
         /\ ranks' # ranks
         /\ UNCHANGED << store, hung, halted >>

-----------------------------------------------------------------------------
(* The D->H copy finishing on one rank, and writing_check.                 *)

write_dma_done(r) ==
    /\ ranks[r].wdone < Len(ranks[r].wq)
    /\ ranks' = [ranks EXCEPT ![r].wdone = @ + 1]
    /\ UNCHANGED << store, hung, halted >>

\* Commit one D->H copy: host resident, write lock dropped, storage backup started.
\* (Variant split-write-lock-leak: the ack unlocks only the node the write was
\* registered with, end; the half a split cut off above it keeps the lock.)
\* (Option backup_path_lock: the ack unlocks the path of end instead, CommitOps.)
PathLock == BackupPathLock /\ ~WriteBack

CommitNode(rs, e, end) ==
    RegisterDuplicate([rs EXCEPT !.nodes[e].host = HOST_RESIDENT,
                                 !.nodes[e].lock = @ - (IF WriteBack \/ PathLock \/ (Has("split-write-lock-leak") /\ e # end)
                                                        THEN 0 ELSE 1),
                                 !.nodes[e].href = @ + (IF Storage THEN 1 ELSE 0)], e)

RECURSIVE CommitNodes(_, _, _)
CommitNodes(rs, es, end) == IF es = << >> THEN rs ELSE CommitNodes(CommitNode(rs, Head(es), end), Tail(es), end)

\* Option storage_per_node: one H->L3 backup per node the copy covers.
RECURSIVE CommitOps(_, _)
CommitOps(rs, ops) ==
    IF ops = << >> THEN rs
    ELSE LET op == Head(ops)
             covering == NodesCovering(rs, op[1], op[2])
             rs0 == CommitNodes(rs, covering, op[2])
             rs1 == IF PathLock THEN LockPath(rs0, op[2], -1) ELSE rs0
             new == IF StoragePerNode THEN [i \in DOMAIN covering |-> << rs1.nodes[covering[i]].start, covering[i] >>]
                    ELSE << op >>
         IN  CommitOps(IF Storage THEN [rs1 EXCEPT !.sq = @ \o new] ELSE rs1, Tail(ops))

CommitWrites(rs, n) ==
    LET rs1 == CommitOps(rs, SubSeq(rs.wq, 1, n))
    IN  [rs1 EXCEPT !.wq = SubSeq(rs.wq, n + 1, Len(rs.wq)), !.wdone = rs.wdone - n]

WritingCheckEffect(rks) ==
    LET n == MinOver([r \in RankIds |-> rks[r].wdone])
    IN  TLCEval([r \in RankIds |-> CommitWrites(rks[r], n)])

\* Runs every iteration while a D->H copy is outstanding (MIN may be 0: a
\* stuttering step), and whenever reclaim victims wait for the digest check.
writing_check ==
    /\ \/ TracksDigest /\ \E r \in RankIds : ranks[r].digest # << >>
       \/ \E r \in RankIds : ranks[r].wq # << >>
    /\ IF /\ Has("early-return-collective")      \* ranks with nothing finished return early;
          /\ \E r \in RankIds : ranks[r].wdone = 0  \* the others wait in the all-reduce
          /\ \E r \in RankIds : ranks[r].wdone > 0  \* forever (all early: nobody waits)
       THEN /\ hung' = "writing_check"
            /\ UNCHANGED << ranks, store, halted >>
       ELSE IF DigestHalts
       THEN /\ halted' = HaltMessage("writing_check")
            /\ UNCHANGED << ranks, store, hung >>
       ELSE IF ~RoundDue /\ MinOver([r \in RankIds |-> ranks[r].wdone]) = 0
       THEN UNCHANGED vars   \* MIN = 0, no digests to clear: the effect is the identity
       ELSE /\ ranks' = WritingCheckEffect(AfterDigest)
            /\ UNCHANGED << store, hung, halted >>

-----------------------------------------------------------------------------
(* The CP load-back planner and local_access (spec/cp_planner.py).         *)

\* 0-based position of e in the rank's local access order, -1 if absent.
ClockPos(rs, e) ==
    IF \E i \in DOMAIN rs.clock : rs.clock[i] = e
    THEN (CHOOSE i \in DOMAIN rs.clock : rs.clock[i] = e) - 1
    ELSE -1

\* Seed 004's planner (spec/cp_planner.py plan_victims).  A victim frees its device
\* copy without a host write: demoted when backed up, deleted when write-through and
\* childless.
PBase(rs, e, protected) ==
    /\ rs.nodes[e].dev # ABSENT
    /\ rs.nodes[e].lock <= 0
    /\ e \notin protected
    /\ rs.nodes[e].host = HOST_RESIDENT \/ (~WriteBack /\ ChildNodes(rs, e) = {})

\* A leaf once the planned victims are evicted.
LeafAfter(rs, e, planned, protected) ==
    /\ PBase(rs, e, protected)
    /\ \A c \in ChildNodes(rs, e) : c \in planned \/ rs.nodes[c].dev = ABSENT

Gain(rs, e, rem) == LET c == LaneCounts(Range(NodePages(rs, e))) IN SumLanes([l \in Lanes |-> Min2(c[l], rem[l])])

\* The nodes above e, nearest first.
Ancestors(rs, e) == LET ends == PathEnds(rs, e) IN [i \in 1 .. Len(ends) - 1 |-> ends[Len(ends) - i]]

\* Ancestor-unlock credit: the gain of the nearest device ancestor (past evicted ones)
\* that could be a victim.
UnlockCredit(rs, e, rem, planned, protected) ==
    LET anc == Ancestors(rs, e)
        stop == {j \in DOMAIN anc : \/ anc[j] \in planned
                                    \/ rs.nodes[anc[j]].dev # ABSENT
                                       /\ (~PBase(rs, anc[j], protected) \/ Gain(rs, anc[j], rem) > 0)}
    IN  IF stop = {} THEN 0
        ELSE LET x == anc[Min(stop)]
             IN  IF x \in planned \/ ~PBase(rs, x, protected) THEN 0 ELSE Gain(rs, x, rem)

\* Ancestor admission: the nearest ancestor a planned victim makes a leaf, or -1.
Admitted(rs, v, planned, protected) ==
    LET anc == Ancestors(rs, v)
        stop == {j \in DOMAIN anc : \/ anc[j] \in planned
                                    \/ LeafAfter(rs, anc[j], planned, protected)
                                    \/ rs.nodes[anc[j]].dev # ABSENT}
    IN  IF stop = {} THEN -1
        ELSE LET x == anc[Min(stop)]
             IN  IF x \notin planned /\ LeafAfter(rs, x, planned, protected) THEN x ELSE -1

\* 0-based position of e in the host-side victim order (victim_order = "lru").
LruPos(rs, e) == LET o == VictimOrderOf(rs) IN (CHOOSE i \in DOMAIN o : o[i] = e) - 1

\* The order: largest gain, then largest credit, then (get_priority) the replicated LRU
\* position under victim_order = "lru", then the end page (the variant: the rank's
\* local clock before the end page).
PlanKey(rs, e, rem, planned, protected) ==
    LET g == Gain(rs, e, rem)
        u == IF g > 0 THEN 0 ELSE UnlockCredit(rs, e, rem, planned, protected)
    IN  IF Has("planner-local-tiebreak") THEN << -g, -u, ClockPos(rs, e), e >>
        ELSE IF Lru THEN << -g, -u, LruPos(rs, e), e >>
        ELSE << -g, -u, e >>

\* Lexicographic order on integer tuples of one length.
KeyLess(a, b) == \E i \in DOMAIN a : a[i] < b[i] /\ \A j \in 1 .. i - 1 : a[j] = b[j]

RECURSIVE PlanLoop(_, _, _, _, _, _)
PlanLoop(rs, protected, pool, planned, victims, rem) ==
    IF ~AnyDeficit(rem) THEN victims
    ELSE LET key == TLCEval([e \in {x \in pool : LeafAfter(rs, x, planned, protected)} |->
                                PlanKey(rs, e, rem, planned, protected)])
             cands == {e \in DOMAIN key : key[e][1] < 0 \/ key[e][2] < 0}
         IN  IF cands = {} THEN << >>
             ELSE LET best == CHOOSE b \in cands : \A c \in cands \ {b} : KeyLess(key[b], key[c])
                      planned2 == planned \cup {best}
                      got == LaneCounts(Range(NodePages(rs, best)))
                      adm == Admitted(rs, best, planned2, protected)
                  IN  PlanLoop(rs, protected, (pool \ {best}) \cup (IF adm >= 0 THEN {adm} ELSE {}),
                               planned2, Append(victims, best), [l \in Lanes |-> Max2(0, rem[l] - got[l])])

\* Victims (in eviction order) that cover every lane's deficit, or << >> if impossible.
PlanVictims(rs, deficits, protected) ==
    PlanLoop(rs, protected, {e \in DeviceLeaves(rs) : LeafAfter(rs, e, {}, protected)}, {}, << >>,
             [l \in Lanes |-> Max2(0, deficits[l])])

\* Demote backed victims; delete unbacked write-through leaves.
RECURSIVE EvictVictims(_, _)
EvictVictims(rs, victims) ==
    IF victims = << >> THEN rs
    ELSE LET e == Head(victims)  size == NodeLen(rs, e)
             rs0 == GiveSlots(rs, "d", Range(NodePages(rs, e)))
             rs1 == IF rs.nodes[e].host = HOST_RESIDENT
                    THEN [rs0 EXCEPT !.nodes[e].dev = ABSENT, !.dev_free = @ + size]
                    ELSE [RemoveNodes(rs0, {e}) EXCEPT !.dev_free = @ + size]
         IN  EvictVictims(rs1, Tail(victims))

\* The most recently touched live node of the rank, -1 if none.
LastTouched(rs) ==
    LET live == SelectSeq(rs.clock, LAMBDA x : Live(rs, x))
    IN  IF live = << >> THEN -1 ELSE live[Len(live)]

Touch(rs, e) == [rs EXCEPT !.clock = Append(SelectSeq(@, LAMBDA x : x # e /\ Live(rs, x)), e)]

\* Nodes whose local touch can matter: the CP planner's device victims, or under
\* victim_order = "lru" the host leaves evict_host chooses from.
Touchable(rs) == IF CpPlanner THEN DeviceLeaves(rs) ELSE {e \in LiveNodes(rs) : IsHostLeaf(rs, e)}

\* A rank touches a node on its own: only its local clock moves.
local_access(r, e) ==
    /\ CpPlanner \/ Lru
    /\ Live(ranks[r], e)
    /\ e \in Touchable(ranks[r])
    /\ LastTouched(ranks[r]) # e
    /\ ranks' = [ranks EXCEPT ![r] = Touch(@, e)]
    /\ UNCHANGED << store, hung, halted >>

-----------------------------------------------------------------------------
(* load_back, the H->D copy, loading_check (spec/load_path.py).            *)

\* The evicted chain from e up to the first resident ancestor, top-down (e live).
NodesToLoad(rs, e) ==
    LET ends == PathEnds(rs, e)
        n == Len(ends)
        top == {i \in 1 .. n : \A j \in i .. n : rs.nodes[ends[j]].dev = ABSENT}
    IN  IF top = {} THEN << >> ELSE SubSeq(ends, Min(top), n)

\* The pages of the nodes to load.
ChainPages(rs, chain) == {p \in Pages : rs.owner[p] \in Range(chain)}

\* The lane deficits of loading the chain of `total` pages (one lane: no page sets).
ChainDeficits(rs, chain, total) ==
    IF CpLanes = 1 THEN [l \in Lanes |-> Max2(0, total - rs.dev_free)]
    ELSE LaneDeficits(rs, ChainPages(rs, chain))

\* The lane deficits of a device allocation of the page sequence `pages`.
PageDeficits(rs, pages) ==
    IF CpLanes = 1 THEN [l \in Lanes |-> Max2(0, Len(pages) - rs.dev_free)]
    ELSE LaneDeficits(rs, Range(pages))

\* One rank's load_back of e: `was` before the scheduler's own eviction (load_back_evicts),
\* rs0 after it.  The chain, its pages and host copies are those taken before that
\* eviction (the seed's host_indices).  Still without room: the CP planner evicts its
\* victims first; otherwise (load_back_evicts) the load returns 0 and only the eviction
\* happened.  Variant load-back-evicts-chain-unlocked: the eviction may have taken chain
\* nodes; the load goes on with what it took before and locks what is left of the path.
LoadBackOnRank(was, rs0, e) ==
    LET chain == NodesToLoad(was, e)
        first == was.nodes[chain[1]].start
        pages == Chain(first, e)
        deficits == PageDeficits(rs0, pages)
    IN  IF AnyDeficit(deficits) /\ ~CpPlanner THEN rs0
        ELSE LET rs == IF AnyDeficit(deficits)
                       THEN EvictVictims(rs0, PlanVictims(rs0, deficits, PathToRoot(rs0, e)))
                       ELSE rs0
                 kept == SelectSeq(chain, LAMBDA x : Live(rs, x))
                 ks == Range(kept)
                 up == PathToRoot(was, e)
                 rs1 == [rs EXCEPT !.nodes = TLCEval([x \in Pages |->
                           IF x \in ks
                           THEN [rs.nodes[x] EXCEPT !.dev = LOADING, !.lbp = WriteBack \/ ~LbpWriteBackOnly,
                                                    !.lock = @ + (IF x \in up THEN 1 ELSE 0)]
                           ELSE IF x \in up /\ Live(rs, x) THEN [rs.nodes[x] EXCEPT !.lock = @ + 1]
                           ELSE rs.nodes[x]])]
             IN  [TakeSlots(TouchLru(rs1, kept), "d", pages)
                  EXCEPT !.dev_free = @ - Len(pages), !.lq = Append(@, << first, e >>)]

CanLoadBack(rs, e) ==
    /\ Live(rs, e)
    /\ rs.nodes[e].dev = ABSENT
    /\ LET chain == NodesToLoad(rs, e)  total == SumLen(rs, chain) IN
       /\ \A i \in DOMAIN chain : rs.nodes[chain[i]].host = HOST_RESIDENT
       /\ total * PageSize >= LoadBackThreshold   \* shorter: the request recomputes it
       /\ LET deficits == ChainDeficits(rs, chain, total) IN
          \/ ~AnyDeficit(deficits)
          \/ CpPlanner /\ PlanVictims(rs, deficits, PathToRoot(rs, e)) # << >>
          \/ ~CpPlanner /\ LoadBackEvicts    \* short: its own eviction first

\* load_back_evicts (HiRadixCache.load_back's retry: evict, then load again): every
\* rank whose device pool lacks the chain's pages evicts by victim order while the node
\* being loaded and its path are locked (variant load-back-evicts-chain-unlocked: the
\* first resident ancestor, the seed's inc_lock_ref(ancester_node)).
LoadBackRoom(e) ==
    LET needs == TLCEval([r \in RankIds |-> SumLen(ranks[r], NodesToLoad(ranks[r], e))])
        Hold(r) == IF Has("load-back-evicts-chain-unlocked")
                   THEN ParentNode(ranks[r], NodesToLoad(ranks[r], e)[1]) ELSE e
    IN  IF \A r \in RankIds : needs[r] <= ranks[r].dev_free THEN ranks
        ELSE MakeRoom(ranks, needs, [r \in RankIds |-> Hold(r)], {})

LoadBackEffect(e) ==
    LET room == IF LoadBackEvicts /\ ~CpPlanner THEN TLCEval(LoadBackRoom(e)) ELSE ranks
    IN  TLCEval([r \in RankIds |-> LoadBackOnRank(ranks[r], room[r], e)])

\* With load_back_evicts a load without room is a step when its eviction or the load
\* changes something (a load always does).
load_back(e) ==
    /\ \A r \in RankIds : CanLoadBack(ranks[r], e)
    /\ ranks' = LoadBackEffect(e)
    /\ ~LoadBackEvicts \/ CpPlanner \/ ranks' # ranks
    /\ UNCHANGED << store, hung, halted >>

load_dma_done(r) ==
    /\ ranks[r].ldone < Len(ranks[r].lq)
    /\ ranks' = [ranks EXCEPT ![r].ldone = @ + 1]
    /\ UNCHANGED << store, hung, halted >>

RECURSIVE FinishLoads(_, _)
FinishLoads(rs, ops) ==
    IF ops = << >> THEN rs
    ELSE LET op == Head(ops)
             cs == Range(NodesCovering(rs, op[1], op[2]))
             rs1 == [rs EXCEPT !.nodes = TLCEval([x \in Pages |-> IF x \in cs
                                                  THEN [rs.nodes[x] EXCEPT !.dev = RESIDENT, !.lbp = FALSE]
                                                  ELSE rs.nodes[x]])]
             \* option settled_duplicates: finish_load_back registers the loaded nodes bottom-up
             rs2 == IF SettledDuplicates
                    THEN LET ns == NodesCovering(rs, op[1], op[2])
                         IN  RegisterDuplicates(rs1, [i \in DOMAIN ns |-> ns[Len(ns) + 1 - i]])
                    ELSE rs1
         IN  FinishLoads(IF Live(rs2, op[2]) THEN LockPath(rs2, op[2], -1) ELSE rs2, Tail(ops))

LoadingCheckEffect(rks) ==
    LET n == MinOver([r \in RankIds |-> rks[r].ldone])
    IN  TLCEval([r \in RankIds |->
                   LET rs == FinishLoads(rks[r], SubSeq(rks[r].lq, 1, n))
                   IN  [rs EXCEPT !.lq = SubSeq(@, n + 1, Len(@)), !.ldone = @ - n]])

\* Runs every iteration while loads are in flight; MIN may be 0 (a stuttering step).
loading_check ==
    /\ \E r \in RankIds : ranks[r].lq # << >>
    /\ IF DigestHalts
       THEN /\ halted' = HaltMessage("loading_check")
            /\ UNCHANGED << ranks, store, hung >>
       ELSE IF ~RoundDue /\ MinOver([r \in RankIds |-> ranks[r].ldone]) = 0
       THEN UNCHANGED vars   \* MIN = 0, no digests to clear: the effect is the identity
       ELSE /\ ranks' = LoadingCheckEffect(AfterDigest)
            /\ UNCHANGED << store, hung, halted >>

-----------------------------------------------------------------------------
(* prefetch_from_storage, prefetch_io, check_prefetch_progress             *)
(* (spec/prefetch.py).                                                     *)

NoAnchor == << -1, -1 >>

\* << matched pages, anchor node or -1 >> when req can prefetch, else NoAnchor.
Anchor(rs, req) ==
    LET path == ReqPages[req]
        k == MatchedPrefix(rs, req)
    IN  IF k = Len(path) THEN NoAnchor
        ELSE IF k = 0 THEN << 0, -1 >>
        ELSE LET e == rs.owner[path[k]]
             IN  IF e # path[k] \/ rs.nodes[e].host # HOST_RESIDENT THEN NoAnchor ELSE << k, e >>

Protect(rs, anchor, delta) ==
    IF anchor < 0 THEN rs ELSE [rs EXCEPT !.nodes[anchor].href = @ + delta]

\* Pages of path from index k on that rank r's store holds, up to the first miss.
HeldFrom(r, path, k) == Max({g \in 0 .. Len(path) - k : \A j \in 1 .. g : path[k + j] \in store[Source(r)]})

\* Option prefetch_at_hit: the storage hit query's pages, MIN over the ranks, and the
\* pages requested by the prefetches in flight (prefetch_tokens_occupied).
StorageHit(req, k) == Min({HeldFrom(r, ReqPages[req], k) : r \in RankIds})
Occupied(rs) == SumSeq([i \in DOMAIN rs.pq |-> Len(ReqPages[rs.pq[i][1]]) - rs.pq[i][3]])

\* All replicas agree on the anchor, and the store has the first missing page (option
\* prefetch_at_hit: prefetch_rate_limited at half the host pool, then a hit below one
\* page is revoked).
CanPrefetch(req, a) ==
    /\ a # NoAnchor
    /\ \A r \in RankIds : Anchor(ranks[r], req) = a
    /\ IF PrefetchAtHit
       THEN Occupied(ranks[0]) < HostPages \div 2 /\ StorageHit(req, a[1]) > 0
       ELSE \E r \in RankIds : ReqPages[req][a[1] + 1] \in store[Source(r)]

\* Option prefetch_at_hit (allocate_storage_hit): the hit's pages, else evict_host(hit)
\* and the hit or what is free (partial); nothing free: revoked (the evictions stay).
TakeAtHit(rs, req, anchor, k, hit) ==
    LET rs1 == IF rs.host_free < hit THEN EvictHost(rs, hit) ELSE rs
        n == Min2(hit, rs1.host_free)
    IN  IF n < 1 THEN Protect(rs1, anchor, -1)
        ELSE [rs1 EXCEPT !.host_free = @ - n, !.pq = Append(@, << req, anchor, k, n >>),
                         !.pdone = Append(@, NOT_DONE), !.pflags = IF TracksFlags THEN Append(@, {}) ELSE @]

\* protect_host(anchor) first, then reserve host slots for the missing pages.
PrefetchEffect(req, a, fail) ==
    IF PrefetchAtHit
    THEN LET hit == StorageHit(req, a[1])
         IN  TLCEval([r \in RankIds |-> TakeAtHit(Protect(ranks[r], a[2], 1), req, a[2], a[1], hit)])
    ELSE
    LET k == a[1]  anchor == a[2]
        n == Len(ReqPages[req]) - k
        alloc == AllocateHost(TLCEval([r \in RankIds |-> Protect(ranks[r], anchor, 1)]), [r \in RankIds |-> n], fail, TRUE)
    IN  TLCEval([r \in RankIds |->
                   IF alloc[2][r]
                   THEN LET got == ReserveSlots(alloc[1][r], n)
                        IN  [got[1] EXCEPT !.host_free = @ - n,
                                           !.pq = Append(@, << req, anchor, k, n >>),
                                           !.pdone = Append(@, NOT_DONE),
                                           !.pflags = IF TracksFlags THEN Append(@, {}) ELSE @,
                                           !.pslots = IF Slots THEN Append(@, got[2]) ELSE @]
                   ELSE Protect(alloc[1][r], anchor, -1)])

prefetch_from_storage(req, fail) ==
    /\ Prefetch /\ Storage
    /\ ~\E r \in RankIds : \E i \in DOMAIN ranks[r].pq : ranks[r].pq[i][1] = req
    /\ CanPrefetch(req, Anchor(ranks[0], req))
    /\ ranks' = PrefetchEffect(req, Anchor(ranks[0], req), fail)
    /\ UNCHANGED << store, hung, halted >>

\* The leading pages of prefetch op that the store holds (the read stops at a miss).
PagesRead(op, held) ==
    LET path == ReqPages[op[1]]
    IN  Max({g \in 0 .. op[4] : \A j \in 1 .. g : path[op[3] + j] \in held})

\* The rank's read finishes with the leading pages its store holds.
\* (Option prefetch_at_hit: one read thread per rank, an earlier read finishes first.)
prefetch_io(r, i) ==
    /\ i \in DOMAIN ranks[r].pq
    /\ ranks[r].pdone[i] = NOT_DONE
    /\ ~PrefetchAtHit \/ \A j \in 1 .. i - 1 : ranks[r].pdone[j] # NOT_DONE
    /\ ranks' = [ranks EXCEPT ![r].pdone[i] = PagesRead(ranks[r].pq[i], store[Source(r)])]
    /\ UNCHANGED << store, hung, halted >>

\* Option prefetch_at_hit (insert_host under write_through): a fetched node the tree holds
\* without a host copy takes the fetched slots as its host copy; the slots of nodes with
\* one are freed.  pages[p + 1 ..] still to walk: << rank state, pages freed >>.
RECURSIVE RefillFrom(_, _, _, _)
RefillFrom(rs, pages, p, freed) ==
    IF p >= Len(pages) THEN << rs, freed >>
    ELSE LET e == rs.owner[pages[p + 1]]
             size == NodeLen(rs, e)
         IN  IF rs.nodes[e].host = ABSENT
             THEN RefillFrom([rs EXCEPT !.nodes[e].host = HOST_RESIDENT], pages, p + size, freed)
             ELSE RefillFrom(rs, pages, p + size, freed + size)

FinishPrefetch(rs, i, completed) ==
    LET op == rs.pq[i]
        anchor == op[2]  k == op[3]  n == op[4]
        fetched == SubSeq(ReqPages[op[1]], k + 1, k + completed)
        have == Max({h \in 0 .. Len(fetched) : \A j \in 1 .. h : rs.owner[fetched[j]] >= 0})
        rs0 == IF have > 0 THEN EnsureBoundary(rs, fetched[have]) ELSE rs
        refill == IF PrefetchAtHit THEN RefillFrom(rs0, SubSeq(fetched, 1, have), 0, 0) ELSE << rs0, have >>
        rs1 == refill[1]
        rs2 == IF have < Len(fetched)
               THEN TouchLru(AddNode(rs1, fetched[have + 1], fetched[Len(fetched)],
                                     [NoNode EXCEPT !.start = fetched[have + 1], !.host = HOST_RESIDENT]),
                             << fetched[Len(fetched)] >>)
               ELSE rs1
        tail == n - completed
        freeNow == refill[2] + (IF Has("prefetch-double-free") THEN tail ELSE 0)
        held == IF Slots THEN rs.pslots[i] ELSE << >>
        rsS == IF ~Slots THEN rs2
               ELSE LET a == AdoptSlots(rs2, Slice(fetched, have, Len(fetched)), Slice(held, have, completed))
                        b == ReleaseSlots(a, Slice(held, 0, have)
                                             \o (IF Has("prefetch-double-free") THEN Slice(held, completed, Len(held))
                                                 ELSE << >>))
                    IN  [b EXCEPT !.pslots = RemoveAt(@, i),
                                  !.rslots = IF tail # 0 THEN Append(@, Slice(held, completed, Len(held))) ELSE @]
        rs3 == [rsS EXCEPT !.host_free = @ + freeNow,
                           !.relq = IF tail # 0 THEN Append(@, tail) ELSE @,
                           !.pq = RemoveAt(@, i),
                           !.pdone = RemoveAt(@, i),
                           !.pflags = IF TracksFlags THEN RemoveAt(@, i) ELSE @]
    IN  IF anchor >= 0 /\ Live(rs3, anchor)
        THEN [rs3 EXCEPT !.nodes[anchor].href = @ - 1]
        ELSE rs3

CheckPrefetchEffect(i) ==
    LET completed == MinOver([r \in RankIds |-> Max2(ranks[r].pdone[i], 0)])
    IN  TLCEval([r \in RankIds |-> FinishPrefetch(ranks[r], i, completed)])

-----------------------------------------------------------------------------
(* How a prefetch ends (spec/prefetch_end.py): the stop vote, a rank's     *)
(* timer, a read failing midway, revoke.                                   *)

\* The ending flags of prefetch i on a rank ({} while no ending is tracked).
Flags(rs, i) == IF rs.pflags = << >> THEN {} ELSE rs.pflags[i]

\* The read finished with every page the hit query found (a failed read did not).
Completed(rs, i) == rs.pdone[i] # NOT_DONE /\ TERMINATED \notin Flags(rs, i)

\* A rank's stop vote (can_terminate_prefetch): best_effort always, wait_complete
\* once its read has completed, timeout once it completed or its timer fired.
CanTerminate(rs, i) ==
    CASE PrefetchStop = "best_effort" -> TRUE
      [] PrefetchStop = "wait_complete" -> Completed(rs, i)
      [] OTHER -> Completed(rs, i) \/ TIMED_OUT \in Flags(rs, i)

\* The MAX all-reduce of [1 - can_terminate, terminated]: every rank can terminate, or
\* the operation is terminated on some rank (variant terminated-half-dropped: the
\* vote carries can_terminate only).
TerminateVote(i) ==
    \/ \A r \in RankIds : CanTerminate(ranks[r], i)
    \/ ~Has("terminated-half-dropped") /\ \E r \in RankIds : TERMINATED \in Flags(ranks[r], i)

\* While the vote says go on, a rank that decides alone terminates anyway and waits in
\* the MIN all-reduce its peers skipped: prefetch-vote-skipped (a rank that can
\* terminate), timeout-local-vote (a rank whose timer fired).
SkipsVote(i) ==
    \/ Has("prefetch-vote-skipped") /\ \E r \in RankIds : CanTerminate(ranks[r], i)
    \/ Has("timeout-local-vote") /\ \E r \in RankIds : TIMED_OUT \in Flags(ranks[r], i)

\* Terminate once the vote says so (else a stuttering step), agree on the completed
\* prefix (MIN), insert it host-only.  A revoked prefetch is the drain round's.
check_prefetch_progress(i) ==
    /\ i \in DOMAIN ranks[0].pq
    /\ \A r \in RankIds : i \in DOMAIN ranks[r].pq /\ ranks[r].pq[i] = ranks[0].pq[i]
    /\ REVOKED \notin Flags(ranks[0], i)
    /\ IF TerminateVote(i)
       THEN /\ ranks' = CheckPrefetchEffect(i)
            /\ UNCHANGED << store, hung, halted >>
       ELSE IF SkipsVote(i)
       THEN /\ hung' = "check_prefetch_progress"
            /\ UNCHANGED << ranks, store, halted >>
       ELSE UNCHANGED vars

\* The rank's clock passes the prefetch's deadline while its read has not completed;
\* once fired it stays fired.  A revoked prefetch is past voting.
prefetch_timeout(r, i) ==
    /\ PrefetchStop = "timeout"
    /\ i \in DOMAIN ranks[r].pq
    /\ Flags(ranks[r], i) \cap {TIMED_OUT, REVOKED} = {}
    /\ ~Completed(ranks[r], i)
    /\ ranks' = [ranks EXCEPT ![r].pflags[i] = @ \cup {TIMED_OUT}]
    /\ UNCHANGED << store, hung, halted >>

\* A storage batch comes back short: the read stops with nothing usable and marks the
\* operation terminated on this rank.
prefetch_read_fails(r, i) ==
    /\ PrefetchReadFail
    /\ i \in DOMAIN ranks[r].pq
    /\ ranks[r].pdone[i] = NOT_DONE
    /\ ranks' = [ranks EXCEPT ![r].pdone[i] = 0, ![r].pflags[i] = @ \cup {TERMINATED}]
    /\ UNCHANGED << store, hung, halted >>

\* Free a prefetch's host slots once (its op stays queued).
FreePrefetch(rs, i) ==
    IF FREED \in rs.pflags[i] THEN rs
    ELSE [ReleaseSlots(rs, IF Slots THEN rs.pslots[i] ELSE << >>)
          EXCEPT !.pslots = IF Slots THEN [@ EXCEPT ![i] = << >>] ELSE @,
                 !.host_free = @ + rs.pq[i][4],
                 !.pflags[i] = @ \cup {FREED}]

\* terminate_prefetch on the rank, the revoke queued for the next drain round (variant
\* revoke-frees-in-flight: the host slots are freed now, under the read).
RevokeOnRank(rs, i) ==
    LET rs1 == [rs EXCEPT !.pflags[i] = @ \cup {REVOKED, TERMINATED}]
    IN  IF Has("revoke-frees-in-flight") THEN FreePrefetch(rs1, i) ELSE rs1

prefetch_revoke(i) ==
    /\ PrefetchRevoke
    /\ \A r \in RankIds : i \in DOMAIN ranks[r].pq /\ ranks[r].pq[i] = ranks[0].pq[i]
    /\ REVOKED \notin Flags(ranks[0], i)
    /\ ranks' = TLCEval([r \in RankIds |-> RevokeOnRank(ranks[r], i)])
    /\ UNCHANGED << store, hung, halted >>

\* Revoked prefetches whose read has settled on every rank (_drain_revoke's count).
RevokesReady(rks) ==
    IF ~PrefetchRevoke THEN {}
    ELSE {i \in DOMAIN rks[0].pq : /\ REVOKED \in Flags(rks[0], i)
                                   /\ \A r \in RankIds : i \in DOMAIN rks[r].pdone /\ rks[r].pdone[i] # NOT_DONE}

\* The entries of s at the indices not in R.
DropIdx(s, R) ==
    LET keep == SelectSeq([j \in DOMAIN s |-> j], LAMBDA j : j \notin R)
    IN  [j \in DOMAIN keep |-> s[keep[j]]]

\* _drain_revoke on one rank: each ready revoke frees its host slots (unless freed
\* already), releases its anchor's host reference and leaves the queues.
RetireOnRank(rs, R) ==
    LET open == {i \in R : FREED \notin rs.pflags[i]}
        rs1 == ReleaseSlots(rs, IF Slots THEN Flatten(SelectSeq([i \in DOMAIN rs.pslots |-> IF i \in open THEN rs.pslots[i] ELSE << >>],
                                                                 LAMBDA x : x # << >>))
                                ELSE << >>)
        Released(x) == Cardinality({i \in R : rs.pq[i][2] = x})
    IN  [rs1 EXCEPT !.host_free = @ + SumSeq([i \in DOMAIN rs.pq |-> IF i \in open THEN rs.pq[i][4] ELSE 0]),
                    !.nodes = TLCEval([x \in Pages |-> IF Live(rs, x) THEN [rs.nodes[x] EXCEPT !.href = @ - Released(x)]
                                                       ELSE rs.nodes[x]]),
                    !.pq = DropIdx(@, R), !.pdone = DropIdx(@, R), !.pflags = DropIdx(@, R),
                    !.pslots = IF Slots THEN DropIdx(@, R) ELSE @]

RetireRevoked(rks) ==
    LET R == RevokesReady(rks)
    IN  IF R = {} THEN rks ELSE TLCEval([r \in RankIds |-> RetireOnRank(rks[r], R)])

-----------------------------------------------------------------------------
(* storage_backup_done, drain_storage_control_queues with mirror release,  *)
(* store_lose, registry_skew (spec/storage_path.py).                       *)

BackupPages(r) == LET op == ranks[r].sq[Len(ranks[r].sdone) + 1] IN Chain(op[1], op[2])

\* << reported, actual >>; a single-writer follower wrote nothing and defers to rank 0.
BackupAck(r, k) ==
    IF ~Writes(r) THEN << SKIP, SKIP >>
    ELSE << IF Has("failed-batch-acked") THEN Len(BackupPages(r)) ELSE k, k >>

storage_backup_done(r, k) ==
    /\ Len(ranks[r].sdone) < Len(ranks[r].sq)
    /\ k \in IF Fault("partial_storage") /\ Writes(r) THEN 0 .. Len(BackupPages(r))
             ELSE {Len(BackupPages(r))}
    /\ ranks' = [ranks EXCEPT ![r].sdone = Append(@, BackupAck(r, k))]
    /\ store' = IF Writes(r) THEN [store EXCEPT ![r] = @ \cup Range(SubSeq(BackupPages(r), 1, k))]
                ELSE store
    /\ UNCHANGED << hung, halted >>

Deficit(rs) == Max2(0, HostFreeTarget - rs.host_free)

ReleaseCandidates(rs) == {e \in Pages : IsRedundantMirror(rs, e)}

RECURSIVE PlanFrom(_, _, _, _, _)
PlanFrom(rs, cands, want, tokens, plan) ==
    IF cands = << >> \/ tokens >= want THEN plan
    ELSE PlanFrom(rs, Tail(cands), want, tokens + NodeLen(rs, Head(cands)),
                  Append(plan, Head(cands)))

\* Pick candidates in key order until the pool deficit is covered.
PreparePlan(rs) ==
    IF Deficit(rs) = 0 \/ rs.closed THEN << >>
    ELSE PlanFrom(rs, IF Lru THEN SelectSeq(VictimOrderOf(rs), LAMBDA e : IsRedundantMirror(rs, e))
                      ELSE Sorted(ReleaseCandidates(rs)),
                  Deficit(rs), 0, << >>)

\* The entries of last round's plan that are still release candidates, judged
\* before this round's acks (durable marks are per rank: a stale entry can be live
\* on one rank only, so the triple covers what the rank would commit).
Committable(rs) == SelectSeq(rs.plan, LAMBDA e : IsRedundantMirror(rs, e))

PlanTriple(rs, v) ==
    << Len(rs.plan),
       SumSeq([i \in DOMAIN v |-> NodeLen(rs, v[i])]),
       WireDigest(v) >>

\* Release each planned mirror that is still a candidate (re-checked live).
RECURSIVE ExecutePlan(_, _)
ExecutePlan(rs, plan) ==
    IF plan = << >> THEN rs
    ELSE LET e == Head(plan)
             rs1 == IF IsRedundantMirror(rs, e)
                    THEN [FreeNodeHost(rs, e) EXCEPT !.nodes[e].rel = TRUE]
                    ELSE rs
         IN  ExecutePlan(rs1, Tail(plan))

MirrorWorkPending ==
    /\ MirrorReleaseOn
    /\ \E r \in RankIds :
         /\ ~ranks[r].closed
         /\ ranks[r].plan # << >> \/ (Deficit(ranks[r]) > 0 /\ ReleaseCandidates(ranks[r]) # {})

\* Commit last round's plans if all ranks proposed the same (count, tokens,
\* digest) triple, by negated pairs; else count a mismatch / fail-close:
\* << ranks, whether the next plans are to be prepared >>.
CommitRound(rks, commit) ==
    IF \E r \in RankIds : rks[r].closed THEN << rks, FALSE >>
    ELSE IF Has("release-no-consensus")
    THEN << TLCEval([r \in RankIds |-> ExecutePlan(rks[r], PreparePlan(rks[r]))]), FALSE >>
    ELSE IF \A r \in RankIds : rks[r].plan = << >> THEN << rks, TRUE >>
    ELSE LET triples == TLCEval([r \in RankIds |-> PlanTriple(rks[r], commit[r])])
             agree == \A f \in 1 .. 3 : NegatedPairsAgree({triples[r][f] : r \in RankIds})
             mism == rks[0].mismatch + 1
             closeNow == mism >= FailCloseAfter
         IN  IF agree
             THEN << TLCEval([r \in RankIds |-> [ExecutePlan(rks[r], commit[r]) EXCEPT !.mismatch = 0]]), TRUE >>
             ELSE << TLCEval([r \in RankIds |-> [rks[r] EXCEPT !.mismatch = mism, !.closed = closeNow,
                                                               !.plan = << >>]]), ~closeNow >>

\* Per ack slot i, what each rank takes as completed (single writer: MIN over the
\* real acks, the followers' SKIP standing for INT_MAX on the wire).
SyncedCompleted(rks, i) ==
    IF ~SingleWriter THEN TLCEval([r \in RankIds |-> rks[r].sdone[i][1]])
    ELSE LET real == {rks[r].sdone[i][1] : r \in RankIds} \ {SKIP}
         IN  TLCEval([r \in RankIds |-> IF real = {} THEN 0 ELSE Min(real)])

\* One rank's part of the drain: the first nb acks drop their host references
\* (release_host), the release queue is freed.  The acked ops stay in sq until
\* their durable marks (MarkRank).
DrainRank(rs, nb, nr) ==
    LET Hold(x) == Cardinality({i \in 1 .. nb :
                       IF Has("split-during-backup") THEN rs.sq[i][2] = x /\ Live(rs, x)
                       ELSE \E j \in DOMAIN Chain(rs.sq[i][1], rs.sq[i][2]) :
                                rs.owner[Chain(rs.sq[i][1], rs.sq[i][2])[j]] = x})
        rs1 == [rs EXCEPT !.nodes = TLCEval([x \in Pages |-> IF Live(rs, x)
                                             THEN [rs.nodes[x] EXCEPT !.href = @ - Hold(x)]
                                             ELSE rs.nodes[x]])]
    IN  [ReleaseSlots(rs1, Flatten(SubSeq(rs.rslots, 1, nr)))
         EXCEPT !.sdone = SubSeq(@, nb + 1, Len(@)),
                !.relq = SubSeq(@, nr + 1, Len(@)),
                !.rslots = IF Slots THEN SubSeq(@, nr + 1, Len(@)) ELSE @,
                !.host_free = @ + SumSeq(SubSeq(rs.relq, 1, nr))]

\* The durable marks of the first nb acks (completed[i][r]: what rank r takes as
\* completed for ack slot i), in order; then the ops leave sq.
MarkRank(rs, r, nb, completed) ==
    LET Marked(i) == LET chain == Chain(rs.sq[i][1], rs.sq[i][2])
                         done == IF Has("durable-on-ack") THEN Len(chain) ELSE completed[i][r]
                     IN  SelectSeq(SubSeq(chain, 1, Min2(Max2(done, 0), Len(chain))),
                                   LAMBDA p : rs.owner[p] >= 0)
        rs1 == IF MirrorReleaseOn THEN MarkPages(AgeRound(rs), Flatten([i \in 1 .. nb |-> Marked(i)])) ELSE rs
    IN  [rs1 EXCEPT !.sq = SubSeq(@, nb + 1, Len(@))]

\* The agreed plan is released before this round's acks add durable marks: with a
\* bounded durable LRU a new mark can evict a planned entry's on one rank only
\* (durable-evicted-while-planned, like release-no-consensus: the marks first).
\* Without a bound the order makes no difference.
DrainEffect(rks) ==
    LET nb == MinOver([r \in RankIds |-> Len(rks[r].sdone)])
        nr == MinOver([r \in RankIds |-> Len(rks[r].relq)])
        completed == TLCEval([i \in 1 .. nb |-> SyncedCompleted(rks, i)])
        commit == TLCEval([r \in RankIds |-> IF MirrorReleaseOn THEN Committable(rks[r]) ELSE << >>])
        drained == TLCEval([r \in RankIds |-> DrainRank(rks[r], nb, nr)])
        Mark(x) == TLCEval([r \in RankIds |-> MarkRank(x[r], r, nb, completed)])
        late == Has("durable-evicted-while-planned") \/ Has("release-no-consensus")
    IN  IF ~MirrorReleaseOn THEN Mark(drained)
        ELSE LET c == CommitRound(IF late THEN Mark(drained) ELSE drained, commit)
                 after == IF late THEN c[1] ELSE Mark(c[1])
             IN  IF c[2] THEN TLCEval([r \in RankIds |-> [after[r] EXCEPT !.plan = PreparePlan(after[r])]])
                 ELSE after

\* Nothing to drain, retire, plan or clear: the round's effect is the identity (TLC
\* need not rebuild the ranks to find the same state).
DrainIdle ==
    /\ ~RoundDue /\ ~MirrorReleaseOn /\ RevokesReady(ranks) = {}
    /\ \E r \in RankIds : ranks[r].sdone = << >>
    /\ \E r \in RankIds : ranks[r].relq = << >>

\* Runs every iteration while storage operations are outstanding; MIN may be 0.
\* An otherwise idle round still ages the durable marks up to the gate.
drain_storage_control_queues ==
    /\ \/ \E r \in RankIds : ranks[r].sq # << >> \/ ranks[r].relq # << >>
       \/ RevokesReady(ranks) # {}
       \/ MirrorReleaseOn /\ \E r \in RankIds : Ageing(ranks[r])
       \/ MirrorWorkPending
    /\ IF DigestHalts
       THEN /\ halted' = HaltMessage("drain_storage_control_queues")
            /\ UNCHANGED << ranks, store, hung >>
       ELSE IF DrainIdle
       THEN UNCHANGED vars
       ELSE /\ ranks' = DrainEffect(RetireRevoked(AfterDigest))   \* _drain_revoke first
            /\ UNCHANGED << store, hung, halted >>

store_lose(r, p) ==
    /\ Fault("store_loss")
    /\ p \in store[r]
    /\ store' = [store EXCEPT ![r] = @ \ {p}]
    /\ UNCHANGED << ranks, hung, halted >>

\* A rank's registry order drifts: its oldest entry moves to the back.
registry_skew(r) ==
    /\ Fault("registry_skew")
    /\ Len(ranks[r].dups) >= 2
    /\ ranks' = [ranks EXCEPT ![r].dups = Tail(@) \o << Head(@) >>]
    /\ UNCHANGED << store, hung, halted >>

-----------------------------------------------------------------------------
(* lock_request, unlock_request (spec/request_locks.py).                   *)

\* match_prefix's device part: leading pages of req cached with a device copy.
DeviceMatch(rs, req) ==
    LET path == ReqPages[req]
        miss == {i \in 1 .. Len(path) : rs.owner[path[i]] < 0 \/ rs.nodes[rs.owner[path[i]]].dev = ABSENT}
    IN  IF miss = {} THEN Len(path) ELSE Min(miss) - 1

\* match_prefix + inc_lock_ref: split where the device match ends, lock that node's
\* path to the root, remember the node.
LockRequestOnRank(rs, req) ==
    LET last == ReqPages[req][DeviceMatch(rs, req)]
        rs1 == LockPath(EnsureBoundary(rs, last), last, 1)
    IN  [rs1 EXCEPT !.running[req] = last]

lock_request(req) ==
    /\ \A r \in RankIds : ranks[r].running[req] = -1 /\ DeviceMatch(ranks[r], req) > 0
    /\ ranks' = TLCEval([r \in RankIds |-> LockRequestOnRank(ranks[r], req)])
    /\ UNCHANGED << store, hung, halted >>

\* The request finished: dec_lock_ref on the node its lock named.
UnlockRequestOnRank(rs, req) ==
    LET e == rs.running[req]
        rs1 == IF Live(rs, e) THEN LockPath(rs, e, -1) ELSE rs
    IN  [rs1 EXCEPT !.running[req] = -1]

unlock_request(req) ==
    /\ \A r \in RankIds : ranks[r].running[req] # -1
    /\ ranks' = TLCEval([r \in RankIds |-> UnlockRequestOnRank(ranks[r], req)])
    /\ UNCHANGED << store, hung, halted >>

-----------------------------------------------------------------------------
(* The bounds of Model.constraint.  States outside them are counted and    *)
(* checked but not expanded.  TLC's CONSTRAINT would drop them uncounted,  *)
(* so Next takes the bound as a conjunct instead.                          *)

\* Host pages the prefetches in flight hold (one whose slots were freed early holds none).
HeldByPrefetches(rs) == SumSeq([i \in DOMAIN rs.pq |-> IF FREED \in Flags(rs, i) THEN 0 ELSE rs.pq[i][4]])

InBounds ==
    \A r \in RankIds :
        LET rs == ranks[r] IN
        /\ 0 <= rs.dev_free /\ rs.dev_free <= DevicePages
        /\ 0 <= rs.host_free /\ rs.host_free <= HostPages
        /\ SumSeq(rs.relq) + HeldByPrefetches(rs) <= HostPages
        /\ \A e \in LiveNodes(rs) : rs.nodes[e].lock <= MaxLock /\ rs.nodes[e].href <= MaxLock

\* Replicated steps: the scheduler issues them on every rank; none may run
\* while a ready-count round is due.
ReplicatedStep ==
    \/ \E req \in Reqs, fail \in FailSets : insert(req, fail)
    \/ \E e \in Pages, fail \in (IF WriteBack THEN FailSets ELSE {{}}) : evict(e, fail)
    \/ \E e \in Pages : load_back(e)
    \/ Prefetch /\ Storage /\ \E req \in Reqs, fail \in FailSets : prefetch_from_storage(req, fail)
    \/ RequestLocks /\ \E req \in Reqs : lock_request(req) \/ unlock_request(req)
    \/ PrefetchRevoke /\ \E i \in 1 .. Len(ranks[0].pq) : prefetch_revoke(i)

OtherStep ==
    \/ \E r \in RankIds : write_dma_done(r)
    \/ writing_check
    \/ \E r \in RankIds : load_dma_done(r)
    \/ loading_check
    \/ \E r \in RankIds : Len(ranks[r].sdone) < Len(ranks[r].sq)
                         /\ \E k \in 0 .. Len(BackupPages(r)) : storage_backup_done(r, k)
    \/ drain_storage_control_queues
    \/ \E r \in RankIds : \E i \in 1 .. Len(ranks[r].pq) : prefetch_io(r, i)
    \/ \E i \in 1 .. Len(ranks[0].pq) : check_prefetch_progress(i)
    \/ PrefetchStop = "timeout" /\ \E r \in RankIds : \E i \in 1 .. Len(ranks[r].pq) : prefetch_timeout(r, i)
    \/ PrefetchReadFail /\ \E r \in RankIds : \E i \in 1 .. Len(ranks[r].pq) : prefetch_read_fails(r, i)
    \/ Fault("store_loss") /\ \E r \in RankIds, p \in Pages : store_lose(r, p)
    \/ Fault("registry_skew") /\ \E r \in RankIds : registry_skew(r)
    \/ (CpPlanner \/ Lru) /\ \E r \in RankIds, e \in Pages : local_access(r, e)

Next ==
    /\ InBounds
    /\ hung = "" /\ halted = ""     \* the group is stuck or has stopped itself
    /\ \/ ~RoundDue /\ ReplicatedStep
       \/ OtherStep

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* State invariants (spec/properties.py).                                  *)

\* 1. every cached node has a usable copy
no_ghost ==
    \A r \in RankIds : \A e \in LiveNodes(ranks[r]) :
        ranks[r].nodes[e].dev = RESIDENT \/ ranks[r].nodes[e].host = HOST_RESIDENT

\* 2. every page under an in-flight copy is still held as that copy needs
CopyHeld(rs, ops, devOk, hostOk) ==
    \A i \in DOMAIN ops : \A p \in Range(Chain(ops[i][1], ops[i][2])) :
        /\ rs.owner[p] >= 0
        /\ rs.nodes[rs.owner[p]].host \in hostOk
        /\ devOk = {} \/ rs.nodes[rs.owner[p]].dev \in devOk

DmaTargetsHeld(rs, readsForStorage) ==
    /\ \A i \in DOMAIN rs.pq : FREED \in Flags(rs, i) => rs.pdone[i] # NOT_DONE   \* no read into freed slots
    /\ CopyHeld(rs, SubSeq(rs.wq, rs.wdone + 1, Len(rs.wq)), {RESIDENT}, {WRITING})
    /\ CopyHeld(rs, SubSeq(rs.lq, rs.ldone + 1, Len(rs.lq)), {LOADING}, {HOST_RESIDENT})
    /\ readsForStorage =>
         CopyHeld(rs, SubSeq(rs.sq, Len(rs.sdone) + 1, Len(rs.sq)), {}, {HOST_RESIDENT})

no_use_after_free ==
    \A r \in RankIds : DmaTargetsHeld(ranks[r], ~(SingleWriter /\ r > 0))

\* 3. free + held = capacity for both pools
PoolsBalance(rs) ==
    LET live == LiveNodes(rs)
        devHeld == SumLenSet(rs, {e \in live : rs.nodes[e].dev # ABSENT})
        hostHeld == SumLenSet(rs, {e \in live : rs.nodes[e].host # ABSENT})
                    + HeldByPrefetches(rs) + SumSeq(rs.relq)
    IN  /\ rs.dev_free >= 0 /\ rs.dev_free + devHeld = DevicePages
        /\ rs.host_free >= 0 /\ rs.host_free + hostHeld = HostPages

slot_conservation == \A r \in RankIds : PoolsBalance(ranks[r])

\* 8. every cached node hangs below the page before it on its token path
prefix_closed ==
    \A r \in RankIds : \A e \in LiveNodes(ranks[r]) :
        LET above == Parent[ranks[r].nodes[e].start] IN above < 0 \/ ranks[r].owner[above] >= 0

\* 3, with slot identities: each slot has at most one owner, no owned slot is free,
\* every slot is owned or free, and the free counter counts distinct free slots.
SlotsOwned(held, free, count, cap) ==
    /\ \A i \in DOMAIN held : held[i] >= 0
    /\ Cardinality(Range(held)) = Len(held)
    /\ Range(held) \cap free = {}
    /\ Range(held) \cup free = 0 .. cap - 1
    /\ count = Cardinality(free)

\* The slots of the pages of live nodes whose copy in the pool is not ABSENT.
HeldSlots(rs, slot, tier) ==
    LET ps == Sorted({p \in Pages : rs.owner[p] >= 0 /\ tier[rs.owner[p]] # ABSENT})
    IN  [i \in DOMAIN ps |-> slot[ps[i]]]

slot_ownership ==
    \/ ~Slots
    \/ \A r \in RankIds :
         LET rs == ranks[r] IN
         /\ SlotsOwned(HeldSlots(rs, rs.dslot, [e \in Pages |-> rs.nodes[e].dev]),
                       rs.dfree, rs.dev_free, DevicePages)
         /\ SlotsOwned(HeldSlots(rs, rs.hslot, [e \in Pages |-> rs.nodes[e].host])
                          \o Flatten(rs.pslots) \o Flatten(rs.rslots),
                       rs.hfree, rs.host_free, HostPages)

\* 6. replicas identical unless halted or a pending digest check will catch it
Replica(rs) ==
    << rs.owner, rs.nodes, rs.dev_free, rs.host_free, rs.wq, rs.lq, rs.sq, rs.pq, rs.relq,
       rs.closed, rs.running, rs.lru >>

rank_agreement ==
    \/ halted # "" \/ hung # "" \/ NumRanks < 2
    \/ \A r \in RankIds : Replica(ranks[r]) = Replica(ranks[0])
    \/ DigestCheckWillFire

\* 7. counters never negative
counter_sanity ==
    \A r \in RankIds : \A e \in LiveNodes(ranks[r]) :
        ranks[r].nodes[e].lock >= 0 /\ ranks[r].nodes[e].href >= 0

\* no rank waits in a collective its peers skipped
no_collective_hang == hung = ""

-----------------------------------------------------------------------------
(* Transition properties ([][A]_vars).                                     *)

\* 4. a page becomes durable only inside the prefix a storage write really
\*    stored: only a drain round may add durable marks, for the acks it drains
\*    (the first nb of each rank's backup queue).
AllowedDurable(r) ==
    LET nb == MinOver([x \in RankIds |-> Len(ranks[x].sdone)])
        rs == ranks[r]
        writer == IF SingleWriter THEN ranks[0] ELSE rs
        Prefix(i) == LET chain == Chain(rs.sq[i][1], rs.sq[i][2])
                     IN  {chain[j] : j \in 1 .. Min2(Max2(writer.sdone[i][2], 0), Len(chain))}
    IN  UNION {Prefix(i) : i \in 1 .. nb}

DurableStep ==
    \A r \in RankIds :
        LET new == ranks'[r].durable \ ranks[r].durable
        IN  new = {} \/ (drain_storage_control_queues /\ new \subseteq AllowedDurable(r))

durable_only_when_acked == [][DurableStep]_vars

\* 5. a host copy dropped under a resident device copy was idle, not load-back
\*    pending, and (write-through) unlocked and durable, or (write_back) not an
\*    evictable leaf while a non-leaf duplicate was reclaimable.
\* d is the anchor a prefetch_from_storage step protects only while it runs (spec/prefetch.py
\* held_during_step): its reclaim could not take d, though d is reclaimable before and after.
HeldByPrefetchStep(d) ==
    Prefetch /\ Storage /\ \E req \in Reqs :
        /\ Anchor(ranks[0], req)[2] = d
        /\ \E fail \in FailSets : prefetch_from_storage(req, fail)

\* insert_evicts / load_back_evicts: the nodes the step's own eviction ran with locked on
\* a rank (spec/write_path.py and spec/load_path.py held_while_evicting): the request's
\* last matched node / the loaded node and their paths, when the rank lacked room.
InsertHeld(rs, req) ==
    IF InsertDeviceNeed(rs, req) <= rs.dev_free THEN {}
    ELSE LET w == Walk(rs, req) IN IF w = << >> THEN {} ELSE PathToRoot(rs, w[Len(w)].end)

LoadBackHeld(rs, e) ==
    IF ~Live(rs, e) \/ SumLen(rs, NodesToLoad(rs, e)) <= rs.dev_free THEN {} ELSE PathToRoot(rs, e)

\* e was held on rank r by the eviction of the step (an insert or a load_back that
\* evicted; TLC asks which action the step is, as for durable_only_when_acked).
HeldWhileEvicting(r, e) ==
    \/ InsertEvicts /\ \E req \in Reqs : e \in InsertHeld(ranks[r], req) /\ \E fail \in FailSets : insert(req, fail)
    \/ LoadBackEvicts /\ ~CpPlanner /\ \E x \in Pages : e \in LoadBackHeld(ranks[r], x) /\ load_back(x)

ReleaseOk(r, rs, rt, e) ==
    LET n == rt.nodes[e] IN
    /\ n.href <= 0
    /\ ~n.lbp
    /\ IF ~WriteBack
       THEN n.lock <= 0 /\ n.dev = RESIDENT /\ Range(Chain(n.start, e)) \subseteq rs.durable \cup rt.durable
       ELSE (/\ IsDeviceLeaf(rs, e)
             /\ \E i \in DOMAIN rs.dups :
                  LET d == rs.dups[i] IN
                  d # e /\ Live(rt, d) /\ Live(rs, d) /\ CanReclaimDuplicate(rs, d)
                  /\ CanReclaimDuplicate(rt, d) /\ ~IsDeviceLeaf(rs, d)
                  /\ ~HeldByPrefetchStep(d))
            => HeldWhileEvicting(r, e)

\* (TLC checks these on every step: a rank whose nodes the step left alone passes at once.)
ReleaseStep ==
    \A r \in RankIds : ranks'[r].nodes = ranks[r].nodes \/ \A e \in LiveNodes(ranks[r]) :
        (/\ Live(ranks'[r], e)
         /\ ranks[r].nodes[e].host = HOST_RESIDENT
         /\ ranks'[r].nodes[e].host = ABSENT
         /\ ranks'[r].nodes[e].dev # ABSENT) => ReleaseOk(r, ranks[r], ranks'[r], e)

release_safety == [][ReleaseStep]_vars

\* 7. a locked node keeps its device copy
LockedStep ==
    \A r \in RankIds : ranks'[r].nodes = ranks[r].nodes \/ \A e \in LiveNodes(ranks[r]) :
        (ranks[r].nodes[e].lock > 0 /\ ranks[r].nodes[e].dev = RESIDENT)
            => (Live(ranks'[r], e) /\ ranks'[r].nodes[e].dev # ABSENT)

locked_never_evicted == [][LockedStep]_vars

\* The same replicated state yields the same load-back victims on every rank.
Dropped(r) ==
    {e \in LiveNodes(ranks[r]) : ranks[r].nodes[e].dev = RESIDENT
                                  /\ (~Live(ranks'[r], e) \/ ranks'[r].nodes[e].dev = ABSENT)}

PlannerStep ==   \* cheap tests first: TLC evaluates this on every step
    \/ ~CpPlanner \/ NumRanks < 2
    \/ \A r \in RankIds : Dropped(r) = Dropped(0)
    \/ \E r \in RankIds : Replica(ranks[r]) # Replica(ranks[0])
    \/ ~\E e \in Pages : load_back(e)

planner_determinism == [][PlannerStep]_vars

=============================================================================

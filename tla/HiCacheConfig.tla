--------------------------- MODULE HiCacheConfig ---------------------------
(***************************************************************************)
(* The constants of one bounded model (spec/config.py) and the page        *)
(* universe they imply.  A page is identified by its whole token path; the *)
(* exporter (tiercheck tla) numbers pages 0..N-1 in lexicographic order of *)
(* their paths, exactly as spec/config.py build_pages does, and passes the *)
(* sorted paths as PagePaths.  The ASSUMEs below re-check that numbering.  *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS
    NumRanks,          \* tensor-parallel ranks, each with a replica of the tree
    Requests,          \* sequence of requests, each a sequence of tokens
    PagePaths,         \* page id + 1 -> token path (whole pages), sorted lexicographically
    DevicePages,       \* device pool capacity per rank (pages)
    HostPages,         \* host pool capacity per rank (pages)
    Policy,            \* "write_through" | "write_through_selective" | "write_back"
    Storage,           \* L3 tier on
    Prefetch,          \* prefetch from L3 on
    MirrorRelease,     \* seed 000
    DuplicateReclaim,  \* seed 001
    SingleWriter,      \* MLA: rank 0 writes storage for everybody
    CpPlanner,         \* context-parallel load-back planner (seed 004 header)
    CpLanes,           \* CP owner lanes of the device pool
    Faults,            \* set of fault names (spec/config.py FAULTS)
    HostFreeTarget,    \* mirror release runs while host_free < HostFreeTarget
    FailCloseAfter,    \* plan mismatches before mirror release fail-closes
    DigestBits,        \* width of the machine integers digests travel in
    PrefetchStop,      \* "best_effort" | "wait_complete" | "timeout": each rank's prefetch stop vote
    PrefetchRevoke,    \* the scheduler may revoke an in-flight prefetch
    PrefetchReadFail,  \* a rank's prefetch read may fail midway (mark_terminate)
    DurableCapacity,   \* bound of the durable LRU in pages (0: unbounded)
    RefreshRounds,     \* anti-churn age gate in drain rounds (0: none)
    MaxLock,           \* bound on lock_ref / host_ref_counter (CONSTRAINT)
    Variants,          \* set of bug-variant names (spec/variants.py)
    \* Options: deliberate behaviours of other HiCache versions (docs/spec.md, "Options").
    BackupChain,       \* write-through backups stop at a rank's first rejection
    EvictHostShortfall,\* host admission evicts need - free, not need
    BackupPathLock,    \* a write-through backup locks the node's whole path
    StoragePerNode,    \* a D->H ack starts one H->L3 backup per node it covers
    LbpWriteBackOnly,  \* load_back_pending is marked under write_back only
    SettledDuplicates, \* loading nodes are no duplicates; the load ack is a birth
    WbDropUnbacked,    \* write_back: a victim whose backup is rejected is dropped
    LoadBackThreshold, \* load-backs of fewer tokens are refused
    PrefetchAtHit,     \* prefetch takes the storage hit's slots, reads in order, refills; insert hits
    PageSize,          \* tokens per page
    VictimOrder,       \* "path" | "lru": the order host-side victims are taken in
    Slots,             \* slot identities: which slot holds each page, free slot sets
    RequestLocks,      \* running requests lock their matched device prefix
    InsertEvicts,      \* an insert without device room first evicts by victim order
    LoadBackEvicts     \* a load_back without device room first evicts by victim order

-----------------------------------------------------------------------------
(* Small helpers.                                                          *)
(*                                                                         *)
(* On TLC performance: TLC evaluates a function constructor [x \in S |-> e] *)
(* lazily, again at every application, and does not cache a LET that an   *)
(* action evaluates while it assigns primed variables.  So the effects     *)
(* below wrap constructors whose values are read more than once in         *)
(* TLCEval (which evaluates them once), and actions assign the result of   *)
(* an effect operator (var' = Effect(...)) rather than LET ... IN var' =.  *)

Min(S) == CHOOSE x \in S : \A y \in S : x <= y
Max(S) == CHOOSE x \in S : \A y \in S : x >= y
Min2(a, b) == IF a <= b THEN a ELSE b
Max2(a, b) == IF a >= b THEN a ELSE b
Range(s) == {s[i] : i \in DOMAIN s}
InSeq(x, s) == \E i \in DOMAIN s : s[i] = x
Remove(s, x) == SelectSeq(s, LAMBDA d : d # x)           \* drop every x
RemoveAt(s, i) == SubSeq(s, 1, i - 1) \o SubSeq(s, i + 1, Len(s))

RECURSIVE SumSeq(_)
SumSeq(s) == IF s = << >> THEN 0 ELSE Head(s) + SumSeq(Tail(s))

\* Python's s[a:b] (0-based, clamped to the sequence).
Slice(s, a, b) == SubSeq(s, a + 1, Min2(b, Len(s)))

RECURSIVE Flatten(_)
Flatten(ss) == IF ss = << >> THEN << >> ELSE Head(ss) \o Flatten(Tail(ss))

RECURSIVE Sorted(_)
Sorted(S) == IF S = {} THEN << >> ELSE << Min(S) >> \o Sorted(S \ {Min(S)})

-----------------------------------------------------------------------------
(* The page universe.                                                      *)

RankIds == 0 .. NumRanks - 1
Pages == 0 .. Len(PagePaths) - 1
Reqs == 0 .. Len(Requests) - 1
Path(p) == PagePaths[p + 1]
Depth(p) == Len(Path(p)) \div PageSize
\* A page's own tokens, and a request's whole pages (a partial last page is not cached).
Tokens(p) == SubSeq(Path(p), Len(Path(p)) - PageSize + 1, Len(Path(p)))
WholePages(req) == Len(req) \div PageSize
PageOf(path) == CHOOSE q \in Pages : Path(q) = path

\* Python tuple order on token paths.
LexLess(a, b) ==
    LET k == Max({i \in 0 .. Min2(Len(a), Len(b)) : SubSeq(a, 1, i) = SubSeq(b, 1, i)})
    IN  IF k = Len(a) THEN Len(b) > k ELSE k < Len(b) /\ a[k + 1] < b[k + 1]

Prefixes == UNION {{SubSeq(Requests[i], 1, j * PageSize) : j \in 1 .. WholePages(Requests[i])}
                   : i \in 1 .. Len(Requests)}

ASSUME /\ NumRanks >= 1
       /\ {Path(p) : p \in Pages} = Prefixes
       /\ \A p \in 0 .. Len(PagePaths) - 2 : LexLess(Path(p), Path(p + 1))
       /\ Policy \in {"write_through", "write_through_selective", "write_back"}
       /\ DigestBits \in 2 .. 30      \* TLC integers are 32-bit
       /\ PrefetchStop \in {"best_effort", "wait_complete", "timeout"}
       /\ PageSize >= 1 /\ LoadBackThreshold >= 1 /\ CpLanes >= 1
       /\ VictimOrder \in {"path", "lru"}

\* Constant tables: TLC evaluates each once.
Parent == TLCEval([p \in Pages |-> IF Depth(p) = 1 THEN -1
                                    ELSE PageOf(SubSeq(Path(p), 1, (Depth(p) - 1) * PageSize))])
Children == TLCEval([p \in Pages |-> {c \in Pages : Parent[c] = p}])
Roots == {p \in Pages : Parent[p] = -1}
AncAt == TLCEval([p \in Pages |-> TLCEval([d \in 1 .. Depth(p) |-> PageOf(SubSeq(Path(p), 1, d * PageSize))])])
ReqPages == TLCEval([i \in Reqs |-> TLCEval([j \in 1 .. WholePages(Requests[i + 1]) |->
                                                PageOf(SubSeq(Requests[i + 1], 1, j * PageSize))])])

\* Pages from start down to end inclusive (start is an ancestor-or-self of end).
\* (Nested over the interval Pages, not over Pages \X Pages: TLC looks an interval
\* domain up by offset, a set of tuples by search.)
ChainT == TLCEval([s \in Pages |-> TLCEval([e \in Pages |->
             IF Depth(s) <= Depth(e) /\ AncAt[e][Depth(s)] = s
             THEN TLCEval([i \in 1 .. Depth(e) - Depth(s) + 1 |-> AncAt[e][Depth(s) + i - 1]])
             ELSE << >>])])
Chain(s, e) == ChainT[s][e]

-----------------------------------------------------------------------------
(* Derived switches (spec/config.py properties, spec/sync.py).             *)

WriteBack == Policy = "write_back"
WriteThreshold == IF Policy = "write_through_selective" THEN 2 ELSE 1
Has(v) == v \in Variants
Fault(f) == f \in Faults
Lru == VictimOrder = "lru"
TracksDurableLru == DurableCapacity > 0 \/ RefreshRounds > 0
\* Per-prefetch ending flags (spec/prefetch_end.py tracks_flags).
TracksFlags == PrefetchStop = "timeout" \/ PrefetchRevoke \/ PrefetchReadFail
TracksDigest == WriteBack /\ DuplicateReclaim /\ NumRanks > 1
MirrorReleaseOn == MirrorRelease /\ Storage /\ ~WriteBack /\ ~Has("host-starvation")

\* Ranks whose host allocation may fail in one step (alloc_asymmetry).
FailSets == IF Fault("alloc_asymmetry") /\ NumRanks >= 2
            THEN {S \in SUBSET RankIds : S # RankIds}
            ELSE {{}}

\* Single writer: only rank 0 writes storage; followers read rank 0's store.
Writes(r) == ~SingleWriter \/ r = 0
Source(r) == IF SingleWriter THEN 0 ELSE r

=============================================================================

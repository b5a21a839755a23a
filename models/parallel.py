"""Expanding frontier chunks in worker processes, with results identical to one process.

The search (tiercheck.models.search) owns the visited set and the interning tables; the
workers only expand states (tiercheck.models.expand) and send back plain-tuple records.
A level of the breadth-first search is cut into chunks; chunk c goes to worker c mod W,
and the owner consumes the results strictly in chunk order, so the numbering of states,
every count and every counterexample are the same for any number of workers.

Tables. Workers are forked with a copy of the owner's tables and receive, with each
chunk, the values the owner interned since their last chunk (in gid order, so the
replicas stay exact prefixes). A value a worker meets that it was not told about gets a
negative local reference; the owner resolves those, per chunk, in the order they were
first met, which is the order a single process would have interned them in.

Each worker has at most one chunk in flight (no pipe can fill up in both directions), and
small levels are expanded by the owner itself (no inter-process overhead near the root).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal

from tiercheck.models.codec import WorkerCodec, from_plain, to_plain
from tiercheck.models.expand import Expander
from tiercheck.models.search import WorkerDied

CHUNK = 400  # states per chunk
SMALL_LEVEL = 2 * CHUNK  # levels smaller than this are expanded by the owner


def _worker(conn, model, props, codec_state, canon, expander_cls) -> None:
    # Ctrl-C reaches the whole process group: the owner stops the run and keeps what it
    # found, so workers ignore it and finish their chunk.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The collector's state is the owner's at fork time (search.paused_gc).
    codec = WorkerCodec(model)
    for v in codec_state[0]:
        codec.ranks.adopt(v)
    for v in codec_state[1][1:]:
        codec.flags.adopt(v)
    expander = expander_cls(model, props, codec, canon)
    while True:
        msg = conn.recv()
        if msg is None:
            break
        ranks_plain, flags, keys, open_props = msg
        codec.sync(ranks_plain, flags)
        codec.reset_local()
        try:
            recs = [expander.expand(k, open_props) for k in keys]
        except BaseException as exc:  # report, do not hang the owner
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        local_ranks, local_flags = codec.take_local()
        conn.send(("ok", recs, local_ranks, local_flags))
    conn.close()


class Pool:
    def __init__(self, model, props, workers: int, codec, owner_expander: Expander, canon=None, expander_cls=Expander):
        self.model = model
        self.props = props
        self.n = workers
        self.canon = canon
        self.codec = codec
        self.owner_expander = owner_expander
        self.expander_cls = expander_cls
        self.procs, self.conns = [], []
        self.sent_ranks = []
        self.sent_flags = []
        self._xlate_ranks = []
        self._xlate_flags = []
        self.started = False

    def start(self) -> None:
        """Fork the workers (after the owner's codec holds the initial states)."""
        ctx = mp.get_context("fork")
        state = (list(self.codec.ranks.values), list(self.codec.flags.values))
        for _ in range(self.n):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(child, self.model, self.props, state, self.canon, self.expander_cls), daemon=True)
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)
            self.sent_ranks.append(len(state[0]))
            self.sent_flags.append(len(state[1]))
        self.started = True

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(None)
                c.close()
            except (OSError, BrokenPipeError):
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
        self.procs, self.conns = [], []

    # -- one level ------------------------------------------------------------------------

    def expand_level(self, keys, lo: int, hi: int, open_props):
        """Yield (index, record) for lo..hi-1 in order (a generator; closing it early
        collects the chunks still in flight)."""
        if hi - lo < SMALL_LEVEL:
            expand = self.owner_expander.expand
            for i in range(lo, hi):
                yield i, expand(keys[i], open_props)
            return
        if not self.started:
            self.start()
        chunks = [(a, min(a + CHUNK, hi)) for a in range(lo, hi, CHUNK)]
        inflight = {}
        nxt = 0

        def send(c):
            w = c % self.n
            a, b = chunks[c]
            ranks = self.codec.ranks.values
            flags = self.codec.flags.values
            new_ranks = [to_plain(v) for v in ranks[self.sent_ranks[w] :]]
            new_flags = list(flags[self.sent_flags[w] :])
            self.sent_ranks[w], self.sent_flags[w] = len(ranks), len(flags)
            try:
                self.conns[w].send((new_ranks, new_flags, keys[a:b], set(open_props)))
            except OSError:  # BrokenPipeError: the worker is gone
                raise self._dead(w) from None
            inflight[c] = w

        try:
            while nxt < len(chunks) and nxt < self.n:
                send(nxt)
                nxt += 1
            for c in range(len(chunks)):
                w = inflight.pop(c)
                reply = self._recv(w)
                if reply[0] == "error":
                    raise RuntimeError(f"worker {w} (pid {self.procs[w].pid}): {reply[1]}")
                _tag, recs, local_ranks, local_flags = reply
                if nxt < len(chunks):
                    send(nxt)
                    nxt += 1
                # Resolve this chunk's local references, in first-met order.
                self._xlate_ranks = [self.codec.ranks.add(from_plain(p)) for p in local_ranks]
                self._xlate_flags = [self.codec.flags.add(tuple(f)) for f in local_flags]
                a = chunks[c][0]
                for k, rec in enumerate(recs):
                    yield a + k, rec
        finally:
            for c, w in sorted(inflight.items()):
                try:
                    self.conns[w].recv()  # leave every worker idle
                except (EOFError, OSError):
                    pass  # that worker is gone; the run is ending anyway

    def _recv(self, w):
        """Worker ``w``'s reply; WorkerDied (naming it and how it ended) if it is gone."""
        try:
            return self.conns[w].recv()
        except (EOFError, OSError):
            raise self._dead(w) from None

    def _dead(self, w) -> WorkerDied:
        p = self.procs[w]
        p.join(timeout=2)
        how = f"killed by signal {-p.exitcode}" if p.exitcode and p.exitcode < 0 else f"exit status {p.exitcode}"
        return WorkerDied(f"worker {w} (pid {p.pid}) died ({how}); the states it was expanding are lost")

    def resolve(self, key):
        """The packed key of a worker's unresolved successor key."""
        gids, stores, flag = key
        xr = self._xlate_ranks
        gids = [g if g >= 0 else xr[-g - 1] for g in gids]
        if flag < 0:
            flag = self._xlate_flags[-flag - 1]
        return self.codec.layout.pack(gids, stores, flag)


def default_workers() -> int:
    return max(1, min(len(os.sched_getaffinity(0)), 8))

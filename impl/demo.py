"""A shared-prefix workload on the reference HiCache, printing SGLang's metrics.

Sessions share a few system-prompt prefixes and grow over rounds; the host pool is smaller
than the device pool; write_through backs every node up to the embedded file store. A cold
engine serves every round, then a warm engine (fresh tree, same store, like a second
server sharing the backend) serves the last round again and prefetches from storage. With
mirror release on (seed 000) the host pool keeps moving data into storage; with the
host-starvation baseline the pinned mirrors reject most backups, so the warm engine finds
less in storage. Every copy's bytes are verified at the end.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time

from tiercheck.errors import UserError
from tiercheck.impl.demo_args import add_arguments, check_args
from tiercheck.impl.hicache import FileStorage, HiCacheConfig, LockstepHiCache
from tiercheck.impl.hicache import metrics as mt
from tiercheck.impl.kvdata import KVLayout

SHOWN = [
    mt.rejected("host_alloc_failed", "write_through"),
    mt.rejected("host_alloc_failed", "storage_prefetch"),
    mt.BACKUPED,
    mt.PREFETCHED,
    mt.HOST_USED,
    mt.HOST_TOTAL,
    mt.HOST_WRITE,
    mt.LOAD_BACK,
    mt.MIRROR_RELEASED,
    mt.DEVICE_EVICTED,
    mt.HOST_EVICTED,
]


def workload(args) -> list[list[list[int]]]:
    """rounds x sessions token lists: session s extends prefix s % groups by one turn per round."""
    rng = random.Random(args.seed)
    ps = args.page_size
    prefixes = [[rng.randrange(1, 50000) for _ in range(args.prefix_pages * ps)]
                for _ in range(args.groups)]
    turns = [[[rng.randrange(1, 50000) for _ in range(args.turn_pages * ps)]
              for _ in range(args.rounds)] for _ in range(args.sessions)]
    out = []
    for r in range(args.rounds):
        out.append([prefixes[s % args.groups] + sum(turns[s][: r + 1], []) for s in range(args.sessions)])
    return out


def make_config(args, baseline: bool) -> HiCacheConfig:
    return HiCacheConfig(
        layout=KVLayout(layers=2, heads=2, head_dim=8, page_size=args.page_size),
        device_pages=args.device_pages,
        host_pages=args.host_pages,
        policy="write_through",
        storage=True,
        prefetch=True,
        mirror_release=True,
        host_free_target=max(1, args.host_pages // 4),
        prefetch_stop_policy="wait_complete",
        variants={"host-starvation"} if baseline else set(),
    )


def serve(g, tokens: list[int], stats: dict) -> None:
    """One request: match, load back / prefetch what the tiers below hold, then insert."""
    ps = g.cfg.layout.page_size
    m = g.match_prefix(tokens)[0]
    stats["device_hit"] += m["device_pages"] * ps
    stats["host_hit"] += m["host_pages"] * ps
    cached = m["device_pages"] + m["host_pages"]
    if cached * ps < len(tokens) and (m["host_pages"] == 0 or m["last_host_node"]):
        op = g.prefetch_from_storage(tokens)[0]
        if op is not None:
            while not all(g.check_prefetch_progress(op)):
                time.sleep(0.001)
            m = g.match_prefix(tokens)[0]
    if m["last_host_node"] is not None:
        g.load_back(m["last_host_node"])
        g.flush()
    g.insert(tokens)
    g.check_events()


def run_engine(cfg, storage, ranks: int, requests: list[list[int]]) -> tuple[dict, dict, list]:
    stats = {"device_hit": 0, "host_hit": 0, "requests": 0}
    with LockstepHiCache(cfg, ranks, storage) as g:
        for tokens in requests:
            serve(g, tokens, stats)
            stats["requests"] += 1
        g.flush()
        problems = g.verify()
        metrics = g.metrics()[0]
    return stats, metrics, problems


def run_arm(args, baseline: bool, out) -> dict:
    cfg = make_config(args, baseline)
    rounds = workload(args)
    with tempfile.TemporaryDirectory(prefix="tiercheck-demo-") as tmp:
        storage = FileStorage(tmp)
        cold_reqs = [t for rnd in rounds for t in rnd]
        cold, cold_m, cold_p = run_engine(cfg, storage, args.ranks, cold_reqs)
        warm, warm_m, warm_p = run_engine(cfg, storage, args.ranks, rounds[-1])
    name = "baseline (host-starvation)" if baseline else "mirror release"
    written = cold_m.get(mt.HOST_WRITE, 0)
    rejected = cold_m.get(mt.rejected("host_alloc_failed", "write_through"), 0)
    wanted = written + rejected
    print(f"\n== {name}: {args.sessions} sessions x {args.rounds} rounds, {args.ranks} rank(s), "
          f"device {args.device_pages} pages, host {args.host_pages} pages ==", file=out)
    print(f"cold engine ({cold['requests']} requests):", file=out)
    for k in SHOWN:
        print(f"  {k} {cold_m.get(k, 0)}", file=out)
    print(f"  write-out to host: {100.0 * written / max(wanted, 1):.1f}% of staged tokens", file=out)
    storage_hit = warm_m.get(mt.PREFETCHED, 0)
    total = sum(len(t) for t in rounds[-1])
    print(f"warm engine ({warm['requests']} requests, same store):", file=out)
    print(f"  {mt.PREFETCHED} {storage_hit}  (storage hit {100.0 * storage_hit / max(total, 1):.1f}% "
          f"of prompt tokens)", file=out)
    problems = cold_p + warm_p
    print(f"verify: {'all bytes correct' if not problems else '; '.join(problems)}", file=out)
    return {"cold": cold_m, "warm": warm_m, "problems": problems, "storage_hit": storage_hit,
            "rejected": rejected}


def run(args, out=None) -> int:
    out = out or sys.stdout
    check_args(args)
    results = [run_arm(args, False, out)]
    if args.baseline:
        results.append(run_arm(args, True, out))
    return 1 if any(r["problems"] for r in results) else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tiercheck.impl.demo", description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except UserError as exc:
        print(f"tiercheck: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Benchmark: the CP owner-lane load-back eviction planners side by side, in one run.

The shape follows the incident in the header of seeds/004 (CP4, ~2,000 evictable
candidates, a single-owner free-room deficit that takes ~200 victims), scaled to fit a
small machine. naive (the slow seed code), memo (the seed's fix: memo + one bincount sync)
and fast (memo + lazy greedy selection) plan the same tree; the plans must be identical.
Printed: device->host syncs, histogram reads, wall time, and the ratios against naive. On
CUDA the tensors live on the GPU and every counted sync is a real one.

    python benchmarks/cp_planner.py [--leaves 2000] [--cp 4] [--victims 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import torch

from tiercheck.impl.cp import (
    CpNode, FastPlanner, MemoPlanner, NaivePlanner, OwnerLanes, SyncCounter, default_device,
)

PAGES_PER_LEAF = (12, 60)  # uniform; 3..15 pages per owner lane at cp=4
PAGES_PER_PREFIX = 8
LEAVES_PER_PREFIX = 50
LOAD_PAGES = 64  # the load-back chunk whose admission triggers the plan


def build_case(leaves: int, cp: int, page_size: int, victims: int, seed: int, device):
    """A tree of shared prefixes with ``leaves`` evictable leaves, and the lane stats."""
    rng = random.Random(seed)
    prefixes = max(1, leaves // LEAVES_PER_PREFIX)
    tree_pages = leaves * PAGES_PER_LEAF[1] + prefixes * PAGES_PER_PREFIX
    lane_capacity = tree_pages // cp + 2 * LOAD_PAGES
    owner0_per_leaf = []

    def take(npages: int, leaf: bool):
        start = rng.randrange(cp)
        owners = [(start + i) % cp for i in range(npages)]
        if leaf:
            owner0_per_leaf.append(owners.count(0))
        return owners

    ids = iter(range(1, 10**9))
    order = list(range(leaves + prefixes))
    rng.shuffle(order)  # replicated access order (same on every rank)
    seqs = iter(order)
    shape = []  # (parent index or None, page owners, backuped, access_seq, local clock)
    for p in range(prefixes):
        shape.append((None, take(PAGES_PER_PREFIX, False), True, next(seqs), rng.random()))
        parent = len(shape) - 1
        for _ in range(leaves // prefixes + (p < leaves % prefixes)):
            shape.append((parent, take(rng.randint(*PAGES_PER_LEAF), True),
                          rng.random() < 0.5, next(seqs), rng.random()))
    # Free-room watermark sized so that the greedy plan for owner 0 takes ~``victims``
    # victims (it takes the leaves with the most owner-0 pages first).
    target = sum(sorted(owner0_per_leaf, reverse=True)[:victims])
    ratio = min(0.9, (target - 0.5) / lane_capacity)
    lanes = OwnerLanes(lane_capacity * cp + 1, cp, page_size,
                       target_ratio=ratio, trigger_ratio=ratio / 2)
    root = CpNode(0, torch.empty(0, dtype=torch.int64, device=device), lock_ref=1)
    nodes = []
    for parent, owners, backuped, seq, clock in shape:
        node = CpNode(next(ids), lanes.token_locs(lanes.alloc_with_owners(owners), device),
                      backuped=backuped, access_seq=seq, last_access_time=clock)
        (root if parent is None else nodes[parent]).add_child(node)
        nodes.append(node)
    # Owner 0's lane is nearly full (the incident's single-owner pressure).
    lanes.alloc(0, max(0, lanes.available_pages()[0] - 10))
    return root, lanes.stats([i % cp for i in range(LOAD_PAGES)])


def run_planner(planner, root, deficits, device):
    syncs = SyncCounter()
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    plan = planner.plan(root, deficits, syncs=syncs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return plan, syncs.count, time.perf_counter() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leaves", type=int, default=2000)
    ap.add_argument("--cp", type=int, default=4)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--victims", type=int, default=200, help="approximate victims the deficit needs")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.leaves < 1 or args.cp < 1 or args.page_size < 1 or args.victims < 1:
        print("cp_planner: --leaves, --cp, --page-size and --victims must be positive",
              file=sys.stderr)
        return 2
    if args.victims > args.leaves:
        print(f"cp_planner: --victims {args.victims} exceeds --leaves {args.leaves}",
              file=sys.stderr)
        return 2

    device = default_device()
    root, stats = build_case(args.leaves, args.cp, args.page_size, args.victims, args.seed, device)
    deficits = list(stats.free_room_deficit)
    print(f"device={device} cp_size={args.cp} page_size={args.page_size} "
          f"candidates={len(FastPlanner.evictable_leaves(root))}")
    print(f"available_by_owner={list(stats.available)} required_by_owner={list(stats.required)}")
    print(f"exact_deficit={list(stats.deficit)} free_room_deficit={deficits}")

    results = {}
    for cls in (FastPlanner, MemoPlanner, NaivePlanner):
        results[cls.name] = run_planner(cls(args.cp, args.page_size), root, deficits, device)
    fast, fast_syncs, fast_s = results["fast"]
    print(f"victims={len(fast.victims)} planned_freed_by_owner={list(fast.planned_freed_by_owner)} "
          f"remaining_deficit_by_owner={list(fast.remaining_deficit_by_owner)}")
    naive_syncs, naive_s = results["naive"][1], results["naive"][2]
    print(f"{'planner':<8}{'d->h syncs':>13}{'hist reads':>12}{'wall s':>10}"
          f"{'naive/x syncs':>15}{'naive/x time':>14}")
    for name in ("naive", "memo", "fast"):
        plan, syncs, secs = results[name]
        print(f"{name:<8}{syncs:>13,}{plan.stats.histogram_reads:>12,}{secs:>10.3f}"
              f"{naive_syncs / max(1, syncs):>14.0f}x{naive_s / secs:>13.1f}x")
    identical = all(r[0] == fast for r in results.values())
    print(f"plans identical (victims in order, freed, remaining): {identical} "
          f"(digest {fast.digest()})")
    if not identical:
        print("cp_planner: the planners' plans differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

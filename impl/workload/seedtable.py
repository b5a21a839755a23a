"""Seed 000's results table reproduced: every arm flag off and flag on in one run, the
seed's figures beside ours, the directions checked, and the flag-off drain-round overhead
measured side by side in the same run. Also seed 001's duplicate reclaim on/off.

    t = run_seed_table(seed_setup("full"))
    print(format_seed_table(t))
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field

from tiercheck.impl.hicache import FileStorage, LockstepHiCache
from tiercheck.impl.hicache import metrics as mt

from .arms import ArmResult, BenchSetup, run_mirror_arm, run_reclaim_arm
from .overhead import SideBySide, micro_cost

# Seed 000, "Results on the same 16-rank deployment, same load, only the flag flipped".
SEED = {
    "write_out": ("11.3", "100"),
    "rejected_write": ("16.7M", "0"),
    "warm_storage_hit": ("0.53", "3.17"),
    "two_engine_storage_hit": ("-", "12.87"),
    "two_engine_warm_speedup": ("-", "2x"),
    "overhead": "no measurable drain-round overhead with the flag off",
}
OVERHEAD_TARGET_PCT = 1.0


@dataclass
class SeedTable:
    setup: BenchSetup
    arms: dict = field(default_factory=dict)  # (backend, engines, flag) -> ArmResult
    overhead: dict = field(default_factory=dict)
    elapsed_s: float = 0.0

    def arm(self, backend: str, flag: bool, engines: int = 1) -> ArmResult | None:
        return self.arms.get((backend, engines, flag))

    def pairs(self, engines: int = 1) -> list[tuple[str, ArmResult, ArmResult]]:
        """(backend, off, on) for every backend run with both flags."""
        out = []
        for (b, e, f), off in self.arms.items():
            if e == engines and not f and (b, e, True) in self.arms:
                out.append((b, off, self.arms[(b, e, True)]))
        return out


def _log(log, msg: str) -> None:
    if log is not None:
        log(msg)


def measure_overhead(setup: BenchSetup, hook: SideBySide) -> dict:
    """The flag-off cost: the side-by-side ratio from ``hook`` (which timed the flag-off
    arm's sync rounds, ABBA between the shipped round and the hook-absent baseline), and
    the micro cost of the drain-round bodies on an idle flag-off rank, as a share of the
    median sync round of that arm."""
    side = hook.summary("in_rank")
    with tempfile.TemporaryDirectory(prefix="tiercheck-overhead-") as tmp:
        with LockstepHiCache(setup.mirror_config(False), 1, FileStorage(tmp)) as g:
            micro = micro_cost(g.ranks[0])
    round_ns = side["median_b"] * 1e9
    pct = 100.0 * micro["added_ns"] / round_ns if round_ns == round_ns and round_ns > 0 else float("nan")
    return {"side_by_side": side, "micro": micro, "added_pct": pct,
            "side_pct": 100.0 * (side["ratio"] - 1.0), "side_lo_pct": 100.0 * (side["lo"] - 1.0),
            "side_hi_pct": 100.0 * (side["hi"] - 1.0)}


def run_seed_table(setup: BenchSetup, backends=("file", "mooncake"), two_engine: str | None = "file",
                   overhead: bool = True, log=None) -> SeedTable:
    """Every arm, flag off then on. The flag-off arm of the first backend times its sync
    rounds side by side (shipped vs baseline) when ``overhead``; ``two_engine``: the
    backend of the two-engine arm (None: skip)."""
    t0 = time.perf_counter()
    table = SeedTable(setup)
    runs = [(b, 1) for b in backends] + ([(two_engine, 2)] if two_engine else [])
    hook = None
    for i, (backend, engines) in enumerate(runs):
        for flag in (False, True):
            h = None
            if overhead and i == 0 and not flag:
                h = hook = SideBySide()
            _log(log, f"arm: {backend}{' x2 engines' if engines == 2 else ''}, "
                      f"mirror release {'on' if flag else 'off'} ...")
            res = run_mirror_arm(setup, backend, flag, engines, round_hook=h)
            table.arms[(backend, engines, flag)] = res
            _log(log, f"  done in {res.wall_s:.1f} s, verify: {_verify_cell(res)}")
            for p in res.problems[:5]:
                _log(log, f"    problem: {p}")
    if hook is not None:
        table.overhead = measure_overhead(setup, hook)
    table.elapsed_s = time.perf_counter() - t0
    return table


# -- directions -------------------------------------------------------------------------------


def directions(table: SeedTable) -> list[tuple[str, bool, str]]:
    """(what, reproduced, detail) for every direction of the seed's table, per backend."""
    out = []
    for b, off, on in table.pairs(1):
        r_off, r_on = off.rejected_tokens(), on.rejected_tokens()
        out.append((f"{b}: host_alloc_failed write rejections -> 0", r_off > 0 and r_on == 0,
                    f"{r_off} -> {r_on} tokens"))
        out.append((f"{b}: storage write-out up to ~100%",
                    on.written_pct > off.written_pct and on.written_pct >= 99.0,
                    f"{off.written_pct:.1f}% -> {on.written_pct:.1f}%"))
        s_off, s_on = off.warm.pct("storage_hit"), on.warm.pct("storage_hit")
        out.append((f"{b}: warm-round storage hit up", s_on > s_off, f"{s_off:.2f}% -> {s_on:.2f}%"))
    for b, off, on in table.pairs(2):
        s_off, s_on = off.warm.pct("storage_hit"), on.warm.pct("storage_hit")
        out.append((f"{b} x2 engines: warm-round storage hit up", s_on > s_off,
                    f"{s_off:.2f}% -> {s_on:.2f}%"))
    bad = [a.name for a in table.arms.values() if a.problems]
    out.append(("every arm's bytes verify", not bad, "all ok" if not bad else f"problems in {bad}"))
    if table.overhead:
        pct = table.overhead["added_pct"]
        out.append((f"flag-off drain-round overhead < {OVERHEAD_TARGET_PCT:g}%",
                    pct == pct and pct < OVERHEAD_TARGET_PCT, f"{pct:.3f}% (micro, see overhead line)"))
    return out


# -- formatting ---------------------------------------------------------------------------------


def _fmt_tokens(n: int) -> str:
    return f"{n:,}"


def _rejection_keys(arms) -> list[tuple[str, str]]:
    keys = set()
    for a in arms:
        keys.update(a.rejected())
    first = [("host_alloc_failed", "write_through"), ("host_alloc_failed", "storage_prefetch")]
    return first + sorted(keys - set(first))


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]


def _verify_cell(a: ArmResult) -> str:
    if any(p.startswith("storage: ") for p in a.problems):
        return f"FAILED: store unreachable ({len(a.problems)} problems)"
    return "ok" if not a.problems else f"{len(a.problems)} problems"


def format_seed_table(table: SeedTable) -> str:
    s = table.setup
    lines = [
        f"Seed 000 results table, reproduced ({s.load.sessions} sessions x {s.load.rounds} rounds, "
        f"{s.load.groups} shared system prompts, concurrency {s.concurrency}, device pool "
        f"{s.device_pages} pages, host pool {s.host_pages} pages = {s.host_ratio:g} x device, "
        f"page {s.load.page_size} tokens, {s.ranks} rank(s))",
        "",
    ]
    pairs = table.pairs(1)
    header = ["metric", "seed off", "seed on"]
    for b, _, _ in pairs:
        header += [f"{b} off", f"{b} on"]
    rows: list[list[str]] = []

    def row(name, seed, fn):
        r = [name, seed[0], seed[1]]
        for _, off, on in pairs:
            r += [fn(off), fn(on)]
        rows.append(r)

    row("storage write-out % (backed-up / (backed-up + rejected) tokens)", SEED["write_out"],
        lambda a: f"{a.written_pct:.1f}")
    row("pages in store at the end / distinct pages %", ("-", "-"), lambda a: f"{a.write_out_pct:.1f}")
    row("storage backups failed (pages)", ("-", "-"), lambda a: _fmt_tokens(a.metrics.get(mt.STORAGE_FAILED_PAGES, 0)))
    arms = [a for _, off, on in pairs for a in (off, on)]
    for reason, stage in _rejection_keys(arms):
        seed = SEED["rejected_write"] if (reason, stage) == ("host_alloc_failed", "write_through") \
            else ("wholesale" if stage == "storage_prefetch" else "-", "0" if stage == "storage_prefetch" else "-")
        row(f"write-rejected tokens, {reason} / {stage}", seed,
            lambda a, k=(reason, stage): _fmt_tokens(a.rejected().get(k, 0)))
    row("warm-round storage hit % (of prompt tokens)", SEED["warm_storage_hit"],
        lambda a: f"{a.warm.pct('storage_hit'):.2f}")
    row("warm-round device / host hit %", ("-", "-"),
        lambda a: f"{a.warm.pct('device_hit'):.1f} / {a.warm.pct('host_hit'):.1f}")
    row("mirror-released tokens", ("-", "-"), lambda a: _fmt_tokens(a.metrics.get(mt.MIRROR_RELEASED, 0)))
    row("wall time per arm s (cold + warm round)", ("-", "-"),
        lambda a: f"{a.wall_s:.1f} ({a.rounds[0].wall_s:.1f}+{a.warm.wall_s:.1f})")
    row("  of which modelled GPU time s", ("-", "-"), lambda a: f"{a.forward_s:.2f}")
    row("bytes verified at the end", ("-", "-"), _verify_cell)
    lines += _table(header, rows)

    twos = table.pairs(2)
    if twos:
        lines += ["", "Two engines sharing one store (engine 2 serves the warm round cold from the store):", ""]
        header2 = ["metric", "seed off", "seed on"]
        for b, _, _ in twos:
            header2 += [f"{b} x2 off", f"{b} x2 on"]
        rows2: list[list[str]] = []

        def row2(name, seed, fn):
            r = [name, seed[0], seed[1]]
            for _, off, on in twos:
                r += [fn(off), fn(on)]
            rows2.append(r)

        row2("warm-round storage hit %", SEED["two_engine_storage_hit"], lambda a: f"{a.warm.pct('storage_hit'):.2f}")
        row2("warm-round computed prompt tokens", ("-", "-"), lambda a: _fmt_tokens(a.warm.computed))
        row2("warm-round wall s (modelled GPU s)", SEED["two_engine_warm_speedup"],
             lambda a: f"{a.warm.wall_s:.2f} ({a.warm.forward_s:.2f})")
        row2("storage write-out %", ("-", "-"), lambda a: f"{a.written_pct:.1f}")
        row2("write-rejected tokens, host_alloc_failed (all stages)", ("-", "-"),
             lambda a: _fmt_tokens(a.rejected_tokens(stage=None)))
        row2("bytes verified at the end", ("-", "-"), _verify_cell)
        lines += _table(header2, rows2)
        for b, off, on in twos:
            parts = []
            if on.warm.forward_s:
                parts.append(f"modelled GPU time {off.warm.forward_s / on.warm.forward_s:.2f}x")
            parts.append(f"wall {off.warm.wall_s / max(on.warm.wall_s, 1e-9):.2f}x")
            lines.append(f"  {b} x2: warm-round speedup off -> on: {', '.join(parts)} (>1: on is faster)")

    ov = table.overhead
    if ov:
        sd, mc = ov["side_by_side"], ov["micro"]
        lines += [
            "",
            f"Flag-off drain-round overhead (seed: {SEED['overhead']}; target < {OVERHEAD_TARGET_PCT:g}%):",
            f"  side by side in the flag-off arm ({sd['n'][0]}+{sd['n'][1]} sync rounds, ABBA): median "
            f"{sd['median_a'] * 1e6:.1f} us shipped vs {sd['median_b'] * 1e6:.1f} us hook absent, ratio "
            f"{sd['ratio']:.4f} ({ov['side_pct']:+.2f}%, 95% CI {ov['side_lo_pct']:+.2f}% .. {ov['side_hi_pct']:+.2f}%)",
            f"  micro (drain-round bodies, idle rank, {mc['blocks']}x2 blocks of {mc['per_block']}, fastest "
            f"block): {mc['shipped_ns']:.0f} ns vs {mc['baseline_ns']:.0f} ns, added {mc['added_ns']:+.0f} ns "
            f"per round = {ov['added_pct']:.3f}% of the median sync round (medians: "
            f"{mc['median_added_ns']:+.0f} ns)",
        ]
    lines += ["", "Directions of the seed reproduced:"]
    for what, ok, detail in directions(table):
        lines.append(f"  [{'yes' if ok else 'NO '}] {what}: {detail}")
    lines.append(f"\n(total {table.elapsed_s:.1f} s)")
    return "\n".join(lines)


# -- seed 001: duplicate reclaim -----------------------------------------------------------------


@dataclass
class ReclaimTable:
    setup: BenchSetup
    off: ArmResult
    on: ArmResult
    elapsed_s: float = 0.0


def run_reclaim_table(setup: BenchSetup, log=None) -> ReclaimTable:
    t0 = time.perf_counter()
    arms = []
    for flag in (False, True):
        _log(log, f"arm: write_back, duplicate reclaim {'on' if flag else 'off'} ...")
        arms.append(run_reclaim_arm(setup, flag))
        _log(log, f"  done in {arms[-1].wall_s:.1f} s")
    return ReclaimTable(setup, arms[0], arms[1], time.perf_counter() - t0)


def reclaim_directions(t: ReclaimTable) -> list[tuple[str, bool, str]]:
    off, on = t.off, t.on
    cap_off, cap_on = off.trace.mean_under_pressure("host_only"), on.trace.mean_under_pressure("host_only")
    dup_off, dup_on = off.trace.mean_under_pressure("mirror"), on.trace.mean_under_pressure("mirror")
    h_off, h_on = off.hit_pct(), on.hit_pct()
    bad = [a.name for a in (off, on) if a.problems]
    return [
        ("duplicates reclaimed only with the flag",
         off.metrics.get(mt.DUP_RECLAIMED, 0) == 0 and on.metrics.get(mt.DUP_RECLAIMED, 0) > 0,
         f"{off.metrics.get(mt.DUP_RECLAIMED, 0)} -> {on.metrics.get(mt.DUP_RECLAIMED, 0)} tokens"),
        ("duplicate pages under host pressure down", dup_on < dup_off, f"{dup_off:.1f} -> {dup_on:.1f}"),
        ("effective host capacity (host-only pages under pressure) up", cap_on > cap_off,
         f"{cap_off:.1f} -> {cap_on:.1f} pages"),
        ("warm-round hit rate not lower", h_on >= h_off, f"{h_off:.2f}% -> {h_on:.2f}%"),
        ("both arms' bytes verify", not bad, "all ok" if not bad else f"problems in {bad}"),
    ]


def format_reclaim_table(t: ReclaimTable) -> str:
    s = t.setup
    ps = s.load.page_size
    lines = [
        f"Seed 001, write_back duplicate reclaim off/on ({s.load.sessions} sessions x {s.load.rounds} rounds, "
        f"concurrency {s.concurrency}, device {s.device_pages} pages, host {s.host_pages} pages = "
        f"{s.host_ratio:g} x device, no storage)",
        "",
    ]
    rows = []
    for name, fn in [
        ("duplicate-reclaimed tokens", lambda a: _fmt_tokens(a.metrics.get(mt.DUP_RECLAIMED, 0))),
        ("host-evicted tokens (host-only data dropped)", lambda a: _fmt_tokens(a.metrics.get(mt.HOST_EVICTED, 0))),
        ("steps with host pool >= 90% full", lambda a: f"{100 * a.trace.pressure_share():.0f}%"),
        ("effective host capacity: host-only pages under pressure (mean)",
         lambda a: f"{a.trace.mean_under_pressure('host_only'):.1f} of {a.trace.capacity}"),
        ("duplicate (device-resident) host pages under pressure (mean)",
         lambda a: f"{a.trace.mean_under_pressure('mirror'):.1f}"),
        ("host-only pages, whole run (mean)", lambda a: f"{a.trace.mean('host_only'):.1f}"),
        ("load-back tokens", lambda a: _fmt_tokens(a.metrics.get(mt.LOAD_BACK, 0))),
        ("warm-round hit % (device + host)", lambda a: f"{a.hit_pct():.2f}"),
        ("warm-round host hit %", lambda a: f"{a.warm.pct('host_hit'):.2f}"),
        ("warm-round computed %", lambda a: f"{a.warm.pct('computed'):.2f}"),
        ("wall time s (cold + warm round)",
         lambda a: f"{a.wall_s:.1f} ({a.rounds[0].wall_s:.1f}+{a.warm.wall_s:.1f})"),
        ("bytes verified at the end", _verify_cell),
    ]:
        rows.append([name, fn(t.off), fn(t.on)])
    lines += _table(["metric", "reclaim off", "reclaim on"], rows)
    lines += ["", f"(page = {ps} tokens)", "Directions:"]
    for what, ok, detail in reclaim_directions(t):
        lines.append(f"  [{'yes' if ok else 'NO '}] {what}: {detail}")
    lines.append(f"\n(total {t.elapsed_s:.1f} s)")
    return "\n".join(lines)

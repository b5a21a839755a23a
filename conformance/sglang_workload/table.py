"""The starvation table: one row per (shape, arm); pure formatting of ArmResult-like rows."""

from __future__ import annotations

from tiercheck.impl.workload.seedtable import _table

HEADER = ["shape", "arm", "host / device tok", "D->H admitted / rejected tok", "write-out %",
          "distinct tokens in L3 %", "prefetch hit / loaded tok", "steps host >=95% full",
          "released tok", "bytes verified"]


def row(r) -> list[str]:
    a = r.arm
    sizes = f"{r.host_capacity or a.setup.host_tokens} / {a.setup.device_tokens}"
    if r.error:
        return [r.shape, a.name, sizes, "not run: " + r.error, "-", "-", "-", "-", "-", "-"]
    c = r.counters
    store = f"{r.stored_pct:.1f}" if a.setup.storage else "-"
    verified = "ok" if not r.problems else f"{len(r.problems)} problems"
    return [
        r.shape, a.name, sizes,
        f"{c.backup_admitted:,} / {c.backup_rejected:,}",
        f"{r.write_out_pct:.1f}" if c.backup_admitted + c.backup_rejected else "-",
        store,
        f"{c.prefetch_hit:,} / {c.prefetch_loaded:,}",
        f"{100 * r.full_share():.0f}%",
        f"{r.released_tokens:,}" if a.patched else "-",
        verified,
    ]


def format_table(results, title: str = "") -> str:
    lines = [title, ""] if title else []
    lines += _table(HEADER, [row(r) for r in results])
    return "\n".join(lines)


def precondition(results) -> list[str]:
    """Which arms starve (write-out under 50%; ok from 95%) and the setting they share."""
    out = []
    for r in results:
        if r.error:
            continue
        s = r.arm.setup
        if s.host_memory_mode == "buffer_only":
            # Its writes stage through the buffer pipeline, not the host-pool admission
            # measured here: only the share of tokens that reached L3 is comparable.
            out.append(f"  [n/a    ] {r.shape}: {r.arm.name} (buffer_only: {r.stored_pct:.1f}% of distinct "
                       "tokens in L3 at the end; no host-pool admission to starve)")
            continue
        w = r.write_out_pct
        label = "starves" if w < 50.0 else "ok     " if w >= 95.0 else "partly "
        out.append(f"  [{label}] {r.shape}: {r.arm.name} "
                   f"(host {r.host_capacity} < device {s.device_tokens}: {r.host_capacity < s.device_tokens}, "
                   f"{s.policy}, storage {'on' if s.storage else 'off'}, {s.host_memory_mode})")
    return out

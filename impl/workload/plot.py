"""Host-pool occupancy over time, one panel per arm (matplotlib, the ``bench`` extra).

matplotlib is optional: ``plot_occupancy`` raises PlotUnavailable with a one-line
message when it is missing, and the callers print that message and go on.
"""

from __future__ import annotations

from .occupancy import FIELDS

# Stacked in this order, bottom up.
LAYERS = (
    ("pinned", "mirror / duplicate, pinned (device copy resident)", "#d62728"),
    ("releasable", "mirror, durable + idle (release candidate)", "#9467bd"),
    ("host_only", "host-only (the only copy)", "#2ca02c"),
    ("writing", "D->H copy in flight", "#ff7f0e"),
    ("other", "prefetch reservations, release queue", "#7f7f7f"),
)


class PlotUnavailable(RuntimeError):
    pass


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable(
            "matplotlib is not installed: no plot written (pip install 'tiercheck[bench]' or "
            "pip install matplotlib)"
        ) from exc
    return plt


def plot_occupancy(arms, path: str, title: str) -> str:
    """One panel per ArmResult (its ``trace``): host pages used by category over the
    scheduler steps, the capacity, and the boundary between rounds. Returns ``path``."""
    plt = _pyplot()
    arms = [a for a in arms if a.trace is not None and a.trace.rows]
    if not arms:
        raise PlotUnavailable("no occupancy samples to plot")
    fig, axes = plt.subplots(1, len(arms), figsize=(5.2 * len(arms), 4.0), sharey=True, squeeze=False)
    for ax, arm in zip(axes[0], arms):
        tr = arm.trace
        steps = tr.column("step")
        cols = {k: tr.column(k) for k in ("mirror", "releasable", "host_only", "writing", "other")}
        cols["pinned"] = [m - r for m, r in zip(cols["mirror"], cols["releasable"])]
        ax.stackplot(steps, *[cols[k] for k, _, _ in LAYERS],
                     labels=[lab for _, lab, _ in LAYERS], colors=[c for _, _, c in LAYERS], alpha=0.85)
        ax.axhline(tr.capacity, color="black", lw=1, ls="--", label="capacity")
        end = 0
        for rnd in arm.rounds[:-1]:
            end += rnd.steps
            ax.axvline(end, color="#1f77b4", lw=1, ls=":")
        ax.set_title(arm.name, fontsize=9)
        ax.set_xlabel("scheduler step")
        ax.set_xlim(steps[0], steps[-1])
    axes[0][0].set_ylabel("host pages")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.13, 1, 1))  # room for the legend below the panels
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["FIELDS", "LAYERS", "PlotUnavailable", "plot_occupancy"]

"""tiercheck show TRACE: a stored ITF trace (from `tiercheck check --out`) step by step, what
changed on each rank, a lasso's cycle marked; --html OUT.html writes a self-contained page
that draws every rank's radix tree at each step."""

from __future__ import annotations

from tiercheck.models.trace import read_trace
from tiercheck.models.viewer_data import text_lines

NAME = "show"
HELP = "print a stored trace step by step (--html: write an interactive page)"


def add_arguments(p):
    p.add_argument("trace", help="trace file (ITF JSON written by tiercheck check --out)")
    p.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML viewer here instead of printing")


def run(args) -> int:
    trace = read_trace(args.trace)
    if args.html:
        from tiercheck.models.viewer_html import write

        out = write(trace, args.html)
        print(f"wrote {out} ({len(trace.states) - 1} steps, {len(trace.states[0]['ranks'])} rank(s))")
        return 0
    for line in text_lines(trace):
        print(line)
    return 0

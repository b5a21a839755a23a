"""tiercheck show TRACE: a stored ITF trace (from `tiercheck check --out`) step by step, what
changed on each rank, a lasso's cycle marked, the first step where a conformance trace passes a
known disagreement marked; --html OUT.html writes a self-contained page
that draws every rank's radix tree at each step."""

from __future__ import annotations

from tiercheck import exits
from tiercheck.inputs import output_file
from tiercheck.models.trace import read_trace
from tiercheck.models.trace_check import check_passing, check_stored
from tiercheck.models.viewer_data import text_lines

NAME = "show"
HELP = "print a stored trace step by step (--html: write an interactive page)"


def add_arguments(p):
    p.add_argument("trace", help="trace file (ITF JSON written by tiercheck check --out)")
    p.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML viewer here instead of printing")


def run(args) -> int:
    if args.html:
        output_file(args.html, "--html")
    trace = read_trace(args.trace)
    passed_at = None
    if trace.meta.get("passes"):  # a conformance trace that passes known disagreements
        _model, passed_at = check_passing(trace)
    else:
        check_stored(trace)  # the same validation as replay: a bad trace is exit 2, not a picture
    if args.html:
        from tiercheck.models.viewer_html import write

        out = write(trace, args.html)
        print(f"wrote {out} ({len(trace.states) - 1} steps, {len(trace.states[0]['ranks'])} rank(s))")
        return exits.OK
    for line in text_lines(trace, passed_at):
        print(line)
    return exits.OK

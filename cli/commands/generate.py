"""tiercheck generate MODEL -o DIR: a transition tour of the model as replayable traces
plus one pytest module that replays them against an implementation."""

from __future__ import annotations

from tiercheck import exits
from tiercheck.conformance.generated import generate
from tiercheck.inputs import int_in, output_dir

NAME = "generate"
HELP = "write a conformance suite (transition tour traces + pytest module) for a model"


def add_arguments(p):
    p.add_argument("model", help="model file or shipped model name")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--max-len", type=int_in(1, 10_000), default=60, help="longest trace (steps, default 60)")
    p.add_argument("--budget", type=int_in(1, 10_000_000), default=20_000, help="most steps in all traces together (default 20,000)")


def run(args) -> int:
    output_dir(args.out, "-o")
    tour, cases = generate(args.model, args.out, args.max_len, args.budget)
    steps = sum(len(t.actions) for t in tour.traces)
    print(
        f"{len(cases)} traces, {steps} steps over {tour.states:,} states: "
        f"{tour.transitions_covered}/{tour.transitions_total} transitions and "
        f"{tour.labels_covered}/{tour.labels_total} action labels taken, "
        f"{tour.probes_covered} guard probes ({', '.join(tour.probe_names)}) -> {args.out}"
    )
    return exits.OK

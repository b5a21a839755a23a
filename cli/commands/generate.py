"""tiercheck generate MODEL -o DIR: a transition tour of the model as replayable traces
plus one pytest module that replays them against an implementation."""

from __future__ import annotations

from tiercheck.conformance.generated import generate

NAME = "generate"
HELP = "write a conformance suite (transition tour traces + pytest module) for a model"


def add_arguments(p):
    p.add_argument("model", help="model file or shipped model name")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--max-len", type=int, default=60, help="longest trace (steps)")
    p.add_argument("--budget", type=int, default=20_000, help="most steps in all traces together")


def run(args) -> int:
    tour, cases = generate(args.model, args.out, args.max_len, args.budget)
    steps = sum(len(t.actions) for t in tour.traces)
    print(
        f"{len(cases)} traces, {steps} steps over {tour.states:,} states: "
        f"{tour.transitions_covered}/{tour.transitions_total} transitions and "
        f"{tour.labels_covered}/{tour.labels_total} action labels taken, "
        f"{tour.probes_covered} guard probes ({', '.join(tour.probe_names)}) -> {args.out}"
    )
    return 0

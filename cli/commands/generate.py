"""tiercheck generate [MODEL] -o DIR: a transition tour of the model as replayable traces
plus one pytest module that replays them against an implementation. With no MODEL, one
suite per default conformance model (the set `tiercheck conform` runs), in DIR/<model>."""

from __future__ import annotations

from tiercheck import exits
from tiercheck.conformance.generated import generate, generate_defaults
from tiercheck.inputs import int_in, output_dir

NAME = "generate"
HELP = "write a conformance suite (transition tour traces + pytest module) for a model"


def add_arguments(p):
    p.add_argument("model", nargs="?", default=None,
                   help="model file or shipped model name (default: every default conformance model)")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--max-len", type=int_in(1, 10_000), default=60, help="longest trace (steps, default 60)")
    p.add_argument("--budget", type=int_in(1, 10_000_000), default=20_000,
                   help="most steps in all traces together, per model (default 20,000)")
    p.add_argument("--limit", type=int_in(1, 10_000_000), default=None,
                   help="explore at most this many states, a bigger model gets a bounded tour (default without "
                        "MODEL: 20000; with MODEL: a model over 200000 states is an error)")


def run(args) -> int:
    output_dir(args.out, "-o")
    if args.model is None:
        for label, tour, cases in generate_defaults(args.out, args.max_len, args.budget, args.limit or 20_000):
            print(_summary(label, tour, cases, f"{args.out}/{label}"))
        return exits.OK
    tour, cases = generate(args.model, args.out, args.max_len, args.budget, args.limit)
    print(_summary(args.model, tour, cases, args.out))
    return exits.OK


def _summary(name, tour, cases, out) -> str:
    steps = sum(len(t.actions) for t in tour.traces)
    bounded = " (exploration bounded)" if tour.bounded else ""
    return (
        f"{name}: {len(cases)} traces, {steps} steps over {tour.states:,} states{bounded}: "
        f"{tour.transitions_covered}/{tour.transitions_total} transitions and "
        f"{tour.labels_covered}/{tour.labels_total} action labels taken, "
        f"{tour.probes_covered} guard probes ({', '.join(tour.probe_names)}) -> {out}"
    )

"""tiercheck generate [MODEL] -o DIR: a transition tour of the model as replayable traces
plus one pytest module that replays them against an implementation. With no MODEL, one
suite per default conformance model (the set `tiercheck conform` runs), in DIR/<model>."""

from __future__ import annotations

from tiercheck.conformance.generated import generate, generate_defaults

NAME = "generate"
HELP = "write a conformance suite (transition tour traces + pytest module) for a model"


def add_arguments(p):
    p.add_argument("model", nargs="?", default=None,
                   help="model file or shipped model name (default: every default conformance model)")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--max-len", type=int, default=60, help="longest trace (steps)")
    p.add_argument("--budget", type=int, default=20_000, help="most steps in all traces together (per model)")
    p.add_argument("--limit", type=int, default=None,
                   help="explore at most this many states, a bigger model gets a bounded tour (default without "
                        "MODEL: 20000; with MODEL: a model over 200000 states is an error)")


def run(args) -> int:
    if args.model is None:
        for label, tour, cases in generate_defaults(args.out, args.max_len, args.budget, args.limit or 20_000):
            print(_summary(label, tour, cases, f"{args.out}/{label}"))
        return 0
    tour, cases = generate(args.model, args.out, args.max_len, args.budget, args.limit)
    print(_summary(args.model, tour, cases, args.out))
    return 0


def _summary(name, tour, cases, out) -> str:
    steps = sum(len(t.actions) for t in tour.traces)
    bounded = " (exploration bounded)" if tour.bounded else ""
    return (
        f"{name}: {len(cases)} traces, {steps} steps over {tour.states:,} states{bounded}: "
        f"{tour.transitions_covered}/{tour.transitions_total} transitions and "
        f"{tour.labels_covered}/{tour.labels_total} action labels taken, "
        f"{tour.probes_covered} guard probes ({', '.join(tour.probe_names)}) -> {out}"
    )

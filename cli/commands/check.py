"""tiercheck check MODEL.toml: exhaustive exploration, a verdict per property, and the
shortest counterexample of each violation (a lasso for liveness), printed and, with
--out, written as ITF traces.

Every input (model, numbers, output path) is checked before the search starts. A run
stopped early (--max-states, --time-limit, --max-memory, Ctrl-C, a dead worker) still
prints its partial summary and writes what it found, and exits 3 unless it found a
violation (1)."""

from __future__ import annotations

import sys

from tiercheck import exits
from tiercheck.errors import UserError
from tiercheck.inputs import int_in, memory_size, output_file, positive_float
from tiercheck.models import check_report, model_file
from tiercheck.models.budget import default_budget
from tiercheck.models.checker import ENGINES, Checker, resolve_property
from tiercheck.models.parallel import default_workers
from tiercheck.spec.model import Model

NAME = "check"
HELP = "explore a model exhaustively and check its properties"

MAX_WORKERS = 256
MAX_WALKS = 10**9
MAX_DEPTH = 10**6
# Flags of the exhaustive search that mean nothing to a simulation.
_SEARCH_ONLY = (("workers", "--workers"), ("max_states", "--max-states"), ("max_memory", "--max-memory"), ("symmetry", "--symmetry"), ("cluster", "--cluster"))


def add_arguments(p):
    p.add_argument("model", help="model file (.toml) or the name of a shipped model")
    p.add_argument("--out", metavar="FILE", help="write counterexample traces (ITF JSON) here; more than one: FILE's stem gets .PROPERTY[.N]")
    p.add_argument("--max-states", type=int_in(1), default=None, help="stop after this many distinct states (partial verdict, exit 3)")
    p.add_argument("--time-limit", type=positive_float(), default=None, help="stop after this many seconds (partial verdict, exit 3)")
    p.add_argument(
        "--max-memory",
        type=memory_size,
        default=None,
        metavar="SIZE",
        help="stop when checker and workers hold this much memory (512M, 4G, or 0.3 of this machine; "
        "default half of it; partial verdict, exit 3)",
    )
    p.add_argument("--property", action="append", dest="properties", metavar="NAME", help="check only these properties (repeatable)")
    p.add_argument(
        "--workers",
        type=int_in(1, MAX_WORKERS),
        default=None,
        metavar="N",
        help="expand states in N processes; results are the same for any N (default: one per CPU, up to 8; "
        "small models stay in one process)",
    )
    sym = p.add_mutually_exclusive_group()
    sym.add_argument("--symmetry", dest="symmetry", action="store_true", default=None, help="explore one state per orbit of interchangeable ranks/prefixes (safety properties only)")
    sym.add_argument("--no-symmetry", dest="symmetry", action="store_false", help="ignore [check] symmetry = true")
    p.add_argument("--coverage", action="store_true", help="print how often each action was enabled and taken")
    p.add_argument("--all-violations", type=int_in(1, 1000), default=1, metavar="N", help="up to N distinct counterexamples per violated property")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument(
        "--engine",
        choices=sorted(ENGINES),
        default="memo",
        help="memo (default): memoise the spec's work guard by guard on the ranks and store masks it reads; "
        "fields: entry by entry on the state fields it reads (the engine before); plain: run the spec on "
        "every state (for cross-checks); same results",
    )
    sim = p.add_argument_group("simulation (random walks, for models too large to exhaust)")
    sim.add_argument("--simulate", type=int_in(1, MAX_WALKS), metavar="N", help="run N random walks instead of the exhaustive search")
    sim.add_argument("--depth", type=int_in(1, MAX_DEPTH), metavar="D", help="steps per walk at most (default 100)")
    sim.add_argument("--seed", type=int_in(0, 2**63 - 1), metavar="S", help="random seed (default: drawn and printed); a run is reproducible from it")
    sim.add_argument("--no-swarm", action="store_true", help="every walk may take every action (default: each walk a random subset)")
    p.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="partition the states over a Dask cluster: local:N starts N worker processes here, or a "
        "scheduler address (tcp://HOST:8786); same counts, verdicts, traces and lassos as one "
        "process (needs the cluster extra)",
    )


def _progress(quiet):
    def show(distinct, transitions, queue, depth, seconds):
        if not quiet:
            print(
                f"  ... {distinct:,} distinct, {distinct / max(seconds, 1e-9):,.0f} states/s, "
                f"queue {queue:,}, depth {depth}, {seconds:.0f}s",
                file=sys.stderr,
                flush=True,
            )

    return show


def run(args) -> int:
    # Inputs first: nothing below may fail on them after minutes of search.
    mf = model_file.load(args.model)
    props = args.properties or mf.properties
    for name in props:
        try:
            resolve_property(name)
        except UserError as exc:
            raise UserError(f"--property: {exc}") from None
    if args.simulate is None:
        for flag, value in (("--depth", args.depth), ("--seed", args.seed), ("--no-swarm", args.no_swarm or None)):
            if value is not None:
                raise UserError(f"{flag} applies to --simulate only")
    else:
        for attr, flag in _SEARCH_ONLY:
            if getattr(args, attr) not in (None, False):
                raise UserError(f"{flag} does not apply to --simulate (random walks, one process)")
    if args.out:
        output_file(args.out, "--out")
    if args.simulate is not None:
        return _simulate(args, mf, props)
    model = Model(mf.config)
    toml_text = model_file.dump(mf)
    if args.cluster:
        return _cluster(args, mf, model, props, toml_text)
    checker = Checker(
        model,
        props,
        max_states=args.max_states or mf.max_states,
        time_limit=args.time_limit,
        on_progress=_progress(args.quiet),
        symmetry=mf.symmetry if args.symmetry is None else args.symmetry,
        workers=args.workers or default_workers(),
        max_violations=args.all_violations,
        max_memory=args.max_memory or default_budget(),
        engine=args.engine,
    )
    return _report(mf, model, checker.run(), props, args, toml_text)


def _report(mf, model, res, props, args, toml_text) -> int:
    """Print a search's summary and counterexamples; the exit code."""
    out = sys.stdout
    check_report.summary(mf, model, res, props, args.coverage, out)
    check_report.counterexamples(model, res, toml_text, args.out, out)
    if res.violations:
        return exits.FOUND
    if not res.complete:
        print(f"inconclusive: {res.stop_reason} (exit {exits.INCONCLUSIVE})", file=sys.stderr)
        return exits.INCONCLUSIVE
    return exits.OK


def _simulate(args, mf, props) -> int:
    from random import SystemRandom

    from tiercheck.models import simulate

    model = Model(mf.config)
    seed = args.seed if args.seed is not None else SystemRandom().randrange(2**32)
    objs = [resolve_property(n) for n in props]
    sim = simulate.simulate(
        model,
        objs,
        walks=args.simulate,
        depth=args.depth or 100,
        seed=seed,
        use_swarm=not args.no_swarm,
        max_hits=args.all_violations,
        time_limit=args.time_limit,
    )
    out = sys.stdout
    check_report.simulation_summary(mf, model, sim, props, simulate.verdicts(objs, sim), args.coverage, out)
    check_report.counterexamples(model, sim, model_file.dump(mf), args.out, out, shortest=False)
    if sim.violations:
        return exits.FOUND
    print(f"inconclusive: random walks found no violation (seed {seed}; exit {exits.INCONCLUSIVE})", file=sys.stderr)
    return exits.INCONCLUSIVE


def _cluster(args, mf, model, props, toml_text) -> int:
    from tiercheck.models import cluster

    if args.workers:
        raise UserError("--cluster runs one partition per Dask worker: drop --workers")
    if args.max_memory:
        # Each partition lives in its own Dask worker, whose memory Dask bounds.
        raise UserError("--max-memory bounds one machine's search; in --cluster mode give the Dask workers "
                        "--memory-limit instead: drop --max-memory")
    symmetry = mf.symmetry if args.symmetry is None else args.symmetry
    res = cluster.run(model, props, args.cluster, args.all_violations, args.max_states or mf.max_states,
                      args.time_limit, symmetry)
    return _report(mf, model, res, props, args, toml_text)

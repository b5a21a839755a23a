"""tiercheck sglang campaign|history|starvation|coverage: conformance campaigns and workloads against upstream SGLang.

``campaign`` runs in a lane's interpreter (the release it drives is the one installed);
``history`` runs anywhere and drives every release's lane in turn."""

from __future__ import annotations

import argparse

NAME = "sglang"
HELP = ("SGLang: the campaign on one release (in its lane), the history over every release, the starvation "
        "workload, the spec actions taken per model")


def add_arguments(p):
    sub = p.add_subparsers(dest="sglang_command", metavar="ACTION", required=True)
    c = sub.add_parser("campaign", help="stateful suite + tours on the installed release (run it from a lane)",
                       description="arguments after `campaign` go to the campaign: see `campaign -- --help`")
    c.add_argument("rest", nargs=argparse.REMAINDER, help="MODEL[@gloo][!OPTION] ... --examples N --steps N ...")
    h = sub.add_parser("history", help="the campaign on every release, table release x finding")
    from tiercheck.conformance.sglang import history

    history.add_arguments(h)
    from tiercheck.conformance.sglang_workload import command as starvation

    s = sub.add_parser("starvation", help=starvation.HELP, description=starvation.HELP)
    starvation.add_arguments(s)
    v = sub.add_parser("coverage", help="every spec action taken on the lane's SGLang per model, or why not "
                                        "(run it from a lane)")
    v.add_argument("models", nargs="*", metavar="MODEL[:RANKS]",
                   help="models (default: every model of models/library/sglang)")


def run(args) -> int:
    if args.sglang_command == "campaign":
        from tiercheck.conformance.sglang import campaign

        rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
        return campaign.main(rest)
    if args.sglang_command == "coverage":
        from tiercheck.conformance.sglang import action_coverage

        return action_coverage.main(args.models)
    if args.sglang_command == "starvation":
        from tiercheck.conformance.sglang_workload import command as starvation

        return starvation.run(args)
    from tiercheck.conformance.sglang import history

    return history.run(args)

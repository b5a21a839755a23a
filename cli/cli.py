"""The `tiercheck` console script: one parser, one module per subcommand.

Each module in tiercheck.commands (the folder cli/commands/) exposes ``NAME``, ``HELP``, ``add_arguments(parser)``
and ``run(args) -> int``. Adding a subcommand means adding a module there; the parser
finds it, in the order of ``ORDER`` first and then by name.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import tiercheck
import tiercheck.commands

from tiercheck import exits
from tiercheck.errors import UserError

# The everyday commands first in --help; any other module follows by name.
ORDER = ["check", "suite", "show", "prove", "generate", "conform", "replay", "demo"]


def command_names() -> list[str]:
    found = {m.name for m in pkgutil.iter_modules(tiercheck.commands.__path__) if not m.name.startswith("_")}
    return [n for n in ORDER if n in found] + sorted(found - set(ORDER))


COMMANDS = command_names()


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (usage stays in --help) and exit 2 like every bad input."""

    def error(self, message):
        self.exit(exits.BAD_INPUT, f"tiercheck: {self.prog.removeprefix('tiercheck ')}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="tiercheck",
        description="Model-check, prove and conformance-test HiCache tier reclaim.",
        epilog=exits.EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"tiercheck {tiercheck.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"tiercheck.commands.{name}")
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP, epilog=exits.EPILOG)
        module.add_arguments(p)
        for action in p._actions:  # nested subcommands (bench seed-table) name them too
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    child.epilog = exits.EPILOG
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a refused argument (2, one line already printed)
        return exc.code if isinstance(exc.code, int) else exits.BAD_INPUT
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        print(f"tiercheck: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # commands that keep partial results catch it themselves
        print("tiercheck: interrupted before any result", file=sys.stderr)
        return exits.INCONCLUSIVE
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

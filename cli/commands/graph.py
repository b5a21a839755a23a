"""tiercheck graph MODEL.toml -o FILE: the explored state graph of a small model as GraphML
or DOT (states as nodes with a summary of each rank's tree, steps as labelled edges)."""

from __future__ import annotations

import sys
from pathlib import Path

from tiercheck.errors import UserError
from tiercheck.inputs import int_in, output_file
from tiercheck.models import graph_export, model_file
from tiercheck.spec.model import Model

NAME = "graph"
HELP = "export the state graph of a small model (GraphML or DOT)"


def add_arguments(p):
    p.add_argument("model", help="model file (.toml) or the name of a shipped model")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the graph")
    p.add_argument("--format", choices=("graphml", "dot"), default=None, help="default: from FILE's suffix (.graphml, .dot/.gv)")
    p.add_argument(
        "--max-states",
        type=int_in(1),
        default=graph_export.DEFAULT_LIMIT,
        help=f"refuse models with more states than this (default {graph_export.DEFAULT_LIMIT:,})",
    )


def run(args) -> int:
    fmt = args.format or _format_from_suffix(args.output)
    output_file(args.output, "-o")
    mf = model_file.load(args.model)
    g = graph_export.build(Model(mf.config), args.max_states, mf.name)
    try:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        graph_export.write(g, args.output, fmt)
    except OSError as exc:
        raise UserError(f"{args.output}: cannot write: {exc}") from None
    print(f"{mf.name}: {g.number_of_nodes():,} states, {g.number_of_edges():,} edges written to {args.output} ({fmt})", file=sys.stdout)
    return 0


def _format_from_suffix(path: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix == ".graphml":
        return "graphml"
    if suffix in (".dot", ".gv"):
        return "dot"
    raise UserError(f"{path}: cannot tell the format from the suffix; pass --format graphml or dot")

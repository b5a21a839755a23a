"""tiercheck attribute MODEL: which of the model's bug variants breaks which property.

Meant for the named configurations of seed code as shipped (models/library/seed004/): the
model is checked without its variants, with each alone and with all together."""

from __future__ import annotations

from tiercheck import exits
from tiercheck.errors import UserError
from tiercheck.models import model_file
from tiercheck.models.attribution import attribute
from tiercheck.spec.shipped import SHIPPED

NAME = "attribute"
HELP = "say which of a model's bug variants (a seed's behaviours as shipped) breaks which property"


def add_arguments(p):
    p.add_argument("model", help="model file or shipped model name (e.g. seed004/wt-split-1r)")
    p.add_argument("--max-states", type=int, metavar="N", help="bound each run (the verdicts are then partial)")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="checker worker processes per run")


def _where(variant: str) -> str:
    for name, behaviours in SHIPPED.items():
        for b in behaviours:
            if b.variant == variant:
                return f"{name}: {b.code}"
    return ""


def _line(label: str, run, broken) -> str:
    partial = "" if run.complete else " (partial)"
    return f"  {label:28} {', '.join(broken) or '-':56} {run.distinct:>9,}{partial}"


def run(args) -> int:
    if args.max_states is not None and args.max_states < 1:
        raise UserError("--max-states must be positive")
    mf = model_file.load(args.model)
    if not mf.config.variants:
        raise UserError(f"{args.model}: the model switches on no variant; nothing to attribute")
    att = attribute(mf, max_states=args.max_states, workers=max(1, args.workers))
    print(f"model {args.model}: {len(att.alone)} variant(s), properties {', '.join(mf.properties)}")
    print(f"  {'switched on':28} {'breaks (holds without any)':56} {'states':>9}")
    print(_line("none", att.baseline, att.baseline.violated))
    for v, r in att.alone.items():
        print(_line(v, r, att.breaks(v)))
    print(_line("all together", att.together, att.together.violated))
    if att.interactions():
        print(f"  only together (an interaction): {', '.join(att.interactions())}")
    if att.masked():
        print(f"  broken alone, holding together (masked by another variant): {', '.join(att.masked())}")
    for v in att.alone:
        where = _where(v)
        if where:
            print(f"  {v}: {where}")
    return exits.OK

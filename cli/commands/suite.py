"""tiercheck suite: check every shipped model against what its file declares."""

from __future__ import annotations

import sys
from pathlib import Path

from tiercheck.errors import UserError
from tiercheck.models import model_file
from tiercheck.models.suite import discover, run_model

NAME = "suite"
HELP = "check every shipped model (correct ones pass, bug variants are caught)"


def add_arguments(p):
    p.add_argument("folder", nargs="?", help="a folder of model files (default: the shipped library)")
    p.add_argument("--all", action="store_true", help="include models marked slow")
    p.add_argument("--match", metavar="TEXT", help="only models whose name contains TEXT")


def run(args) -> int:
    root = Path(args.folder) if args.folder else model_file.LIBRARY
    if not root.is_dir():
        raise UserError(f"{root}: not a folder of model files")
    paths = discover(root)
    if args.match:
        paths = [p for p in paths if args.match in str(p.relative_to(root))]
    rows, skipped = [], []
    print(f"{'model':44} {'kind':8} {'states':>10} {'seconds':>8}  result")
    for path in paths:
        if model_file.load(str(path)).slow and not args.all:
            skipped.append(path.relative_to(root).with_suffix(""))
            continue
        row = run_model(path, root)
        rows.append(row)
        mark = "ok  " if row.ok else "FAIL"
        print(f"{row.name:44} {row.kind:8} {row.distinct:>10,} {row.seconds:>8.2f}  {mark} {row.detail}", flush=True)
    failed = [r for r in rows if not r.ok]
    total = sum(r.seconds for r in rows)
    print(f"\n{len(rows) - len(failed)} passed, {len(failed)} failed ({total:.1f}s)")
    if skipped:
        print(f"skipped as slow (use --all): {', '.join(map(str, skipped))}", file=sys.stderr)
    return 1 if failed else 0

"""tiercheck lane setup|python|list: isolated environments holding one SGLang release each
(or a local checkout), sharing one base with torch and the common dependencies."""

from __future__ import annotations

import json

from tiercheck.conformance.sglang import lane as lanes

NAME = "lane"
HELP = "build, find and list SGLang lanes (one virtualenv per release, sharing a base)"


def add_arguments(p):
    sub = p.add_subparsers(dest="lane_command", metavar="ACTION", required=True)
    for name, help_ in (("setup", "build the lane (idempotent) and print its interpreter"),
                        ("python", "print the interpreter of a built lane"),
                        ("list", "list the built lanes")):
        s = sub.add_parser(name, help=help_, description=help_)
        if name != "list":
            s.add_argument("spec", nargs="?", help="sglang==X.Y.Z")
            s.add_argument("--source", help="a local SGLang checkout, installed editable (instead of a release)")
        s.add_argument("--lanes-dir", help=f"where lanes live (default: ${lanes.ENV_VAR}, else the user cache)")
        if name == "setup":
            s.add_argument("--python", help="the interpreter lanes are created from (default: this one's base)")
            s.add_argument("--force", action="store_true", help="rebuild the lane (not the base)")
            s.add_argument("--patch", action="append", default=[], metavar="NAME",
                           help="then apply a tiercheck patch to the lane's sglang (idempotent; e.g. "
                                "mirror-release, seed 000's design for 0.5.23: docs/findings/sglang-starvation.md)")
        if name == "list":
            s.add_argument("--json", action="store_true", help="one JSON object per lane")


def run(args) -> int:
    root = lanes.lanes_dir(args.lanes_dir)
    if args.lane_command == "list":
        for info in lanes.list_lanes(root):
            if args.json:
                print(json.dumps(info))
            else:
                what = f"--source {info['source']}" if info.get("source") else f"sglang=={info['sglang']}"
                print(f"{what}\t{info['sglang']}\t{info['path']}")
        return 0
    version, source = lanes.lane_spec_args(args.spec, args.source)
    if args.lane_command == "python":
        print(lanes.python_of(root, version, source))
        return 0
    import sys

    py = lanes.setup(root, version, source, python=args.python, force=args.force, out=sys.stderr)
    if args.patch:
        from tiercheck.conformance.sglang_workload import patch

        where, installed = patch.lane_sglang(str(py))
        for name in args.patch:
            print(patch.apply_patch(name, where, installed), file=sys.stderr)
    print(py)
    return 0

"""Apply (or revert) a tiercheck patch to the SGLang installed in a lane.

A patch is ``patches/NAME.diff`` (unified diff against the sglang package directory,
paths ``a/sglang/...``) plus the modules it adds (``PATCHES[NAME]["adds"]``, copied
into the package). It fits only the releases listed; applying twice is a no-op;
anything else is one line on stderr and a non-zero exit.

    python -m tiercheck.conformance.sglang_workload.patch apply mirror-release [--python LANE_PY]
    python -m tiercheck.conformance.sglang_workload.patch revert mirror-release [--python LANE_PY]
    python -m tiercheck.conformance.sglang_workload.patch diff mirror-release   # the full diff
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources

from tiercheck.errors import UserError

PATCHES = {
    "mirror-release": {
        "fits": ("0.5.23",),
        "adds": {"hicache_mirror_release.py": "sglang/srt/mem_cache/hicache_mirror_release.py"},
        "flag": "SGLANG_HICACHE_MIRROR_RELEASE",
    },
}


def _data(name: str) -> str:
    return resources.files("tiercheck.conformance.sglang_workload").joinpath("patches").joinpath(name).read_text()


@dataclass
class Hunk:
    path: str  # relative to the directory holding the sglang package
    before: list
    after: list


def parse_diff(text: str) -> list[Hunk]:
    """Hunks of a unified diff (context, '-' and '+' lines; line numbers are not used:
    a hunk is placed by its exact text, which must occur once)."""
    hunks, path, cur = [], None, None
    for line in text.splitlines():
        if line.startswith("+++ "):
            path = line[4:].split("\t")[0].removeprefix("b/")
        elif line.startswith("--- "):
            continue
        elif line.startswith("@@"):
            cur = Hunk(path, [], [])
            hunks.append(cur)
        elif cur is not None:
            tag, body = (line[:1], line[1:]) if line else (" ", "")
            if tag in (" ", "-"):
                cur.before.append(body)
            if tag in (" ", "+"):
                cur.after.append(body)
    return hunks


def _replace_once(text: str, old: list, new: list, where: str, patch: str) -> str | None:
    """``text`` with the block ``old`` replaced by ``new``; None when ``new`` is there
    already; UserError when ``old`` is not there exactly once."""
    old_s, new_s = "\n".join(old) + "\n", "\n".join(new) + "\n"
    if text.count(new_s) == 1:
        return None
    if text.count(old_s) != 1:
        raise UserError(f"patch {patch}: {where} does not match this release (its hunk context is "
                        f"{'absent' if not text.count(old_s) else 'ambiguous'})")
    return text.replace(old_s, new_s)


def lane_sglang(python: str | None) -> tuple[str, str]:
    """(directory holding the sglang package, sglang version) of ``python`` (default:
    this interpreter), without importing sglang."""
    code = ("import importlib.util as u, importlib.metadata as m, json, os; "
            "s = u.find_spec('sglang'); "
            "print(json.dumps([os.path.dirname(list(s.submodule_search_locations)[0]) if s else None, "
            "m.version('sglang') if s else None]))")
    if python is None:
        python = sys.executable
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise UserError(f"patch: cannot run the lane interpreter {python!r}: {exc}") from exc
    root, version = json.loads(out)
    if root is None:
        raise UserError(f"patch: no sglang installed for {python}")
    return root, version


def _check(name: str, version: str) -> dict:
    if name not in PATCHES:
        raise UserError(f"patch: unknown patch {name!r} (known: {', '.join(PATCHES)})")
    spec = PATCHES[name]
    if version not in spec["fits"]:
        raise UserError(f"patch {name}: fits sglang {', '.join(spec['fits'])}, this lane has {version}")
    return spec


def _rewrite_hunks(name: str, root: str, forward: bool) -> list[str]:
    """Apply (forward) or undo every hunk of ``name``; returns the files changed."""
    changed = []
    for h in parse_diff(_data(f"{name}.diff")):
        path = os.path.join(root, h.path)
        with open(path) as f:
            text = f.read()
        old, new = (h.before, h.after) if forward else (h.after, h.before)
        out = _replace_once(text, old, new, h.path, name)
        if out is not None:
            with open(path, "w") as f:
                f.write(out)
            changed.append(h.path)
    return changed


def apply_patch(name: str, root: str, version: str) -> str:
    """Apply patch ``name`` to the sglang package under ``root``; returns what it did."""
    spec = _check(name, version)
    changed = _rewrite_hunks(name, root, forward=True)
    for src, dst in spec["adds"].items():
        path = os.path.join(root, dst)
        body = _data(src)
        if not os.path.exists(path) or open(path).read() != body:
            with open(path, "w") as f:
                f.write(body)
            changed.append(dst)
    if not changed:
        return f"patch {name}: already applied to sglang {version} at {root}"
    return f"patch {name}: applied to sglang {version} at {root} ({', '.join(changed)}); enable with {spec['flag']}=1"


def revert_patch(name: str, root: str, version: str) -> str:
    spec = _check(name, version)
    changed = _rewrite_hunks(name, root, forward=False)
    for dst in spec["adds"].values():
        path = os.path.join(root, dst)
        if os.path.exists(path):
            os.remove(path)
            changed.append(dst)
    return f"patch {name}: {'reverted' if changed else 'not applied'} at {root}"


def is_applied(name: str, root: str) -> bool:
    spec = PATCHES[name]
    for h in parse_diff(_data(f"{name}.diff")):
        with open(os.path.join(root, h.path)) as f:
            if ("\n".join(h.after) + "\n") not in f.read():
                return False
    return all(os.path.exists(os.path.join(root, dst)) for dst in spec["adds"].values())


def full_diff(name: str) -> str:
    """The patch as one unified diff: the hunks and every added module as a new file."""
    if name not in PATCHES:
        raise UserError(f"patch: unknown patch {name!r} (known: {', '.join(PATCHES)})")
    out = _data(f"{name}.diff")
    for src, dst in PATCHES[name]["adds"].items():
        out += "".join(difflib.unified_diff([], _data(src).splitlines(keepends=True),
                                            "/dev/null", f"b/{dst}"))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tiercheck.conformance.sglang_workload.patch",
                                description="apply a tiercheck patch to an SGLang lane")
    p.add_argument("action", choices=("apply", "revert", "status", "diff"))
    p.add_argument("name", help=f"one of: {', '.join(PATCHES)}")
    p.add_argument("--python", help="the lane's interpreter (default: this one)")
    a = p.parse_args(argv)
    try:
        if a.action == "diff":
            sys.stdout.write(full_diff(a.name))
            return 0
        root, version = lane_sglang(a.python)
        if a.action == "apply":
            print(apply_patch(a.name, root, version))
        elif a.action == "revert":
            print(revert_patch(a.name, root, version))
        else:
            _check(a.name, version)
            print(f"patch {a.name}: {'applied' if is_applied(a.name, root) else 'not applied'} ({root})")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

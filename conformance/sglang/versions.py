"""SGLang releases: parsing a lane spec and ordering versions (pure; no sglang import).

A lane spec names one release (``sglang==0.5.21``) or a local checkout (``--source DIR``).
Versions are the ``X.Y.Z[.postN]`` strings PyPI uses; ``parse`` turns them into tuples
that order the way the releases came out.
"""

from __future__ import annotations

import re

from tiercheck.errors import UserError

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")

# The releases the history campaign walks: from the first with UnifiedRadixCache's
# HiCache shape the adapter core drives, through the newest known when this was written
# (`tiercheck sglang history --releases` takes any list).
FIRST_RELEASE = "0.5.10"
RELEASES = (
    "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1", "0.5.13", "0.5.13.post1", "0.5.14",
    "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22",
    "0.5.23",
)


def parse(version: str) -> tuple:
    """'0.5.12.post1' -> (0, 5, 12, 1); a local suffix (+cpu, +editable) is ignored."""
    m = _VERSION.match(version.split("+", 1)[0])
    if not m:
        raise UserError(f"not an SGLang release version: {version!r} (expected X.Y.Z or X.Y.Z.postN)")
    major, minor, patch, post = m.groups()
    return int(major), int(minor), int(patch), int(post or 0)


def parse_spec(spec: str) -> str:
    """'sglang==0.5.21' -> '0.5.21' (the only package lanes are built for)."""
    name, sep, version = spec.partition("==")
    if not sep or name.strip().lower() != "sglang":
        raise UserError(f"lane spec {spec!r}: expected sglang==X.Y.Z (or --source DIR)")
    version = version.strip()
    parse(version)
    return version

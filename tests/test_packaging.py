"""pyproject lists every package: a folder with an __init__.py that is missing there would
silently vanish from a non-editable install."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    mapping = cfg["package-dir"]
    found = set()
    for name, folder in mapping.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            parts = [p for p in rel.parts if p]
            if any(p.startswith((".", "__")) for p in parts):
                continue
            found.add(".".join([name, *parts]))
    missing = sorted(found - listed)
    assert not missing, f"add to [tool.setuptools] packages: {missing}"


def test_console_script_and_namespace():
    import tiercheck.cli
    import tiercheck.impl
    import tiercheck.spec

    assert Path(tiercheck.spec.__file__).parent == ROOT / "spec"
    assert Path(tiercheck.impl.__file__).parent == ROOT / "impl"
    assert "check" in tiercheck.cli.COMMANDS and "suite" in tiercheck.cli.COMMANDS

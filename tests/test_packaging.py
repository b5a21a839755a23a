"""pyproject lists every package: a folder with an __init__.py that is missing there would
silently vanish from a non-editable install."""

from __future__ import annotations

import json
from importlib.metadata import distributions, version
from pathlib import Path

import pytest

from tiercheck.toml_compat import tomllib

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


def installed_editable() -> bool:
    # (A checkout's tiercheck.egg-info, left by an editable install or a build, is a second
    # distribution on sys.path under `python -m`: look at all of them.)
    for dist in distributions(name="tiercheck"):
        direct = dist.read_text("direct_url.json")
        if direct and json.loads(direct).get("dir_info", {}).get("editable"):
            return True
    return False


def test_tests_import_the_installed_tiercheck():
    """An editable install maps each package to its folder here; any other install is used
    from where it was installed, never from this checkout (no folder here is named tiercheck,
    so `python -m pytest` in the checkout cannot shadow it)."""
    import tiercheck.cli
    import tiercheck.impl
    import tiercheck.spec

    assert not (ROOT / "tiercheck").exists()
    here = [Path(m.__file__).resolve() for m in (tiercheck, tiercheck.cli, tiercheck.spec, tiercheck.impl)]
    if installed_editable():
        assert here[2].parent == ROOT / "spec" and here[3].parent == ROOT / "impl"
    else:
        assert not any(p.is_relative_to(ROOT) for p in here), here
    assert "check" in tiercheck.cli.COMMANDS and "suite" in tiercheck.cli.COMMANDS


def test_data_files_come_with_the_package():
    """The shipped models and the TLA+ twin are package data: found next to the installed modules."""
    import tiercheck.models
    import tiercheck.tla
    from tiercheck.models import model_file

    assert (Path(tiercheck.models.__file__).parent / "library" / "wt-mirror-2r.toml").is_file()
    assert list(Path(tiercheck.tla.__file__).parent.glob("*.tla"))
    assert model_file.load("variants/host-starvation").name


def test_version_comes_from_the_package_metadata(capsys):
    import tiercheck
    from tiercheck.cli import main

    assert tiercheck.__version__ == version("tiercheck")
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tiercheck {version('tiercheck')}"

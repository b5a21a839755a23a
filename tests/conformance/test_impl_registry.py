"""`--impl`: registered names (entry-point group tiercheck.implementations, tiercheck's own
built-ins included) and package.module:factory, in conform, replay and the pytest plugin;
every way of naming a wrong implementation is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiercheck.cli import main
from tiercheck.conformance.adapters import GROUP, driver_factory, registered

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = '''
from tiercheck.conformance.driver import SpecDriver


def good(cfg, variants=frozenset(), backend="lockstep"):
    """the spec as a plugin"""
    return SpecDriver(cfg, variants)


def not_a_driver(cfg, **options):
    return {"cfg": cfg}


def no_options(cfg):
    return SpecDriver(cfg)


def broken(cfg, **options):
    raise RuntimeError("no device")
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A module `tc_plugin` on sys.path, and a distribution registering `tc-good` for it."""
    (tmp_path / "tc_plugin.py").write_text(PLUGIN)
    info = tmp_path / "tc_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tc-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\ntc-good = tc_plugin:good\ntc-bad = tc_plugin:not_a_driver\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_builtins_are_registered_through_the_entry_points(capsys):
    impls = registered()
    for name in ("spec", "reference", "sglang"):
        assert impls[name].origin == "tiercheck"
        assert impls[name].target == f"tiercheck.conformance.adapters:{name}"
        assert impls[name].description()
    assert main(["impls"]) == 0
    out = capsys.readouterr().out
    assert "reference  tiercheck.impl, the torch-backed reference HiCache" in out
    assert "from tiercheck (tiercheck.conformance.adapters:spec)" in out


def test_an_installed_package_registers_a_name(plugin, capsys):
    assert registered()["tc-good"].origin == "tc-plugin"
    assert main(["impls"]) == 0
    assert "tc-good" in capsys.readouterr().out
    for impl in ("tc-good", "tc_plugin:good"):
        assert main(["conform", "--impl", impl, "--model", "wt-1r", "--examples", "3", "--steps", "8",
                     "--out", str(plugin / "cex")]) == 0
        assert f"{impl} conforms to the spec on wt-1r" in capsys.readouterr().out


@pytest.fixture
def bug_trace(tmp_path, capsys) -> str:
    """A checker counterexample of a bug variant's model (ITF JSON)."""
    trace = tmp_path / "cex.json"
    assert main(["check", "variants/release-no-consensus", "--out", str(trace)]) == 1
    capsys.readouterr()
    return str(trace)


def test_module_factory_drives_replay(plugin, bug_trace, capsys):
    trace = bug_trace
    # The plugin wraps the spec: the same verdict as the built-in (the model's bug breaks an invariant).
    assert main(["replay", trace, "--impl", "spec"]) == 1
    builtin = capsys.readouterr().out
    assert main(["replay", trace, "--impl", "tc_plugin:good"]) == 1
    assert capsys.readouterr().out == builtin.replace("spec (lockstep)", "tc_plugin:good (lockstep)")
    assert "breaks rank_agreement" in builtin


@pytest.mark.parametrize("impl, message", [
    ("nope", "--impl: unknown implementation 'nope' (registered: "),
    ("tc_nowhere.mod:f", "--impl tc_nowhere.mod:f: cannot import tc_nowhere.mod (ModuleNotFoundError"),
    ("tc_plugin:missing", "--impl tc_plugin:missing: module tc_plugin has no attribute 'missing'"),
    ("tc_plugin", "--impl: unknown implementation 'tc_plugin'"),
    ("tc_plugin:", "--impl tc_plugin:: 'tc_plugin:' is not package.module:factory"),
    ("tc_plugin:not_a_driver", "--impl tc_plugin:not_a_driver: the factory returned a dict, not a driver "
                               "(missing: apply, state, verify, close, model)"),
    ("tc-bad", "--impl tc-bad: the factory returned a dict, not a driver"),
    ("tc_plugin:no_options", "--impl tc_plugin:no_options: the factory must accept (cfg, variants=..., backend=...)"),
    ("tc_plugin:broken", "--impl tc_plugin:broken: building a driver failed (RuntimeError: no device)"),
])
def test_a_wrong_implementation_is_one_line_and_exit_2(plugin, impl, message, capsys):
    assert main(["conform", "--impl", impl, "--examples", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tiercheck: {message}") and err.count("\n") == 1, err


def test_replay_names_a_wrong_implementation_in_one_line(plugin, bug_trace, capsys):
    assert main(["replay", bug_trace, "--impl", "tc_plugin:not_a_driver"]) == 2
    err = capsys.readouterr().err
    assert "not a driver" in err and err.count("\n") == 1


def test_factory_receives_the_options():
    seen = {}

    def fake(cfg, **options):
        seen.update(options)
        return object()

    sys.modules["tc_options_probe"] = type(sys)("tc_options_probe")
    sys.modules["tc_options_probe"].fake = fake
    try:
        from tiercheck.models import model_file

        build = driver_factory("tc_options_probe:fake", model_file.load("wt-1r").config, {"release-busy"}, "gloo")
        with pytest.raises(Exception, match="not a driver"):
            build()
    finally:
        del sys.modules["tc_options_probe"]
    assert seen == {"variants": frozenset({"release-busy"}), "backend": "gloo"}


def run_pytest(plugin, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_pytest_option_takes_names_and_module_factories(plugin):
    tour = str(ROOT / "tests/generated/wt-2r")
    r = run_pytest(plugin, tour, "--tiercheck-impl", "tc_plugin:good", "-x")
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    r = run_pytest(plugin, tour, "--tiercheck-impl", "tc-good", "-x", "-k", "trace-00")
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    r = run_pytest(plugin, tour, "--tiercheck-impl", "tc_plugin:missing")
    assert r.returncode == 4  # pytest's usage error: one line, no test run
    assert r.stderr.strip() == "ERROR: --impl tc_plugin:missing: module tc_plugin has no attribute 'missing'"


def test_plugin_docs_walk_through_the_example_package():
    doc = (ROOT / "docs/plugging-in.md").read_text()
    example = ROOT / "examples/wrapped-hicache"
    assert "examples/wrapped-hicache" in doc and "wrapped_hicache.driver:make_driver" in doc
    assert 'wrapped = "wrapped_hicache.driver:make_driver"' in (example / "pyproject.toml").read_text()
    assert "def make_driver(cfg" in (example / "wrapped_hicache/driver.py").read_text()
    assert "adapters.py" not in doc  # no editing tiercheck to plug in

"""The SGLang adapter against the spec, on the release of the running lane: conformance,
tours, a sabotaged cache is caught; the 0.5.23 findings in docs/findings replay as written
(on the 0.5.23 lane)."""

import importlib.metadata as md
from pathlib import Path

import pytest


def _version():
    try:
        return md.version("sglang")
    except md.PackageNotFoundError:
        return None


def _lane() -> bool:
    from tiercheck.conformance.sglang.shims import select
    from tiercheck.errors import UserError

    try:
        return _version() is not None and select(_version()) is not None
    except UserError:
        return False


pytestmark = [
    pytest.mark.sglang,
    pytest.mark.skipif(not _lane(), reason="needs an SGLang lane (tiercheck lane setup sglang==X.Y.Z)"),
]


def _hrc() -> bool:
    from tiercheck.conformance.sglang.shims import select

    return _lane() and select(_version()).core == "hrc"


# The UnifiedRadixCache core (0.5.18+): write_back models, _execute_kv_backup, and tours
# that conform (HiRadixCache releases up to 0.5.12.post1 ship the split write-through bug).
urc_only = pytest.mark.skipif(_hrc(), reason="the UnifiedRadixCache adapter core (0.5.18 and later)")
# The findings of docs/findings/*.md were found on 0.5.23 and are asserted there.
on_0523 = pytest.mark.skipif(_version() != "0.5.23", reason="a 0.5.23 finding (run it in the 0.5.23 lane)")

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "docs" / "findings" / "traces"


def _driver(model, backend="lockstep"):
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.models import model_file

    return SGLangDriver(model_file.load(model).config, backend=backend)


def _replay_file(path, backend="lockstep"):
    import tomllib

    from tiercheck.conformance.runner import replay
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.models import model_file
    from tiercheck.models.trace import read_trace

    tr = read_trace(path)
    cfg = model_file.parse(tomllib.loads(tr.model_toml), str(path)).config
    driver = SGLangDriver(cfg, backend=backend)
    try:
        driver.path_counts(reset=True)
        out = replay(driver, tr.actions)
        return out, driver.path_counts()
    finally:
        driver.close()


@urc_only
def test_stateful_suite_one_rank():
    from tiercheck.conformance import machine
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.models import model_file

    cfg = model_file.load("sglang/wb-1r").config
    stats = {}
    machine.run(lambda: SGLangDriver(cfg), examples=5, steps=15, seed=3, stats=stats, label="sglang")
    assert stats["examples"] >= 5


@urc_only
def test_tour_traces_replay():
    from tiercheck.conformance.runner import replay
    from tiercheck.conformance.tour import build_tour

    driver = _driver("sglang/wt-1r")
    tour = build_tour(driver.model)
    driver.close()
    for t in tour.traces[:6]:
        d = _driver("sglang/wt-1r")
        try:
            out = replay(d, t.actions, expect_disabled=set(t.probes))
        finally:
            d.close()
        assert out.mismatch is None, out.mismatch.message


@urc_only
def test_sabotaged_host_admission_is_caught(monkeypatch):
    """An SGLang whose every D->H admission is rejected must disagree with the spec."""
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

    from tiercheck.conformance.runner import replay
    from tiercheck.spec.action import act

    d = _driver("sglang/wt-1r")
    monkeypatch.setattr(UnifiedRadixCache, "_execute_kv_backup", lambda self, *a, **k: None)
    try:
        out = replay(d, [act("insert", req=0)])
    finally:
        d.close()
    assert out.mismatch is not None and out.mismatch.kind == "state"
    assert "host absent->writing" in out.mismatch.message or "writing" in out.mismatch.message


@on_0523
def test_finding_write_through_host_starvation():
    out, paths = _replay_file(TRACES / "wt-host-starvation-probe.json")
    assert out.mismatch is None  # SGLang takes every step the spec takes ...
    assert paths[0]["backup_rejected"] >= 3  # ... and keeps rejecting 1/3's backup
    assert paths[0]["evict_host_freed_nothing"] >= 3


@on_0523
def test_cli_replay_impl_sglang(capsys):
    from tiercheck.cli import main

    assert main(["replay", str(TRACES / "wt-host-starvation.json"), "--impl", "sglang"]) == 0
    assert "agree" in capsys.readouterr().out


@on_0523
@pytest.mark.gloo
def test_finding_partial_backup_leak_on_gloo_ranks():
    out, _ = _replay_file(TRACES / "partial-backup-leak.json", backend="gloo")
    assert out.mismatch is not None and out.mismatch.kind == "state" and out.mismatch.step == 0
    assert "rank 1: node 1/2: host absent->writing" in out.mismatch.message
    # with the spec's partial-backup-leak variant on, the states agree and only the
    # replicas' agreement breaks: 0.5.23 does what the variant says
    out, _ = _replay_file(TRACES / "partial-backup-leak-variant.json", backend="gloo")
    assert out.mismatch is not None and out.mismatch.kind == "invariant"
    assert "rank_agreement" in out.mismatch.message


@on_0523
@pytest.mark.parametrize("option", ["backup_path_lock", "lbp_write_back_only", "storage_per_node",
                                    "settled_duplicates", "wb_drop_unbacked", "backup_chain",
                                    "evict_host_shortfall"])
def test_each_option_models_what_sglang_does(option):
    """docs/findings/deliberate-differences.md: with the option off the spec disagrees
    with SGLang on its trace, with it on they agree."""
    import tomllib
    from dataclasses import replace

    from tiercheck.conformance.runner import replay
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.models import model_file
    from tiercheck.models.trace import read_trace

    tr = read_trace(TRACES / f"{option}-off.json")
    off = model_file.parse(tomllib.loads(tr.model_toml), option).config
    outcomes = []
    for cfg in (off, replace(off, **{option: True})):
        d = SGLangDriver(cfg)
        try:
            outcomes.append(replay(d, tr.actions).mismatch)
        finally:
            d.close()
    assert outcomes[0] is not None and outcomes[0].step == len(tr.actions) - 1
    assert outcomes[1] is None

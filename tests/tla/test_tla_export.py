"""`tiercheck tla`: the exported TLC model, and the TLA+ module kept in step with the spec
(every action, invariant and rank-state field of spec/ has its TLA+ counterpart)."""

from __future__ import annotations

import re

import pytest

from tiercheck import cli
from tiercheck.errors import UserError
from tiercheck.models import model_file, tla_export
from tiercheck.spec.config import CONSTANTS, UNMODELLED, Unmodelled, build_pages
from tiercheck.spec.model import ACTIONS
from tiercheck.spec.properties import PROPERTIES
from tiercheck.spec.state import TWINLESS_FIELDS, RankState
from tiercheck.spec.variants import VARIANTS

TLA = (tla_export.TLA_DIR / "HiCache.tla").read_text()
TREE = (tla_export.TLA_DIR / "HiCacheTree.tla").read_text()


@pytest.fixture
def tla_cli(monkeypatch):
    # Only this command: the CLI imports every command module to build its parser.
    monkeypatch.setattr(cli, "COMMANDS", ["tla"])
    return cli.main


def _defined(text: str, name: str) -> bool:
    return re.search(rf"^{re.escape(name)}(\(.*\))? ==", text, re.M) is not None


def test_every_spec_action_has_an_operator_of_its_name_in_next():
    next_part = TLA[TLA.index("ReplicatedStep =="):TLA.index("Spec ==")]
    for spec in ACTIONS:
        if spec.option and not CONSTANTS[spec.option].twin:
            continue  # enabled only under a field the twin lacks: tiercheck tla refuses it
        if any(spec.name in u.actions for u in UNMODELLED if u.twin):
            continue  # enabled only under a value of a twin field that tiercheck tla refuses
        name = spec.effect.__name__
        assert _defined(TLA, name), f"HiCache.tla has no operator {name}"
        assert re.search(rf"\b{name}\b", next_part), f"{name} is not a disjunct of Next"


def test_the_twin_defines_exactly_the_properties_whose_record_says_so():
    for p in PROPERTIES:
        assert p.twin == _defined(TLA, p.name), f"{p.name}: record says twin={p.twin}"
        if p.twin:  # TLC checks state invariants and action properties only
            assert p.kind in ("invariant", "transition"), p.name


def test_rank_record_has_exactly_the_rank_state_fields():
    body = TREE[TREE.index("EmptyRank =="):TREE.index("-----", TREE.index("EmptyRank =="))]
    fields = set(re.findall(r"\b([a-z]\w*) \|->", body))  # not [p \in Pages |-> ...]
    assert fields == set(RankState._fields) - TWINLESS_FIELDS


def test_cfg_and_mc_carry_the_model_constants():
    mf = model_file.load("wt-mirror-2r")
    mc, cfg = tla_export.render(mf)
    assert "    NumRanks = 2" in cfg and "    DevicePages = 3" in cfg and "    HostPages = 2" in cfg
    assert '    Policy = "write_through"' in cfg and "    MirrorRelease = TRUE" in cfg
    assert "    Storage = TRUE" in cfg and "    Prefetch = FALSE" in cfg
    assert "    Faults <- MC_Faults" in cfg and 'MC_Faults == {"partial_storage"}' in mc
    paths = build_pages(mf.config.requests).paths
    assert f"MC_PagePaths == {tla_export.tla_value(paths)}" in mc
    assert "MC_Requests == <<<<1, 2>>, <<1, 3>>>>" in mc
    inv = cfg[cfg.index("INVARIANT"):cfg.index("PROPERTY")]
    assert "rank_agreement" in inv and "no_ghost" in inv and "durable_only_when_acked" not in inv
    assert "eviction_progress" in cfg.splitlines()[-1]  # a graph property: tiercheck only


def test_wide_digests_are_refused_only_when_compared():
    mf = model_file.parse({"model": {"requests": [[1, 2]], "storage": True, "mirror_release": True,
                                     "digest_bits": 64}})
    with pytest.raises(UserError, match="digest_bits"):
        tla_export.render(mf)
    plain = model_file.parse({"model": {"requests": [[1, 2]], "digest_bits": 64}})
    assert "    DigestBits = 30" in tla_export.render(plain)[1]


def _options():
    """Every option of another HiCache version (spec/config.py ``option``), with a test value."""
    out = []
    for c in CONSTANTS.values():
        if c.option:
            assert isinstance(c.default, (bool, int)), f"{c.name}: pick a test value"
            out.append((c.name, True if isinstance(c.default, bool) else c.default + 1))
    return out


def test_every_config_field_is_a_twin_constant():
    # The options of other HiCache versions and the scheduler's own eviction included.
    assert {c.name for c in CONSTANTS.values() if not c.twin} == set()
    assert {"backup_chain", "wb_drop_unbacked", "prefetch_at_hit"} <= {k for k, _ in _options()}
    assert tla_export.TWIN_FIELDS <= set(CONSTANTS)


def test_the_twin_declares_the_constants_the_config_records_name_in_order():
    text = (tla_export.TLA_DIR / "HiCacheConfig.tla").read_text()
    block = text[text.index("CONSTANTS"):text.index("\n\n", text.index("CONSTANTS"))]
    assert re.findall(r"^    (\w+)", block, re.M) == tla_export.ORDER


@pytest.mark.parametrize("key, value", _options())
def test_options_are_exported_and_a_field_without_a_twin_is_refused(monkeypatch, key, value):
    raw = {"model": {"requests": [[1, 2]], "policy": "write_back", key: value}}
    shown = tla_export.tla_value(value).lower()
    _mc, cfg = tla_export.render(model_file.parse(raw, "m.toml"))
    assert f"    {CONSTANTS[key].twin} = {tla_export.tla_value(value)}" in cfg
    # A Config field whose record names no twin CONSTANT (a field newer than the twin).
    monkeypatch.setitem(CONSTANTS, key, CONSTANTS[key]._replace(twin=""))
    with pytest.raises(UserError, match=rf"^m.toml: option {key} = {re.escape(shown)} is not in the TLA\+ twin"):
        tla_export.render(model_file.parse(raw, "m.toml"))


def test_prefetch_at_hit_is_exported_with_prefetch():
    _mc, cfg = tla_export.render(model_file.load("sglang/wt-prefetch-1r"))
    assert "    PrefetchAtHit = TRUE" in cfg and "    Prefetch = TRUE" in cfg


def test_the_twin_has_exactly_the_variants_whose_record_says_so():
    text = "".join((tla_export.TLA_DIR / m).read_text() for m in tla_export.MODULES)
    assert set(re.findall(r'Has\("([a-z-]+)"\)', text)) == {n for n, v in VARIANTS.items() if v.twin}


def test_variants_the_twin_lacks_are_refused(monkeypatch):
    # Every variant is in the twin today; a record saying twin=False is refused.
    name = "split-write-lock-leak"
    monkeypatch.setitem(tla_export.VARIANTS, name, VARIANTS[name]._replace(twin=False))
    with pytest.raises(UserError, match=f"variant {name} is not in the TLA\\+ twin"):
        tla_export.render(model_file.load(VARIANTS[name].model))


def test_tla_command_writes_a_runnable_model(tla_cli, tmp_path, capsys):
    out = tmp_path / "m"
    assert tla_cli(["tla", "wb-reclaim-2r", "-o", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["HiCache.tla", "HiCacheConfig.tla", "HiCacheTree.tla", "MC.cfg", "MC.tla"]
    assert (out / "HiCache.tla").read_text() == TLA
    assert "DuplicateReclaim = TRUE" in (out / "MC.cfg").read_text()
    assert "tlc2.TLC" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["tla", "no-such-model", "-o", "X"], "no such model file"),
        (["tla", "wt-1r", "-o", "X", "--property", "bogus"], "unknown property 'bogus'"),
        (["tla", "wt-1r", "-o", "X", "--no-properties", "--property", "no_ghost"], "exclude each other"),
        (["tla", "wt-1r", "-o", "FILE"], "not a directory"),
    ],
)
def test_tla_command_bad_input_is_one_line_exit_2(tla_cli, tmp_path, capsys, monkeypatch, argv, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("x")
    assert tla_cli(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "X").exists()  # nothing written on refusal


def test_a_field_without_a_twin_is_one_line_exit_2(tla_cli, tmp_path, capsys, monkeypatch):
    # Every field has a twin CONSTANT today: one whose record names none is refused.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(CONSTANTS, "backup_chain", CONSTANTS["backup_chain"]._replace(twin=""))
    assert tla_cli(["tla", "sglang/wt-1r", "-o", "X"]) == 2
    err = capsys.readouterr().err
    assert "option backup_chain = true is not in the TLA+ twin" in err and err.count("\n") == 1
    assert not (tmp_path / "X").exists()


def test_the_features_of_issue_15_are_exported():
    """Seed 004's planner over nested nodes and lanes, pages of tokens, LRU order, slots,
    request locks, the bounded durable LRU, the prefetch stop vote and the prefetch endings
    (timeout, read failure, revoke), the scheduler's own eviction: all twin CONSTANTS."""
    _mc, cfg = tla_export.render(model_file.load("cp-planner-lanes-2r"))
    assert "    CpPlanner = TRUE" in cfg and "    CpLanes = 2" in cfg
    _mc, cfg = tla_export.render(model_file.load("paged-1r"))
    assert "    PageSize = 2" in cfg and "    LoadBackThreshold = 3" in cfg and "    prefix_closed" in cfg
    _mc, cfg = tla_export.render(model_file.load("slots-1r"))
    assert "    Slots = TRUE" in cfg and "    slot_ownership" in cfg
    for name, line in [("lru-2r", 'VictimOrder = "lru"'), ("request-locks-1r", "RequestLocks = TRUE"),
                       ("wt-durable-lru-1r", "DurableCapacity = 1"), ("wt-durable-lru-1r", "RefreshRounds = 2"),
                       ("wt-prefetch-wait-2r", 'PrefetchStop = "wait_complete"'),
                       ("wt-prefetch-timeout-2r", 'PrefetchStop = "timeout"'),
                       ("wt-prefetch-revoke-1r", "PrefetchRevoke = TRUE"),
                       ("wt-prefetch-fail-1r", "PrefetchReadFail = TRUE"),
                       ("wt-evicts-1r", "InsertEvicts = TRUE"), ("wt-evicts-1r", "LoadBackEvicts = TRUE")]:
        assert f"    {line}" in tla_export.render(model_file.load(name))[1], name


def test_twin_field_values_the_twin_lacks_are_refused(monkeypatch):
    # spec/config.py UNMODELLED: a value of twin fields newer than the twin (e.g. a new
    # stop policy) is refused by its record; the planner's LRU tie-break no longer is.
    _mc, cfg = tla_export.render(model_file.load("cp-planner-lru-1r"))
    assert "    CpPlanner = TRUE" in cfg and '    VictimOrder = "lru"' in cfg
    newer = Unmodelled(lambda c: c.cp_planner and c.lru, 'victim_order = "lru" with cp_planner',
                       twin="a newer planner", proofs="")
    monkeypatch.setattr(tla_export, "UNMODELLED", tla_export.UNMODELLED + (newer,))
    with pytest.raises(UserError, match=r'option victim_order = "lru" with cp_planner is not in the TLA\+ twin'):
        tla_export.render(model_file.load("cp-planner-lru-1r"))

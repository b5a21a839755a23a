"""The spec options that model SGLang 0.5.23 (docs/spec.md "Options"): parsed from model
files, default-off, and each one changes the model it is switched on in."""

from dataclasses import replace

import pytest

from tiercheck.errors import UserError
from tiercheck.models import model_file
from tiercheck.spec.config import CONSTANTS, Config
from tiercheck.spec.model import Model

OPTIONS = [c.name for c in CONSTANTS.values() if c.option and c.type == "bool"]


def test_defaults_are_the_seed_protocol():
    cfg = Config()
    assert not any(getattr(cfg, o) for o in OPTIONS)
    assert cfg.load_back_threshold == 1


def test_sglang_models_switch_every_option_on():
    mf = model_file.load("sglang/wt-storage-1r")
    assert all(getattr(mf.config, o) for o in OPTIONS)
    # dump() round-trips the options (generated suites and traces carry them)
    import tomllib

    again = model_file.parse(tomllib.loads(model_file.dump(mf)))
    assert again.config == mf.config


def test_bad_option_value_is_a_one_line_error():
    with pytest.raises(UserError, match="backup_chain: must be true or false"):
        model_file.parse({"model": {"requests": [[1]], "backup_chain": 1}})
    with pytest.raises(UserError, match="load_back_threshold"):
        model_file.parse({"model": {"requests": [[1]], "load_back_threshold": 0}})


def _transitions(cfg):
    from tiercheck.conformance.tour import explore

    states, edges = explore(Model(cfg))
    return frozenset((states[i], a, states[j]) for i, out in enumerate(edges) for a, j in out)


# For each option, a 0.5.23 model (or a small variation of one) where switching only that
# option off changes the transition relation: none of them is dead weight.
CASES = [
    ("backup_path_lock", "sglang/wt-1r", {}),
    ("lbp_write_back_only", "sglang/wt-1r", {}),
    ("storage_per_node", "sglang/wt-storage-1r", {"faults": frozenset()}),
    ("settled_duplicates", "sglang/wb-1r", {}),
    ("wb_drop_unbacked", "sglang/wb-1r", {}),
    ("backup_chain", "sglang/wt-1r", {"requests": ((1,), (1, 2), (1, 2, 3)), "host_pages": 1}),
    ("evict_host_shortfall", "sglang/wt-1r", {"requests": ((1,), (2,), (3, 4)), "host_pages": 3}),
    ("prefetch_at_hit", "sglang/wt-prefetch-1r", {"faults": frozenset()}),
]


def test_every_boolean_option_has_a_case():
    assert sorted(c[0] for c in CASES) == sorted(OPTIONS)


def test_option_metadata_is_complete():
    """An option of another HiCache version is not modelled by the proofs and was not
    reviewed for prefix relabelings: each says so in its record. The TLA+ twin models
    every one (a CONSTANT each)."""
    for c in CONSTANTS.values():
        assert c.doc, c.name
        if c.option:
            assert not c.proofs and not c.symmetry, c.name
            assert c.twin, c.name
        if c.type == "int":
            assert c.bounds and c.bounds[0] <= c.default <= c.bounds[1], c.name


@pytest.mark.parametrize("option,base,change", CASES, ids=[c[0] for c in CASES])
def test_each_option_changes_its_model(option, base, change):
    cfg = replace(model_file.load(base).config, **change)
    assert getattr(cfg, option)
    assert _transitions(replace(cfg, **{option: False})) != _transitions(cfg)


def test_load_back_threshold_refuses_short_load_backs():
    from tiercheck.conformance.tour import explore

    def names(c):
        return {a.name for s in explore(Model(c))[0] for a in Model(c).actions(s)}

    cfg = model_file.load("wt-1r").config
    assert "load_back" in names(cfg)
    assert "load_back" not in names(replace(cfg, load_back_threshold=3))

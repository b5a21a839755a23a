"""What models the reference implementation takes: every model of the seeds' protocol (a
host pool of 0 pages included), and a one-line refusal for the options of other HiCache
versions it does not have (it follows the seeds), never a false disagreement."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from tiercheck.conformance import machine
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.reference import IMPLEMENTED_OPTIONS, impl_config, unimplemented_options
from tiercheck.errors import UserError
from tiercheck.models import model_file
from tiercheck.spec.config import CONSTANTS, Config

OPTIONS = sorted(c.name for c in CONSTANTS.values() if c.option)


def _set(cfg, name):
    c = CONSTANTS[name]
    return replace(cfg, **{name: True if c.type == "bool" else c.bounds[1]})


@pytest.mark.parametrize("name", OPTIONS)
def test_each_option_is_implemented_or_refused(name):
    cfg = _set(Config(requests=((1, 2), (3,)), storage=True, prefetch=True), name)
    if name in IMPLEMENTED_OPTIONS:
        assert unimplemented_options(cfg) == []
        impl_config(cfg)
    else:
        assert unimplemented_options(cfg) == [name]
        with pytest.raises(UserError, match=name):
            impl_config(cfg)


def test_the_seeds_protocol_sets_no_option():
    assert unimplemented_options(model_file.load("wt-mirror-2r").config) == []


def test_conform_refuses_an_sglang_model_in_one_line():
    p = subprocess.run([sys.executable, "-m", "tiercheck", "conform", "--impl", "reference", "--model",
                        "sglang/wt-1r", "--examples", "2"], capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "backup_chain" in p.stderr and "Traceback" not in p.stderr


def test_a_host_pool_of_zero_pages_conforms():
    """No host tier: every backup's host allocation fails, on both sides alike."""
    cfg = Config(requests=((1, 4, 4), (3, 3, 4)), device_pages=3, host_pages=0,
                 load_back_evicts=True, host_free_target=2)
    stats = {}
    machine.run(driver_factory("reference", cfg), examples=25, steps=30, seed=3, stats=stats)
    assert stats["examples"] >= 25
    assert impl_config(cfg).host_pages == 0

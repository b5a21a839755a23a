"""The units of tiercheck.conformance.s18_kills and the wire-digest check
(tiercheck.conformance.wire_digest), each against the survivors it kills (recompiled
from their source with the mutant's one edit)."""

from __future__ import annotations

import random

import pytest

from tiercheck.conformance import s18_kills as k
from tiercheck.conformance import wire_digest
from tiercheck.impl.hicache import digest as impl_digest
from tiercheck.impl.hicache.cp_load import CpLoadBack
from tiercheck.impl.hicache.eviction import Eviction
from tiercheck.impl.hicache.prefetch import Prefetch
from tiercheck.impl.hicache.storage_path import StoragePath
from tiercheck.impl.hicache.write_path import WritePath
from tiercheck.models import model_file
from tiercheck.spec import digest as spec_digest

from mutant_helpers import load_mutation_suite, recompiled

MS = load_mutation_suite("bench_mutation_suite_s18")
UNITS = dict(MS.s18_kills_units())
TWO_VICTIMS = "situation two duplicate-reclaim victims folded before a round"


def _run(name: str) -> bool:
    return MS.run_unit(name, UNITS.get(name) or dict(MS.variant_units())[name])


FAULTS = [f"fault {n}" for n, _ in k.scenarios()]


def test_the_units_are_in_the_mutation_suite():
    assert list(UNITS) == [f"situation {s.name}" for s in k.SITUATIONS] + FAULTS


@pytest.mark.parametrize("name", [n for n in UNITS if "stopped" not in n])
def test_every_unit_passes_on_the_implementation(name):
    assert _run(name)


@pytest.mark.slow  # about 25 s of waiting on the default timeouts, twice
@pytest.mark.gloo
def test_the_default_collective_timeout_is_the_documented_one(monkeypatch, capsys):
    # gloo.py:68 (seed 14): the default collective timeout 10 s -> 9 s
    from tiercheck.impl.hicache.gloo import GlooHiCache

    assert _run("fault a stopped peer under the default timeouts")
    init = GlooHiCache.__init__
    monkeypatch.setattr(GlooHiCache, "__init__", recompiled(init, "collective_timeout: float = 10.0",
                                                            "collective_timeout: float = 9.0")["__init__"])
    assert not _run("fault a stopped peer under the default timeouts")
    assert "no answer 14s after rank 0 failed" in capsys.readouterr().out


@pytest.mark.parametrize("new", [
    "((1 << (bits - 1)) << 1)",  # digest.py:33, seed 14: modulus 2^64
    "((1 << (bits << 1)) - 1)",  # modulus 2^128 - 1 (judged equivalent until session 18)
    "((1 << (bits | 1)) - 1)",  # modulus 2^65 - 1 (likewise)
])
def test_a_fold_modulus_past_the_wire_is_caught(new, monkeypatch, capsys):
    made = recompiled(impl_digest.fold, "((1 << (bits - 1)) - 1)", new)
    monkeypatch.setattr(impl_digest, "fold", made["fold"])
    assert not _run(TWO_VICTIMS)
    assert "the fixed encoding keeps digests in [0, 9223372036854775807]" in capsys.readouterr().out


def test_a_wrap_wider_than_the_wire_is_caught(monkeypatch, capsys):
    # digest.py:19, seed 15: wrap's modulus 2^(w+1): values outside the w-bit range. The
    # variant's unit passes unmutated (the bug is caught, by the digest's range before the
    # states part) and its twin half names the mutant's out-of-range pair.
    assert _run("variant negated-pair-overflow")
    capsys.readouterr()
    monkeypatch.setattr(impl_digest, "wrap", recompiled(impl_digest.wrap, "m = 1 << bits", "m = 2 << bits")["wrap"])
    assert not _run("variant negated-pair-overflow")
    out = capsys.readouterr().out
    assert "departs from the spec with the bug on" in out and "outside the 2-bit wire's [-2, 1]" in out


def _cfg(variants=(), bits=16):
    cfg = model_file.load("wb-reclaim-2r").config
    from dataclasses import replace

    return replace(cfg, variants=frozenset(variants), digest_bits=bits)


@pytest.mark.parametrize("variants, bits", [((), 2), ((), 16), ((), 64), (("negated-pair-overflow",), 2),
                                            (("negated-pair-overflow",), 5)])
def test_every_digest_of_the_spec_encoding_passes(variants, bits):
    # One definition: what spec.digest folds is what wire_digest accepts, at any width.
    cfg, rnd = _cfg(variants, bits), random.Random(bits)
    for _ in range(300):
        victims = [rnd.randrange(1 << 60) for _ in range(rnd.randrange(1, 5))]
        x = spec_digest.wire_digest(cfg, victims)
        assert wire_digest.pair_problems(cfg, [x, spec_digest.wrap(-x, bits)], bits) == []


@pytest.mark.parametrize("variants, pair, bits, said", [
    ((), [-5, 5], 64, "the fixed encoding keeps digests in [0, "),
    ((), [1 << 63, -(1 << 63)], 64, "outside the 64-bit wire"),
    ((), [3, -4], 64, "the second value is not -x"),
    ((), [3, -3], 65, "not a wire width in 2..64"),
    ((), [3, -3], True, "not a wire width"),
    ((), [3], 64, "not two integers"),
    ((), [3.0, -3.0], 64, "not two integers"),
    (("negated-pair-overflow",), [-2, -2], 3, "the model's negated-pair-overflow digests are 2-bit"),
    (("negated-pair-overflow",), [2, -2], 2, "2 outside the 2-bit wire's [-2, 1]"),
])
def test_a_malformed_pair_is_named(variants, pair, bits, said):
    cfg = _cfg(variants, 2)
    assert any(said in p for p in wire_digest.pair_problems(cfg, pair, bits))


def test_the_overflow_variant_may_send_the_most_negative_value():
    # the bug's own encoding: -x of -2^(w-1) wraps to itself, which the variant allows
    assert wire_digest.pair_problems(_cfg(("negated-pair-overflow",), 2), [-2, -2], 2) == []


# (situation, class, method, original text, mutant text, what the failing unit prints)
KILLS = [
    ("a two-page duplicate reclaimed for a one-page need, another left", Eviction, "_reclaim_duplicates",
     "if freed >= need:", "if freed is need:", "duplicate_registry"),  # eviction.py:164 (seed 16)
    ("an insert evicting two two-token pages for itself", WritePath, "insert",
     "* self.layout.page_size)", "/ self.layout.page_size)", "device_free 0 -> 1"),  # write_path.py:56 (seed 16)
    ("a three-page prefetch retired over a page inserted meanwhile", Prefetch, "check_prefetch_progress",
     "mt.PREFETCHED, (completed - have)", "mt.PREFETCHED, (completed >> have)",
     "went up by 1 in check_prefetch_progress(op=0), the spec's state change says 2"),  # prefetch.py:156 (seed 16)
    ("a mirror-release plan of two pages for a one-page deficit, another candidate left", StoragePath, "_prepare_plan",
     "if pages >= want:", "if pages == want:", 'release_plan ["1/2"] -> ["1/2","3"]'),  # storage_path.py:213 (seed 16)
    ("an insert short of CP lane 1 only, two lanes over four pages", CpLoadBack, "lane_capacity",
     "1 if lane < r", "1 if lane is not r", "+ node 1/6"),  # cp_load.py:55 (seed 16)
]


@pytest.mark.parametrize("unit, cls, method, old, new, said", KILLS, ids=[x[0] for x in KILLS])
def test_a_situation_kills_its_mutant(unit, cls, method, old, new, said, monkeypatch, capsys):
    monkeypatch.setattr(cls, method, recompiled(getattr(cls, method), old, new)[method])
    assert not _run(f"situation {unit}")
    assert said in capsys.readouterr().out


def test_a_self_check_that_skips_device_copies_is_caught(monkeypatch, capsys):
    # observe.py:118 (seed 16): device bytes never verified
    from tiercheck.impl.hicache.observe import Inspect

    assert _run("fault a device page overwritten under a resident node")
    monkeypatch.setattr(Inspect, "verify", recompiled(Inspect.verify, 'if n.dev == "resident":',
                                                      'if n.dev > "resident":')["verify"])
    assert not _run("fault a device page overwritten under a resident node")
    assert "is not reported" in capsys.readouterr().out


def test_a_self_check_that_calls_a_use_after_free_a_leak_too_is_caught(monkeypatch, capsys):
    # observe.py:151 (seed 16): leaked = allocated ^ seen also lists the owned free slots
    from tiercheck.impl.hicache.observe import Inspect

    name = "fault a host slot freed under its owner"
    assert _run(name)
    made = recompiled(Inspect._ownership, "allocated - seen", "allocated ^ seen")
    monkeypatch.setattr(Inspect, "_ownership", made["_ownership"])  # the staticmethod, decorator and all
    assert not _run(name)
    assert "are allocated but owned by nobody (leak)" in capsys.readouterr().out


@pytest.mark.parametrize("old, new", [("/ 1024 * self", "/ 1024 % self"), ("self.layout.page_size / 1024", "self.layout.page_size * 1024")])
def test_a_prefetch_timer_off_seed_004s_rule_is_caught(old, new, monkeypatch, capsys):
    # config.py:154 (seed 16): page_size / 1024 * per_ki_token -> % per_ki_token, or * 1024
    from tiercheck.impl.hicache.config import HiCacheConfig

    made = recompiled(HiCacheConfig.timeout_per_page.fget, old, new)
    monkeypatch.setattr(HiCacheConfig, "timeout_per_page", made["timeout_per_page"])  # the property, decorator and all
    name = "auto timer wt-prefetch-timeout-2r"
    assert not MS.run_unit(name, dict(MS.auto_units(1))[name])
    assert "past the timer's limit, the read held" in capsys.readouterr().out


@pytest.mark.slow  # two gloo groups, each waiting out a grace
@pytest.mark.gloo
def test_a_driver_polling_one_rank_only_is_caught(monkeypatch, capsys):
    # gloo.py:153 (seed 16): pending.pop(0) -> pop(-1) polls the stopped rank 0 forever
    from tiercheck.impl.hicache.gloo import GlooHiCache

    name = "fault a stopped rank 0 beside a failed rank 1"
    assert _run(name)
    monkeypatch.setattr(GlooHiCache, "_call", recompiled(GlooHiCache._call, "pending.append(pending.pop(0))",
                                                                  "pending.append(pending.pop(-1))")["_call"])
    assert not _run(name)
    assert "did not answer writing_check within 30s" in capsys.readouterr().out

"""Lanes and shims without SGLang: version parsing, shim selection, the one-line error of
a shim whose release lacks a name, lane paths and the cache-dir override, and the fast
path of an already built lane. These run in the default test command."""

import json
import subprocess
import sys

import pytest

from tiercheck.conformance.sglang import lane as lanes
from tiercheck.conformance.sglang import shims
from tiercheck.conformance.sglang.versions import RELEASES, parse, parse_spec
from tiercheck.errors import UserError


def test_versions_order_like_releases():
    assert parse("0.5.12.post1") == (0, 5, 12, 1)
    assert parse("0.5.23+cpu") == (0, 5, 23, 0)
    assert sorted(RELEASES, key=parse) == list(RELEASES)
    assert parse("0.5.10.post1") > parse("0.5.10") and parse("0.5.11") > parse("0.5.10.post1")
    for bad in ("0.5", "v0.5.1", "0.5.1rc1", ""):
        with pytest.raises(UserError):
            parse(bad)


def test_lane_spec():
    assert parse_spec("sglang==0.5.21") == "0.5.21"
    assert parse_spec("SGLang == 0.5.21") == "0.5.21"
    for bad in ("sglang=0.5.21", "vllm==0.5.21", "sglang==latest"):
        with pytest.raises(UserError, match="sglang==X.Y.Z|not an SGLang release"):
            parse_spec(bad)


@pytest.mark.parametrize("version, shim", [
    ("0.5.23", "Unified23"), ("0.5.22", "Unified22"), ("0.5.21", "Unified21"), ("0.5.20", "Unified20"),
    ("0.5.19", "Unified19"), ("0.5.18", "Unified18"), ("0.5.30", "Unified23"),
    ("0.5.17", "HiRadix17"), ("0.5.16", "HiRadix15"), ("0.5.15.post1", "HiRadix15"), ("0.5.15", "HiRadix15"),
    ("0.5.14", "HiRadix13"), ("0.5.13.post1", "HiRadix13"), ("0.5.13", "HiRadix13"),
    ("0.5.12.post1", "HiRadix12"), ("0.5.12", "HiRadix12"), ("0.5.11", "HiRadix12"),
    ("0.5.10.post1", "HiRadix10"), ("0.5.10", "HiRadix10"),
])
def test_shim_selection(version, shim):
    assert shims.select(version).name == shim


@pytest.mark.parametrize("version, core", [
    ("0.5.23", "urc"), ("0.5.18", "urc"), ("0.5.17", "hrc"), ("0.5.14", "hrc"), ("0.5.13.post1", "hrc"),
    ("0.5.12.post1", "hrc"), ("0.5.10", "hrc"),
])
def test_release_selects_its_adapter_core(version, core):
    """UnifiedRadixCache releases go to core.SGLangRank, HiRadixCache ones to core_hrc."""
    assert shims.select(version).core == core
    assert shims.cache_module(version).endswith("unified_radix_cache" if core == "urc" else "hiradix_cache")


def test_every_release_in_the_history_range_has_a_shim_and_older_ones_say_why():
    for version in RELEASES:
        shims.select(version)
    with pytest.raises(UserError, match="older than every supported release"):
        shims.select("0.5.9")


def test_hiradix_shims_differ_only_where_releases_do():
    """Each HiRadixCache shim expects what its releases add and drops what they lack."""
    by_name = {s.name: s for s in shims.HRC_SHIMS}
    req = {n: set(s.REQUIRES) for n, s in by_name.items()}
    assert req["HiRadix17"] - req["HiRadix15"] == {f"{shims.HRC}._sync_hicache_ready_counts"}
    assert req["HiRadix15"] - req["HiRadix13"] == {f"{shims.HRC}._evict_write_through",
                                                   f"{shims.HRC}._make_eviction_heap"}
    assert req["HiRadix13"] - req["HiRadix12"] == {f"{shims.HRC}._finish_write_through_ack"}
    assert req["HiRadix12"] - req["HiRadix10"] == {f"{shims.HRC}._all_reduce_attn_groups"}
    group = object()
    assert by_name["HiRadix10"].group_params(group) == {"tp_cache_group": group}
    assert set(by_name["HiRadix12"].group_params(group)) == {"tp_cache_group", "attn_cp_cache_group",
                                                             "attn_tp_cache_group"}


def test_shims_differ_only_where_releases_do():
    newest, oldest = shims.SHIMS[0], shims.SHIMS[-1]
    assert set(oldest.REQUIRES) - set(newest.REQUIRES) == {"sglang.srt.mem_cache.utils:get_hash_str"}
    for shim in shims.SHIMS:
        assert set(shims.COMMON) <= set(shim.REQUIRES)


def test_missing_name_is_one_line_error():
    class Probe(shims.Shim):
        name = "Probe"
        REQUIRES = ("json:dumps", "json:JSONDecoder.decode", "json:JSONDecoder.no_such_method")

    with pytest.raises(UserError) as exc:
        shims.check(Probe(), "0.5.99")
    msg = str(exc.value)
    assert "\n" not in msg
    assert "json:JSONDecoder.no_such_method" in msg and "Probe" in msg and "0.5.99" in msg
    assert shims.resolve("no_such_module_xyz:thing") is None


def test_lanes_dir_override(monkeypatch, tmp_path):
    monkeypatch.delenv(lanes.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert lanes.lanes_dir() == tmp_path / "xdg" / "tiercheck" / "lanes"
    monkeypatch.setenv(lanes.ENV_VAR, str(tmp_path / "env"))
    assert lanes.lanes_dir() == tmp_path / "env"
    assert lanes.lanes_dir(str(tmp_path / "flag")) == tmp_path / "flag"


def test_lane_names(tmp_path):
    assert lanes.lane_name("0.5.21") == "sglang-0.5.21"
    a, b = lanes.lane_name(source=str(tmp_path / "a")), lanes.lane_name(source=str(tmp_path / "b"))
    assert a.startswith("sglang-src-") and a != b
    assert lanes.base_key("3.11") != lanes.base_key("3.12")
    assert lanes.lane_spec_args("sglang==0.5.20", None) == ("0.5.20", None)
    with pytest.raises(UserError):
        lanes.lane_spec_args("sglang==0.5.20", str(tmp_path))
    with pytest.raises(UserError):
        lanes.lane_spec_args(None, None)


def _fake_lane(root, version, **extra):
    lane = root / lanes.lane_name(version)
    py = lanes.venv_python(lane / "venv")
    py.parent.mkdir(parents=True)
    py.write_text("")
    info = {"base": lanes.base_key(), "tiercheck": str(lanes.tiercheck_root()), "sglang": version, "source": None}
    info.update(extra)
    (lane / lanes.MARKER).write_text(json.dumps(info))
    return py


def test_setup_fast_path_is_idempotent(tmp_path):
    """A built lane (marker matching this base and checkout) is returned without building."""
    py = _fake_lane(tmp_path, "0.5.21")
    assert lanes.setup(tmp_path, "0.5.21") == py
    assert lanes.setup(tmp_path, "0.5.21") == py
    assert not (tmp_path / "sglang-0.5.21" / "setup.log").exists()  # nothing ran
    assert lanes.python_of(tmp_path, "0.5.21") == py
    assert [i["sglang"] for i in lanes.list_lanes(tmp_path)] == ["0.5.21"]


def test_lane_list_orders_by_release_and_python_of_missing(tmp_path):
    _fake_lane(tmp_path, "0.5.23")
    _fake_lane(tmp_path, "0.5.9")
    assert [i["sglang"] for i in lanes.list_lanes(tmp_path)] == ["0.5.9", "0.5.23"]
    with pytest.raises(UserError, match="tiercheck lane setup sglang==0.5.20"):
        lanes.python_of(tmp_path, "0.5.20")


def test_release_extras():
    assert lanes.release_extras("0.5.12.post1") == lanes.release_extras("0.5.12") == (["einops"], ["sgl_kernel"])
    assert lanes.release_extras("0.5.11") == ([], ["sgl_kernel"])
    assert lanes.release_extras("0.5.16") == (["einops"], [])
    assert lanes.release_extras("0.5.20") == ([], [])


def test_sgl_kernel_stub_imports(tmp_path):
    stub = lanes.write_stub(tmp_path, "sgl_kernel", lanes.STUBS["sgl_kernel"])
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from sgl_kernel.kvcacheio import transfer_kv_direct\n"
            "try: transfer_kv_direct(1)\nexcept RuntimeError as e: print('raises', 'sgl_kernel stand-in' in str(e))")
    out = subprocess.run([sys.executable, "-c", code, str(stub)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "raises True"


def test_torchvision_stub_imports(tmp_path):
    stub = lanes.write_torchvision_stub(tmp_path)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import torchvision, torchvision.ops.boxes, "
            "torchvision.transforms.v2.functional as F\n"
            "assert torchvision.__version__.endswith('+stub')\n"
            "try: F.resize(1)\nexcept RuntimeError as e: print('raises', 'stand-in' in str(e))")
    out = subprocess.run([sys.executable, "-c", code, str(stub)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "raises True"


def test_lane_cli_bad_input(tmp_path):
    from tiercheck.cli import main

    assert main(["lane", "python", "sglang==0.5.20", "--lanes-dir", str(tmp_path)]) != 0
    assert main(["lane", "setup", "sglang=0.5.20", "--lanes-dir", str(tmp_path)]) != 0
    assert main(["lane", "list", "--lanes-dir", str(tmp_path)]) == 0


def test_lane_setup_takes_patches_by_name_and_refuses_an_unknown_one():
    from tiercheck.cli import build_parser
    from tiercheck.conformance.sglang_workload import patch
    from tiercheck.errors import UserError

    args = build_parser().parse_args(["lane", "setup", "sglang==0.5.23", "--patch", "mirror-release"])
    assert args.patch == ["mirror-release"]
    with pytest.raises(UserError, match="unknown patch 'nope'"):
        patch.apply_patch("nope", "unused", "0.5.23")


@pytest.mark.parametrize("version, refused", [
    ("0.5.23", None), ("0.5.22", None), ("0.5.20", None), ("0.5.19", "CacheRequestHandle"),
    ("0.5.18", "CacheRequestHandle"), ("0.5.17", "L3 storage is not mapped"),
])
def test_prefetch_is_mapped_from_0_5_20_and_refused_with_the_reason_before(version, refused):
    from tiercheck.conformance.sglang.driver import check_supported
    from tiercheck.models import model_file

    cfg = model_file.load("sglang/wt-prefetch-2r").config
    if refused is None:
        check_supported(cfg, version)
    else:
        with pytest.raises(UserError, match=refused):
            check_supported(cfg, version)

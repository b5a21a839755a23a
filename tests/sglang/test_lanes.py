"""Lane tests, run with a lane's interpreter (`$(tiercheck lane python sglang==X.Y.Z) -m pytest
-m sglang`): the lane's own setup is a fast no-op, the installed release gets its shim, a
shim expecting a name the release lacks fails with one line, every committed history trace
replays on this release as docs/findings/history.json says, and a local checkout
(`--source`) becomes a lane that `tiercheck conform --impl sglang` drives."""

import importlib.metadata as md
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tiercheck.conformance.sglang import lane as lanes
from tiercheck.conformance.sglang import shims
from tiercheck.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
HISTORY = ROOT / "docs" / "findings" / "history.json"


def _version():
    try:
        return md.version("sglang")
    except md.PackageNotFoundError:
        return None


def _lane_root():
    """The lanes directory this interpreter's lane lives in (<root>/sglang-X/venv)."""
    root = Path(sys.prefix).parents[1]
    return root if lanes.read_marker(Path(sys.prefix).parent) is not None else None


def _supported():
    try:
        return _version() is not None and shims.select(_version()) is not None
    except UserError:
        return False


pytestmark = [
    pytest.mark.sglang,
    pytest.mark.skipif(not _supported() or _lane_root() is None,
                       reason="needs an SGLang lane (tiercheck lane setup sglang==X.Y.Z)"),
]


def test_setup_of_this_lane_is_a_fast_no_op():
    info = lanes.read_marker(Path(sys.prefix).parent)
    if info.get("source"):
        pytest.skip("a --source lane")
    py = lanes.setup(_lane_root(), info["sglang"])
    assert Path(py).parent.parent == Path(sys.prefix)
    assert lanes.python_of(_lane_root(), info["sglang"]) == py


def test_installed_release_gets_its_shim():
    version, shim = shims.installed()
    assert version == _version() and shim is shims.select(version)
    shims.check(shim, version)  # every name it expects is there


def test_shim_expecting_a_missing_name_fails_in_one_line():
    class Future(type(shims.select(_version()))):
        name = "Future"
        REQUIRES = shims.select(_version()).REQUIRES + (f"{shims.URC}.a_method_no_release_has",)

    with pytest.raises(UserError) as exc:
        shims.check(Future(), _version())
    assert str(exc.value) == (f"sglang {_version()} lacks {shims.URC}.a_method_no_release_has "
                              "(expected by the adapter's Future shim)")


def _history_cases():
    if not HISTORY.exists():
        return []
    data = json.loads(HISTORY.read_text())
    cases = []
    for trace, per_release in data.get("expected", {}).items():
        verdict = per_release.get(_version() or "")
        if verdict in ("agrees", "disagrees", "unreached"):
            cases.append(pytest.param(trace, verdict, id=Path(trace).stem))
    return cases


@pytest.mark.gloo
@pytest.mark.parametrize("trace, verdict", _history_cases())
def test_history_trace_replays_as_recorded(trace, verdict):
    from tiercheck.conformance.sglang.history import replay_set

    (row,) = replay_set([str(ROOT / trace)])
    assert row["result"] == verdict, row.get("message")


@pytest.mark.gloo
def test_writing_check_with_one_empty_write_queue():
    """HiRadixCache's early-return-collective: rank 1's host allocation fails (so only rank
    0 has a write-through in flight), rank 0's copy finishes, writing_check. Up to
    0.5.13.post1 rank 1 returns before the MIN all-reduce that rank 0 waits in: the gloo
    timeout is reported as the hung sync point. From 0.5.14 both ranks enter it."""
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.conformance.sglang.versions import parse
    from tiercheck.models import model_file
    from tiercheck.spec.action import act

    if shims.select(_version()).core != "hrc":
        pytest.skip("a HiRadixCache release")
    driver = SGLangDriver(model_file.load("sglang/wt-alloc-leak-2r").config, backend="gloo", timeout=5.0)
    try:
        driver.apply(act("insert", req=0, fail=(1,)))
        driver.apply(act("write_dma_done", rank=0))
        driver.apply(act("writing_check"))
        state = driver.state()
    finally:
        driver.close()
    assert state.hung == ("writing_check" if parse(_version()) <= parse("0.5.13.post1") else "")


@pytest.mark.gloo
def test_a_replay_passing_the_admission_divergence_reaches_the_early_return():
    """The same hang found the campaign's way (tiercheck.conformance.distinct), on the
    shipped model with the spec's agreed admission: the first step's disagreement (one
    rank backs the node up, the other does not) gets its signature from a replay, and a
    replay passing that signature goes on to writing_check, which hangs up to
    0.5.13.post1 (HiRadixCache) and agrees with the spec after it."""
    from tiercheck.conformance.distinct import first_new, signature
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.conformance.sglang.versions import parse
    from tiercheck.models import model_file
    from tiercheck.spec.action import act
    from tiercheck.spec.model import Model

    cfg = model_file.load("sglang/wt-alloc-2r").config
    model = Model(cfg)
    factory = lambda: SGLangDriver(cfg, backend="gloo", timeout=5.0)  # noqa: E731
    first = [act("insert", req=0, fail=(0,))]
    out = first_new(factory, first, ())
    assert out.mismatch is not None  # every release decides host admission per rank
    known = [signature(model, out.mismatch, first)]
    trace = first + [act("writing_check")]
    out = first_new(factory, trace, known)
    assert out.passed == known
    if shims.select(_version()).core == "hrc" and parse(_version()) <= parse("0.5.13.post1"):
        assert out.mismatch is not None and signature(model, out.mismatch, trace) == "state at writing_check: hung"
    else:
        assert out.mismatch is None


@pytest.mark.gloo
def test_host_slots_freed_lazily_count_as_free():
    """From 0.5.16 SGLang's host pool frees lazily (pool_host/base.py keeps freed slots in
    ``release_slots`` until an allocation merges them), so the HiRadixCache core reads free
    host slots from the pool's ``slot_used``. Pinned with the campaign's 0.5.16 trace: past
    the per-rank admission divergence, rank 0's host copy of node 1 is freed by the evict;
    counting ``free_slots`` alone reported that slot as leaked ("host slots leaked: [3]")."""
    from tiercheck.conformance.distinct import first_new, signature
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.conformance.sglang.versions import parse
    from tiercheck.models import model_file
    from tiercheck.spec.action import act
    from tiercheck.spec.model import Model

    if shims.select(_version()).core != "hrc" or parse(_version()) < parse("0.5.16"):
        pytest.skip("a HiRadixCache release whose host pool frees lazily (0.5.16, 0.5.17)")
    cfg = model_file.load("sglang/wt-alloc-2r").config
    factory = lambda: SGLangDriver(cfg, backend="gloo", timeout=5.0)  # noqa: E731
    trace = [act("insert", req=1), act("write_dma_done", rank=1), act("write_dma_done", rank=0),
             act("writing_check"), act("evict", node=2), act("insert", req=0, fail=(0,)), act("evict", node=1)]
    first = first_new(factory, trace, ())
    known = [signature(Model(cfg), first.mismatch, trace)]
    assert known[0].startswith("state at insert: host_free")  # the admission divergence
    out = first_new(factory, trace, known)
    assert out.passed == known
    assert out.mismatch is None, out.mismatch.message


@pytest.mark.slow
def test_source_checkout_lane_conforms(tmp_path):
    """A local checkout (here: this lane's sglang package with a minimal pyproject, as an
    unpacked release gives it) installed editable into its own lane, then driven."""
    import sglang

    checkout = tmp_path / "sglang-checkout"
    checkout.mkdir()
    shutil.copytree(Path(sglang.__file__).parent, checkout / "sglang",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "sglang"\nversion = "{_version()}"\n'
        '[tool.setuptools.packages.find]\ninclude = ["sglang*"]\n')
    root = _lane_root()
    try:
        py = lanes.setup(root, source=str(checkout))
        assert lanes.setup(root, source=str(checkout)) == py  # idempotent
        where = subprocess.run([str(py), "-c", "import sglang; print(sglang.__file__)"], check=True,
                               capture_output=True, text=True).stdout
        assert where.startswith(str(checkout))
        out = subprocess.run([str(py), "-m", "tiercheck", "conform", "--impl", "sglang", "--model", "sglang/wt-1r",
                              "--examples", "3", "--steps", "10", "--out", str(tmp_path / "cx")],
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    finally:
        shutil.rmtree(root / lanes.lane_name(source=str(checkout)), ignore_errors=True)

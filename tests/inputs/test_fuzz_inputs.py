"""Fuzzing the three ways input enters tiercheck: model files, trace files and command
lines. Property: the run ends (under a generous hang bound) with a known exit code, and a
refusal is exit 2 with one line on stderr, never a traceback. In-process through
tiercheck.cli.main (fast), plus a few real processes. The default run tries a few hundred
inputs in tens of seconds; ``-m slow`` tries many more. Each test prints how many inputs it
tried (visible with -s)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiercheck.cli import main
from tiercheck.errors import UserError
from tiercheck.models import model_file

HANG = 120  # seconds: a case still running after this hangs
FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
SLOW = settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck), database=None)

MODEL_KEYS = sorted(model_file._MODEL_KEYS) + ["nonsense"]
CHECK_KEYS = sorted(model_file._CHECK_KEYS) + ["nonsense"]
WORDS = ["no_ghost", "host_channel", "write_back", "write_through", "partial_storage", "release-busy", "", "x" * 300]

scalars = st.one_of(
    st.integers(-(2**70), 2**70), st.integers(-3, 20), st.booleans(), st.sampled_from(WORDS),
    st.text(max_size=8), st.floats(allow_nan=True),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5), max_leaves=30)
models = st.fixed_dictionaries(
    {"model": st.dictionaries(st.sampled_from(MODEL_KEYS), values, max_size=8)},
    optional={"check": st.dictionaries(st.sampled_from(CHECK_KEYS), values, max_size=4), "junk": values},
)


@contextmanager
def bounded():
    """Fail instead of hanging: SIGALRM after HANG seconds."""

    def hang(*_):
        raise AssertionError(f"no answer after {HANG}s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(HANG)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_cli(argv, capsys):
    with bounded():
        rc = main(argv)
    err = capsys.readouterr().err
    assert rc in (0, 1, 2, 3), (argv, rc, err)
    assert "Traceback" not in err, (argv, err)
    if rc == 2:
        assert err.count("\n") == 1 and err.startswith("tiercheck: "), (argv, err)
    return rc, err


class Count:
    def __init__(self, name):
        self.name, self.n = name, 0

    def __call__(self):
        self.n += 1

    def report(self):
        print(f"\nfuzz {self.name}: {self.n} inputs tried")


# --- model files ------------------------------------------------------------------------


def _parser_body(raw, counter):
    counter()
    try:
        mf = model_file.parse(raw, "fuzz.toml")
    except UserError as exc:
        assert "\n" not in str(exc)
        return
    assert mf.properties and mf.config.ranks >= 1


def _model_parser(settings_):
    counter = Count("model parser")

    @settings_
    @given(models)
    def body(raw):
        _parser_body(raw, counter)

    body()
    counter.report()


def test_model_parser_refuses_with_one_line():
    _model_parser(FAST)


@pytest.mark.slow
def test_model_parser_refuses_with_one_line_many():
    _model_parser(SLOW)


def _model_text(settings_, tmp_path, capsys):
    counter = Count("model files via the CLI")
    path = tmp_path / "m.toml"

    @settings_
    @given(st.one_of(st.text(max_size=300), st.binary(max_size=300).map(bytes),
                     models.map(lambda r: "[model]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in r["model"].items()))))
    def body(text):
        counter()
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
        run_cli(["check", str(path), "--max-states", "200", "--quiet", "--workers", "1"], capsys)

    body()
    counter.report()


def test_model_files_through_the_cli(tmp_path, capsys):
    _model_text(FAST, tmp_path, capsys)


@pytest.mark.slow
def test_model_files_through_the_cli_many(tmp_path, capsys):
    _model_text(SLOW, tmp_path, capsys)


# --- traces -----------------------------------------------------------------------------

PARAMS = ["req", "rank", "node", "pages", "fail", "n", "anchor", "x"]
ACTIONS = ["insert", "evict", "write_dma_done", "writing_check", "load_back", "drain_storage_control_queues",
           "storage_backup_done", "store_lose", "frobnicate"]
actions = st.fixed_dictionaries({"action": st.one_of(st.sampled_from(ACTIONS), values)}).flatmap(
    lambda a: st.dictionaries(st.sampled_from(PARAMS), values, max_size=3).map(lambda p: {**p, **a})
)


@pytest.fixture(scope="module")
def good_trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace")
    assert main(["check", "variants/release-busy", "--out", str(d / "cex.json"), "--quiet"]) == 1
    doc = json.loads((d / "cex.json").read_text())
    # All but the violating step: a trace the spec itself replays cleanly (exit 0).
    doc["#meta"]["tiercheck"]["actions"].pop()
    doc["states"].pop()
    return doc


def _traces(settings_, good, tmp_path, capsys):
    counter = Count("traces (replay and show)")
    path = tmp_path / "t.json"
    n = len(good["#meta"]["tiercheck"]["actions"])

    @settings_
    @given(st.integers(0, n - 1), st.one_of(actions, values), st.sampled_from(["replay", "show"]),
           st.sampled_from(["action", "meta", "probes", "states"]))
    def body(i, new, command, where):
        counter()
        doc = json.loads(json.dumps(good))
        meta = doc["#meta"]["tiercheck"]
        if where == "action":
            meta["actions"][i] = new
        elif where == "meta":
            meta["model"] = new if i % 2 else json.dumps(new)
        elif where == "probes":
            meta["probes"] = new
        else:
            doc["states"][i] = new
        path.write_text(json.dumps(doc))
        argv = [command, str(path)] + (["--impl", "spec"] if command == "replay" else [])
        rc, _err = run_cli(argv, capsys)
        assert rc in (0, 2)  # the spec never disagrees with itself: a 1 would blame it

    body()
    counter.report()


def test_traces_are_validated(good_trace, tmp_path, capsys):
    _traces(FAST, good_trace, tmp_path, capsys)


@pytest.mark.slow
def test_traces_are_validated_many(good_trace, tmp_path, capsys):
    _traces(SLOW, good_trace, tmp_path, capsys)


# --- command lines ----------------------------------------------------------------------

NUMBERS = ["0", "-1", "-5", "1", "2", "8", "9", "100000", "10**12", "1e9", "nan", "inf", "-inf", "x", "", "0.5", "64M", "1T"]


@pytest.fixture(scope="module")
def paths(tmp_path_factory, good_trace):
    d = tmp_path_factory.mktemp("paths")
    (d / "file.txt").write_text("")
    (d / "cex.json").write_text(json.dumps(good_trace))
    os.mkfifo(d / "fifo")
    return [str(d / "file.txt"), str(d / "cex.json"), str(d / "fifo"), str(d), str(d / "missing" / "x"),
            "/dev/zero", "wt-1r", "no-such-model", str(d / "file.txt") + "/below"]


COMMANDS = {
    # command: (positional kinds, options with values, flags that keep the run small)
    "check": (["path"], ["--max-states", "--time-limit", "--max-memory", "--workers", "--all-violations", "--out", "--property"], ["--max-states", "300", "--quiet"]),
    "replay": (["path"], ["--ranks", "--impl", "--backend", "--variant"], ["--impl", "spec"]),
    "show": (["path"], ["--html"], []),
    "generate": (["path"], ["-o", "--max-len", "--budget"], ["--budget", "200"]),
    "graph": (["path"], ["-o", "--max-states", "--format"], ["--max-states", "300"]),
    "conform": ([], ["--model", "--ranks", "--examples", "--steps", "--seed", "--out", "--impl"], ["--examples", "3", "--steps", "5", "--impl", "spec"]),
    "prove": ([], ["--pages", "--workers", "--report", "--action", "--variant"], ["--action", "no-such-action"]),
}


def _cli(settings_, paths, tmp_path, capsys, monkeypatch):
    counter = Count("command lines")
    monkeypatch.chdir(tmp_path)
    value = st.one_of(st.sampled_from(NUMBERS), st.sampled_from(paths), st.text(max_size=6))

    @settings_
    @given(st.sampled_from(sorted(COMMANDS)).flatmap(
        lambda c: st.tuples(
            st.just(c),
            st.lists(st.sampled_from(paths), min_size=len(COMMANDS[c][0]), max_size=len(COMMANDS[c][0])),
            st.lists(st.tuples(st.sampled_from(COMMANDS[c][1]), value), max_size=3),
        )))
    def body(case):
        counter()
        command, positional, options = case
        # The bounding flags come last, so they win over a fuzzed value of the same option.
        argv = [command, *positional] + [x for kv in options for x in kv] + COMMANDS[command][2]
        run_cli(argv, capsys)

    body()
    counter.report()


def test_command_lines(paths, tmp_path, capsys, monkeypatch):
    _cli(FAST, paths, tmp_path, capsys, monkeypatch)


@pytest.mark.slow
def test_command_lines_many(paths, tmp_path, capsys, monkeypatch):
    _cli(SLOW, paths, tmp_path, capsys, monkeypatch)


# --- a few real processes -----------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["check", "/dev/zero"],
    ["check", "{fifo}"],
    ["replay", "{deep}"],
    ["check", "wt-1r", "--workers", "100000"],
])
def test_real_processes_refuse_with_one_line(argv, tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "deep").write_text("[" * 200_000)
    argv = [a.format(fifo=tmp_path / "fifo", deep=tmp_path / "deep") for a in argv]
    out = subprocess.run([sys.executable, "-m", "tiercheck", *argv], capture_output=True, text=True, timeout=HANG)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr

"""`tiercheck bench`: user errors are one line; the occupancy plot is written when
matplotlib is there and skipped with a clear message when it is not."""

import builtins
import sys

import pytest

import argparse

from tiercheck.cli import main
from tiercheck.commands import bench
from tiercheck.errors import UserError
from tiercheck.impl.workload.arms import ArmResult
from tiercheck.impl.workload.occupancy import HostTrace
from tiercheck.impl.workload.plot import PlotUnavailable, plot_occupancy
from tiercheck.impl.workload.scheduler import RoundStats


def _arm(name, mirror):
    tr = HostTrace(10)
    for i in range(1, 21):
        used = min(10, i)
        m = used if mirror else used // 2
        tr.rows.append((i, i * 0.01, used, m, used - m, 0, 0, used, 0))
    return ArmResult(name, mirror, "file", 1, [RoundStats(steps=10), RoundStats(steps=10)], {}, trace=tr)


def _bench(argv):
    """Parse and run like `tiercheck bench ...` (the CLI prints a UserError as one line)."""
    p = argparse.ArgumentParser(prog="tiercheck bench")
    bench.add_arguments(p)
    return bench.run(p.parse_args(argv))


def test_bench_without_a_benchmark_is_a_user_error():
    with pytest.raises(UserError, match="seed-table or reclaim"):
        _bench([])


@pytest.mark.parametrize("argv, msg", [
    (["seed-table", "--scale", "small", "--sessions", "0"], "--sessions: must be an integer [1, 4096], got 0"),
    (["reclaim", "--scale", "small", "--device-pages", "8"], "do not fit"),
    (["seed-table", "--scale", "small", "--plot", "{file}/x.png"], "is not a directory"),
])
def test_bad_arguments_are_one_line_exit_2(argv, msg, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    argv = [a.replace("{file}", str(tmp_path / "file")) for a in argv]
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err


def test_plot_written(tmp_path):
    pytest.importorskip("matplotlib")
    p = plot_occupancy([_arm("off", True), _arm("on", False)], str(tmp_path / "occ.png"), "t")
    with open(p, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plot_skipped_without_matplotlib(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_mpl(name, *a, **k):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib")
        return real_import(name, *a, **k)

    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", no_mpl)
    with pytest.raises(PlotUnavailable, match="pip install"):
        plot_occupancy([_arm("off", True)], str(tmp_path / "x.png"), "t")
    assert not (tmp_path / "x.png").exists()

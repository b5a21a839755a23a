"""The mutation benchmark's own machinery (needs the bench extra's cosmic-ray): a session
is created, sampled with a seed outside the CUDA-only code, and reported. No mutant is
run here (that is the benchmark: minutes per mutant)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray")
ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("mutation_bench", ROOT / "benchmarks" / "mutation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sample_skips_cuda_only_code_and_the_report_counts_nothing_run(tmp_path, capsys):
    mb = _load()
    if shutil.which(mb.cosmic_ray()) is None:
        pytest.skip("no cosmic-ray command")
    cfg, session = tmp_path / "cr.toml", tmp_path / "s.sqlite"
    cfg.write_text(mb.config(["impl/transfer.py"], 1, 0, 60))
    subprocess.run([mb.cosmic_ray(), "init", str(cfg), str(session)], cwd=ROOT, check=True)
    total = mb.sample(session, 3, seed=0)
    with mb.use_db(str(session), mb.WorkDB.Mode.open) as db:
        pending = list(db.pending_work_items)
    assert len(pending) == 3 and total > 3
    assert not any(mb.needs_cuda(w.mutations[0]) for w in pending) or mb.torch_cuda()
    assert mb.report(session) == 0
    assert "impl/transfer.py" not in capsys.readouterr().out  # only skipped results so far

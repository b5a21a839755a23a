"""The CI recipe in docs/ci/tiercheck.yml runs: its steps' commands, in order, in a copy of
the example implementation package (examples/wrapped-hicache) standing in for a HiCache
repository, with tiny budgets.

The commands run in a fresh virtualenv whose only packages are the ones the steps install;
what this test's own environment already has (torch, tiercheck) is visible to it through a
.pth file, so the install steps find them satisfied and nothing is downloaded (pip runs
with --no-index and without build isolation: setuptools comes from the test extra).
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="the test extra: pip install 'tiercheck[test]'")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs/ci/tiercheck.yml"
EXAMPLE = ROOT / "examples/wrapped-hicache"
# What the copying repository sets in the workflow's env, made tiny (and tiercheck: already here).
TINY = {"TIERCHECK_REQUIREMENT": "tiercheck", "TIERCHECK_MODEL": "wt-1r", "TIERCHECK_EXAMPLES": "3",
        "TIERCHECK_STEPS": "8", "GITHUB_RUN_NUMBER": "7"}


def workflow_job() -> dict:
    doc = yaml.safe_load(WORKFLOW.read_text())
    (job,) = doc["jobs"].values()
    return job


def fresh_venv(where: Path) -> dict:
    """A virtualenv seeing this environment's packages; returns the environment for its shell."""
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site_dir,) = (venv / "lib").glob("python*/site-packages")
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    # addsitedir (not a plain path line) so the parents' own .pth files (editable installs) apply.
    (site_dir / "parent_env.pth").write_text("import site; " + "; ".join(f"site.addsitedir({p!r})" for p in parents) + "\n")
    # The console script the "install tiercheck" step would have put here, had it not been satisfied.
    launcher = venv / "bin" / "tiercheck"
    launcher.write_text(f"#!{venv}/bin/python\nimport sys\nfrom tiercheck.cli import main\nsys.exit(main())\n")
    launcher.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(TINY, VIRTUAL_ENV=str(venv), PATH=f"{venv}/bin{os.pathsep}{env.get('PATH', '')}",
               PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def test_workflow_is_a_github_actions_job_for_a_hicache_repository():
    job = workflow_job()
    uses = [s["uses"].split("@")[0] for s in job["steps"] if "uses" in s]
    assert uses[:2] == ["actions/checkout", "actions/setup-python"]
    runs = "\n".join(s["run"] for s in job["steps"] if "run" in s)
    assert "torch==2.13.0+cpu" in runs and "download.pytorch.org/whl/cpu" in runs  # never a bare torch
    for needed in ("pip install .", "tiercheck generate", "--tiercheck-impl", "tiercheck conform"):
        assert needed in runs
    assert set(TINY) - {"GITHUB_RUN_NUMBER"} <= set(job["env"])


def test_workflow_steps_run_against_the_example_package(tmp_path):
    repo = tmp_path / "hicache-repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    env = fresh_venv(tmp_path)
    env["TIERCHECK_IMPL"] = workflow_job()["env"]["TIERCHECK_IMPL"]
    ran = []
    for step in workflow_job()["steps"]:
        if "run" not in step or step.get("if") == "failure()":
            continue
        r = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"step {step['name']!r} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        ran.append((step["name"], r.stdout))
    out = dict(ran)
    assert "from wrapped-hicache (wrapped_hicache.driver:make_driver)" in out["Show the implementations tiercheck can drive"]
    tours = next(v for k, v in out.items() if k.startswith("Replay the transition tours"))
    assert " passed" in tours and "failed" not in tours
    conform = next(v for k, v in out.items() if k.startswith("Random interleavings"))
    assert "wrapped conforms to the spec on wt-1r (1 rank(s)): 3 examples x up to 8 steps, seed 7" in conform
    # The package went into the fresh environment (this one may have its own copy: CI installs it).
    assert list((tmp_path / "venv" / "lib").glob("python*/site-packages/wrapped_hicache/driver.py"))

"""Regenerate docs/img/viewer.png: a wt-mirror-2r walk (stage, back up, plan a mirror
release, demote, load back, split during the load) drawn by `tiercheck show --html` and
photographed by headless Chromium (Debian package `chromium`).

    python docs/img/make_viewer_png.py          # writes docs/img/viewer.png
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tiercheck.models import model_file
from tiercheck.models.trace import read_trace, write_trace
from tiercheck.models.viewer_html import write
from tiercheck.spec.model import Model

WALK = [
    "insert(req=0)", "write_dma_done(rank=0)", "write_dma_done(rank=1)", "writing_check",
    "storage_backup_done(rank=0, pages=2)", "storage_backup_done(rank=1, pages=2)",
    "drain_storage_control_queues", "evict(node=1)", "load_back(node=1)", "insert(req=1)",
    "load_dma_done(rank=0)",
]
STEP = 10  # the split while rank 0's load is in flight


def walk_trace(path: Path, name: str = "wt-mirror-2r") -> None:
    mf = model_file.load(name)
    model = Model(mf.config)
    s = model.init_states()[0]
    states, actions = [s], []
    for want in WALK:
        enabled = {str(a): a for a in model.actions(s)}
        a = enabled[want]  # KeyError: the spec changed; update WALK
        s = model.next_state(s, a)
        actions.append(a)
        states.append(s)
    write_trace(path, model, model_file.dump(mf), actions, states, kind="trace")


def main() -> int:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        print("needs chromium (apt-get install -y chromium)", file=sys.stderr)
        return 2
    out = Path(__file__).resolve().parent / "viewer.png"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        walk_trace(tmp / "walk.json")
        page = write(read_trace(tmp / "walk.json"), tmp / "walk.html")
        subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             f"--user-data-dir={tmp / 'profile'}", "--virtual-time-budget=5000", "--window-size=1400,900",
             f"--screenshot={out}", f"{page.as_uri()}#step={STEP}"],
            check=True, capture_output=True, timeout=120,
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The starvation arms on SGLang: the baseline, the controls, the mirror-release patch.

Every arm serves the same traffic shape on a fresh SGLang HiCache and a fresh file
store, then verifies every byte: each device and host copy in the tree, and every page
the store holds (read back from its file). Sizes are in tokens (page size 1).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

from tiercheck.errors import UserError
from tiercheck.impl.workload.arms import default_file_dir
from tiercheck.impl.workload.occupancy import HostTrace

from .engine import CacheSetup, Engine
from .traffic import Traffic, traffic

FLAG = "SGLANG_HICACHE_MIRROR_RELEASE"


@dataclass(frozen=True)
class Arm:
    name: str
    setup: CacheSetup
    patched: bool = False  # the mirror-release flag on (needs the patch in the lane)


def arms(device_tokens: int = 1024, host_ratio: float = 0.25, patched: bool = False) -> list[Arm]:
    """Baseline, controls and (``patched``) the mirror release, for one device pool."""
    host = max(1, round(device_tokens * host_ratio))
    base = CacheSetup(device_tokens=device_tokens, host_tokens=host)
    out = [
        Arm(f"baseline: write_through + L3, host {host_ratio:g}x", base),
        Arm("control: host = 1x device", replace(base, host_tokens=device_tokens)),
        Arm("control: host 2x (SGLang's default ratio)", replace(base, host_tokens=2 * device_tokens)),
        Arm(f"control: write_back + L3, host {host_ratio:g}x", replace(base, policy="write_back")),
        Arm(f"write_through_selective + L3, host {host_ratio:g}x",
            replace(base, policy="write_through_selective")),
        Arm(f"control: buffer_only host mode, host {host_ratio:g}x", replace(base, host_memory_mode="buffer_only")),
    ]
    if patched:
        out.append(Arm(f"patched: mirror release on, host {host_ratio:g}x", base, patched=True))
    return out


@dataclass
class ArmResult:
    arm: Arm
    shape: str
    counters: object = None
    host_capacity: int = 0
    distinct_tokens: int = 0
    stored_pages: int = 0  # distinct inserted pages present in the store at the end
    problems: list = field(default_factory=list)
    released_tokens: int = 0
    error: str = ""  # the arm could not run on this release: why
    wall_s: float = 0.0
    trace: HostTrace | None = None
    round_steps: list = field(default_factory=list)

    @property
    def write_out_pct(self) -> float:
        c = self.counters
        return 100.0 * c.backup_admitted / max(c.backup_admitted + c.backup_rejected, 1)

    @property
    def stored_pct(self) -> float:
        return 100.0 * self.stored_pages / max(self.distinct_tokens, 1)

    def full_share(self, full: float = 0.95) -> float:
        """Share of steps with the host pool at least ``full`` x capacity used."""
        rows = self.trace.rows if self.trace else []
        return sum(1 for r in rows if r[2] >= full * self.host_capacity) / max(len(rows), 1)

    def plot_view(self):
        """What impl.workload.plot draws: name, trace, round boundaries."""
        return SimpleNamespace(name=f"{self.shape}: {self.arm.name}", trace=self.trace,
                               rounds=[SimpleNamespace(steps=s) for s in self.round_steps])


def run_arm(arm: Arm, t: Traffic, concurrency: int = 2, decode_steps: int = 4) -> ArmResult:
    from .driver import Driver

    res = ArmResult(arm, t.shape, distinct_tokens=t.distinct_tokens())
    old = os.environ.get(FLAG)
    os.environ[FLAG] = "1" if arm.patched else "0"
    root = tempfile.mkdtemp(prefix="tiercheck-sglang-l3-", dir=default_file_dir())
    t0 = time.perf_counter()
    eng = None
    try:
        try:
            eng = Engine(arm.setup, storage_dir=root if arm.setup.storage else None)
            if arm.patched and getattr(eng.cache, "mirror_release", None) is None:
                raise UserError("the mirror-release patch is not active in this lane (apply it: python -m "
                                "tiercheck.conformance.sglang_workload.patch apply mirror-release)")
            drv = Driver(eng, concurrency, decode_steps)
            drv.run(t.rounds())
        except UserError:
            raise
        except Exception as exc:  # an arm the release cannot run on CPU: say why, go on
            res.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]
            return res
        res.counters = drv.c
        res.host_capacity = eng.host_capacity
        res.round_steps = drv.round_steps
        mr = getattr(eng.cache, "mirror_release", None)
        res.released_tokens = mr.released_tokens if mr else 0
        # impl.workload.occupancy's rows: step, t, used, mirror, host_only, writing, other,
        # cached (not sampled here), releasable
        res.trace = HostTrace(eng.host_capacity, [
            (s, 0.0, used, mirror, host_only, writing, used - mirror - host_only - writing, 0, rel)
            for s, used, mirror, host_only, writing, rel in drv.c.occupancy])
        res.problems = eng.verify()
        if arm.setup.storage:
            n, bad = eng.verify_store(drv.keys)
            res.stored_pages = n
            res.problems += bad
        return res
    finally:
        res.wall_s = time.perf_counter() - t0
        if eng is not None:
            eng.close()
        shutil.rmtree(root, ignore_errors=True)
        if old is None:
            os.environ.pop(FLAG, None)
        else:
            os.environ[FLAG] = old


def run_all(shapes=("plain", "hot"), device_tokens: int = 1024, host_ratio: float = 0.25,
            sessions: int = 32, patched: bool = False, only=None, log=None) -> list[ArmResult]:
    out = []
    host = max(1, round(device_tokens * host_ratio))
    for shape in shapes:
        t = traffic(shape, host, sessions=sessions)
        for arm in arms(device_tokens, host_ratio, patched):
            if only and not any(o in arm.name for o in only):
                continue
            if log:
                log(f"{shape}: {arm.name} ...")
            r = run_arm(arm, t)
            out.append(r)
            if log:
                log(f"  {r.wall_s:.1f} s, " + (f"not run: {r.error}" if r.error else
                                               f"verify {'ok' if not r.problems else r.problems[:2]}"))
    return out


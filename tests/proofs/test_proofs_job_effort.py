"""An audit job's z3 effort does not depend on the process it was forked from.

A forked child inherits its parent's garbage-collector state; the collections that free
z3 terms (whose ids z3 then reuses) came at points set by what the parent had allocated,
and z3's quantifier instantiation follows the ids: the same job took 4.1 or 6.8 million
resource units by what a fresh parent had allocated before the fork. proofs.audit._job
collects first, so the effort (z3's own resource count, not seconds) is the same whatever
the parent did. Run in a fresh interpreter: the parent's state is the point."""

import json
import subprocess
import sys

PARENT = """
import json
from tiercheck.proofs import cores
from tiercheck.proofs.audit import _jobs, forked_pool, measured_job
cores.set_table({})  # every query decided whole: the effort of the quantifier instantiation is the point
job = next(j for j in _jobs(["lock_request"], (), 2, True) if j[1] == "unbounded")
out = []
for n in (0, 50_000, 200_000):
    junk = [dict(a=i) for i in range(n)]
    del junk[::3]  # holes in the parent's heap as well as a count
    with forked_pool(1) as pool:
        results, _cpu, used, _info = pool.apply(measured_job, (job,))
    out.append([used, all(r.status == "proved" for r in results)])
print(json.dumps(out))
"""


def test_a_job_takes_the_same_effort_whatever_the_parent_allocated(tmp_path):
    script = tmp_path / "parent.py"  # a file, not -c: the state that showed the difference
    script.write_text(PARENT)
    got = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-2000:]
    runs = json.loads(got.stdout.strip().splitlines()[-1])
    assert all(proved for _u, proved in runs), runs
    assert len({u for u, _p in runs}) == 1, runs

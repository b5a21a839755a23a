"""Random model files through every engine, compared: models nobody shipped.

    python benchmarks/random_models.py --seed 1 --models 50 --out fuzz-1/
    python benchmarks/random_models.py --seed 1 --only 17 --out repro/   # model 17 of seed 1 again

Each model is drawn by tiercheck.models.random_model (every model-file key, options and
faults included; a refused draw drops the key the refusal names, or is drawn again, and
the refusals are counted) from ``random.Random(f"{seed}/{index}")``, so a seed and an
index reproduce it. Every engine runs as the `tiercheck` command a user types (one
process each), and the comparisons are:

  spec_holds     the correct protocol satisfies every default property (`check`)
  simulate       `check --simulate` finds no violation that the exhausted `check` did not
  workers        `check --workers 2` = `--workers 1`: counts and verdicts
  symmetry       `check --symmetry` = no symmetry: safety verdicts (where the model has a
                 symmetry; none: skipped with the checker's reason)
  cluster        `check --cluster local:2` = one process: counts and verdicts (a sample)
  tlc            `tiercheck tla --run`: TLC's distinct states = tiercheck's (small models)
  conform        `conform --impl reference` agrees with the spec
  variant_tlc    a random bug variant on the model: the checker's verdict = TLC's on the
                 twin (the properties the twin defines)
  replay         each counterexample (variant runs, simulations) replays on the spec
                 (`tiercheck replay --impl spec`) and ends in the violation it names
  replay_impl    ... and on the reference implementation with the variant switched on

Outcomes: agree, disagree, error (a crash or an unexpected exit), inconclusive (a time
limit), refused (the engine's one-line exit-2 refusal: a feature it lacks), skipped (does
not apply). Every outcome is a line of OUT/results.jsonl; OUT/summary.txt is the table.
Exit 1 on any disagreement or error, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tiercheck.models import random_model
from tiercheck.models.tla_export import split_properties
from tiercheck.spec.properties import BY_NAME
from tiercheck.spec.variants import VARIANTS

COMPARISONS = ("spec_holds", "simulate", "workers", "symmetry", "cluster", "tlc", "conform",
               "variant_tlc", "replay", "replay_impl")
OUTCOMES = ("agree", "disagree", "error", "inconclusive", "refused", "skipped")
FAILING = ("disagree", "error")

_COUNTS = re.compile(r"([\d,]+) distinct states, ([\d,]+) transitions, depth (\d+)")
_VERDICT = re.compile(r"^  (\w+) +(holds so far|holds|violated|unknown|unchecked.*|withdrawn.*)$", re.M)
_PROCESSES = re.compile(r"states/s, (\d+) workers?\)")
_WRITTEN = re.compile(r"^written to (.+)$", re.M)
_TLC = re.compile(r"TLC: ([\d,]+) distinct states, .*, (no error|violated: [\w, ]+|error)$", re.M)


class Run:
    """One `tiercheck` command: exit status, output, seconds; None status on a timeout."""

    def __init__(self, argv, timeout: float):
        t0 = time.monotonic()
        self.argv = argv
        try:
            p = subprocess.run([sys.executable, "-m", "tiercheck", *argv], capture_output=True, text=True,
                               timeout=timeout)
            self.rc, self.out, self.err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as exc:
            self.rc, self.out, self.err = None, _text(exc.stdout), _text(exc.stderr)
        self.wall = round(time.monotonic() - t0, 2)

    @property
    def command(self) -> str:
        return "tiercheck " + " ".join(self.argv)

    def refusal(self) -> str:
        """The one-line exit-2 refusal ("" when this is not one)."""
        lines = self.err.strip().splitlines()
        if self.rc == 2 and len(lines) == 1 and lines[0].startswith("tiercheck: "):
            return lines[0]
        return ""

    def tail(self, n: int = 1500) -> str:
        return (self.out[-n:] + "\n--stderr--\n" + self.err[-n:]).strip()


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


class Checked:
    """A `check` run parsed: counts, verdicts, whether it completed, the traces it wrote."""

    def __init__(self, run: Run):
        self.run = run
        m = _COUNTS.search(run.out)
        self.counts = tuple(int(x.replace(",", "")) for x in m.groups()) if m else None
        self.verdicts = dict(_VERDICT.findall(run.out))
        self.complete = "exploration complete" in run.out
        self.violated = {p for p, v in self.verdicts.items() if v == "violated"}
        self.traces = _WRITTEN.findall(run.out)
        self.ok = run.rc in (0, 1, 3) and (m is not None or "random walks" in run.out)
        self.symmetry_off = re.search(r"note: symmetry off: (.*)", run.out)


class Fuzz:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        (self.out / "models").mkdir(parents=True, exist_ok=True)
        self.results = open(self.out / "results.jsonl", "a")
        self.table = {c: Counter() for c in COMPARISONS}
        self.refusals = Counter()
        self.failures = []
        self.compare = set(args.compare.split(",")) if args.compare else set(COMPARISONS)
        unknown = self.compare - set(COMPARISONS)
        if unknown:
            raise SystemExit(f"--compare: unknown {', '.join(sorted(unknown))} (known: {', '.join(COMPARISONS)})")

    # -- recording ----------------------------------------------------------------
    def record(self, mid: str, compare: str, outcome: str, detail: str = "", runs=(), **extra):
        assert compare in COMPARISONS and outcome in OUTCOMES, (compare, outcome)
        self.table[compare][outcome] += 1
        rec = {"model": mid, "compare": compare, "outcome": outcome, "detail": detail,
               "commands": [r.command for r in runs], "wall": [r.wall for r in runs], **extra}
        if outcome in FAILING:
            rec["output"] = [r.tail() for r in runs]
            self.failures.append(rec)
            print(f"  {compare}: {outcome.upper()}: {detail}", flush=True)
        self.results.write(json.dumps(rec) + "\n")
        self.results.flush()

    def unexpected(self, mid, compare, run: Run, ok_codes, **extra) -> bool:
        """Record ``run`` when it ended otherwise than ``ok_codes``; True if it did."""
        if run.rc in ok_codes:
            return False
        if run.rc is None:
            self.record(mid, compare, "inconclusive", "timed out", [run], **extra)
        elif run.refusal():
            self.record(mid, compare, "refused", run.refusal(), [run], **extra)
        else:
            self.record(mid, compare, "error", f"exit {run.rc}", [run], **extra)
        return True

    # -- one model ------------------------------------------------------------------
    def model(self, index: int):
        a = self.args
        rng = random.Random(f"{a.seed}/{index}")
        mid = f"{a.seed}-{index}"
        raw, mf = random_model.settle(rng, self.refusals, f"{mid}.toml")
        path = self.out / "models" / f"{mid}.toml"
        path.write_text(random_model.to_toml(raw))
        self.results.write(json.dumps({"model": mid, "compare": "model", "toml": path.read_text()}) + "\n")
        print(f"model {mid}: {path}", flush=True)
        work = self.out / "work" / mid
        work.mkdir(parents=True, exist_ok=True)
        base = self.check_base(mid, path, work)
        # The draws below happen whatever is compared, so --compare keeps each model's seeds.
        sim_seed, conform_seed = rng.randrange(2**32), rng.randrange(2**32)
        on_cluster, with_variant = rng.random() < a.cluster_share, rng.random() < a.variant_share
        variant = rng.choice(sorted(v.name for v in VARIANTS.values() if v.twin))
        if base is not None:
            if "simulate" in self.compare:
                self.simulate(mid, path, work, base, sim_seed)
            if "workers" in self.compare:
                self.workers(mid, path, base)
            if "symmetry" in self.compare:
                self.symmetry(mid, path, base)
            if on_cluster and "cluster" in self.compare:
                self.cluster(mid, path, base)
            if "tlc" in self.compare:
                self.tlc(mid, path, work / "tla", base, "tlc")
            if "conform" in self.compare:
                self.conform(mid, path, work, conform_seed)
        if with_variant and "variant_tlc" in self.compare:
            self.variant(mid, raw, work, variant, rng)

    def check(self, path, *flags, limit=None) -> Checked:
        limit = limit or self.args.time_limit
        return Checked(Run(["check", str(path), "--quiet", "--time-limit", str(limit), *flags],
                           timeout=4 * limit + 120))

    def check_base(self, mid, path, work):
        base = self.check(path, "--workers", "1", "--no-symmetry", "--out", str(work / "check.json"))
        if self.unexpected(mid, "spec_holds", base.run, (0, 1, 3)):
            return None
        if not base.ok:
            self.record(mid, "spec_holds", "error", "no summary printed", [base.run])
            return None
        bad = sorted(base.violated)
        if bad:
            self.record(mid, "spec_holds", "disagree", f"the correct protocol violates {', '.join(bad)}",
                        [base.run], counts=base.counts)
        else:
            self.record(mid, "spec_holds", "agree" if base.complete else "inconclusive",
                        "" if base.complete else "partial search", [base.run], counts=base.counts)
        return base

    def simulate(self, mid, path, work, base: Checked, seed: int):
        sim = Checked(Run(["check", str(path), "--simulate", str(self.args.walks), "--depth", "60", "--seed",
                           str(seed), "--time-limit", str(self.args.time_limit),
                           "--out", str(work / "sim.json")], timeout=4 * self.args.time_limit + 120))
        if self.unexpected(mid, "simulate", sim.run, (1, 3)):
            return
        extra = sorted(sim.violated - base.violated)
        if not base.complete:
            self.record(mid, "simulate", "inconclusive", "check partial", [base.run, sim.run])
        elif extra:
            self.record(mid, "simulate", "disagree",
                        f"simulation violates {', '.join(extra)}, which the exhausted check holds",
                        [base.run, sim.run])
        else:
            self.record(mid, "simulate", "agree", "", [base.run, sim.run])
        for trace in sim.traces if "replay" in self.compare else ():
            self.replay(mid, trace, None)

    def same(self, mid, compare, base: Checked, other: Checked, props=None):
        """Record whether two complete runs agree on counts and verdicts (on ``props``)."""
        if self.unexpected(mid, compare, other.run, (0, 1, 3)):
            return
        if not (base.complete and other.complete):
            self.record(mid, compare, "inconclusive", "a partial search", [base.run, other.run])
            return
        keep = (lambda v: {p: x for p, x in v.items() if p in props}) if props else (lambda v: v)
        diffs = []
        if props is None and base.counts != other.counts:
            diffs.append(f"counts {base.counts} vs {other.counts}")
        if keep(base.verdicts) != keep(other.verdicts):
            diffs.append(f"verdicts {keep(base.verdicts)} vs {keep(other.verdicts)}")
        self.record(mid, compare, "disagree" if diffs else "agree", "; ".join(diffs), [base.run, other.run])

    def workers(self, mid, path, base):
        if not base.complete:
            self.record(mid, "workers", "skipped", "check partial")
            return
        two = self.check(path, "--workers", "2", "--no-symmetry")
        used = _PROCESSES.search(two.run.out)
        if two.complete and used and used.group(1) == "1":
            # Levels under 800 states are expanded by the owner: nothing to compare.
            self.record(mid, "workers", "skipped", "--workers 2 expanded every level in one process", [two.run])
            return
        self.same(mid, "workers", base, two)

    def symmetry(self, mid, path, base):
        sym = self.check(path, "--workers", "1", "--symmetry")
        if sym.symmetry_off:
            self.record(mid, "symmetry", "skipped", sym.symmetry_off.group(1), [sym.run])
            return
        safety = [p for p in base.verdicts if BY_NAME[p].kind in ("invariant", "transition")]
        self.same(mid, "symmetry", base, sym, props=safety)

    def cluster(self, mid, path, base):
        if not base.complete or base.counts[0] > self.args.cluster_states:
            self.record(mid, "cluster", "skipped", "check partial or over --cluster-states")
            return
        # The cluster's round trips cost more than one process's search: a longer limit.
        limit = 4 * self.args.time_limit
        self.same(mid, "cluster", base, self.check(path, "--cluster", "local:2", "--no-symmetry", limit=limit))

    def tlc(self, mid, path, where, checked: Checked, compare):
        """TLC on the twin: its verdict on the twin's properties, and (when both explored
        everything) its distinct-state count, against ``checked``."""
        if not checked.complete or checked.counts[0] > self.args.tlc_states:
            self.record(mid, compare, "skipped", "check partial or over --tlc-states")
            return
        run = Run(["tla", str(path), "-o", str(where), "--run", "--workers", "1"], timeout=self.args.tlc_timeout)
        if self.unexpected(mid, compare, run, (0, 1)):
            return
        m = _TLC.search(run.out)
        if not m:
            self.record(mid, compare, "error", "no TLC summary", [checked.run, run])
            return
        distinct, verdict = int(m.group(1).replace(",", "")), m.group(2)
        inv, act, _ = split_properties(list(checked.verdicts))
        twin_violated = checked.violated & set(inv + act)
        tlc_violated = set(verdict.removeprefix("violated: ").split(", ")) if verdict.startswith("violated") else set()
        diffs = []
        if verdict == "error":
            diffs.append("TLC reports an error")
        if bool(tlc_violated) != bool(twin_violated) or not tlc_violated <= twin_violated:
            diffs.append(f"TLC violates {sorted(tlc_violated) or 'nothing'}, tiercheck {sorted(twin_violated) or 'nothing'}")
        if not tlc_violated and distinct != checked.counts[0]:
            diffs.append(f"TLC {distinct} distinct states, tiercheck {checked.counts[0]}")
        self.record(mid, compare, "disagree" if diffs else "agree", "; ".join(diffs), [checked.run, run])

    def conform(self, mid, path, work, seed: int):
        run = Run(["conform", "--impl", "reference", "--model", str(path), "--examples", str(self.args.examples),
                   "--steps", "30", "--seed", str(seed), "--out", str(work / "conform")],
                  timeout=self.args.conform_timeout)
        if not self.unexpected(mid, "conform", run, (0, 1)):
            self.record(mid, "conform", "agree" if run.rc == 0 else "disagree",
                        "" if run.rc == 0 else "the reference implementation disagrees with the spec", [run])

    # -- bug variants -----------------------------------------------------------------
    def variant(self, mid, raw, work, name, rng):
        vid = f"{mid}+{name}"
        settled = random_model.with_variant(rng, raw, name, self.refusals, f"{vid}.toml")
        if settled is None:
            self.record(vid, "variant_tlc", "skipped", "the loader refuses the variant on this model")
            return
        vraw = settled[0]
        path = self.out / "models" / f"{vid}.toml"
        path.write_text(random_model.to_toml(vraw))
        self.results.write(json.dumps({"model": vid, "compare": "model", "toml": path.read_text()}) + "\n")
        vwork = work / name
        vwork.mkdir(exist_ok=True)
        checked = self.check(path, "--workers", "1", "--no-symmetry", "--out", str(vwork / "cex.json"))
        if self.unexpected(mid, "variant_tlc", checked.run, (0, 1, 3), variant=name) or not checked.ok:
            return
        self.tlc(vid, path, vwork / "tla", checked, "variant_tlc")
        for trace in checked.traces if "replay" in self.compare else ():
            self.replay(vid, trace, VARIANTS[name])

    def replay(self, mid, trace, variant):
        """A written counterexample replays on the spec and ends in its violation; with a
        variant the reference implementation can switch on, it replays there too, to the
        same violation. `replay` checks the safety properties on every state it reaches,
        so a safety counterexample must stop at its last step naming its property; a
        progress or liveness one (a path, a lasso) must replay to the end."""
        why = violation_missing(trace)
        run = Run(["replay", trace, "--impl", "spec"], timeout=300)
        if not self.unexpected(mid, "replay", run, (0, 1), trace=trace):
            why = why or replay_ends_wrong(trace, run)
            self.record(mid, "replay", "disagree" if why else "agree", why, [run], trace=trace)
        if variant is None or not variant.impl or "replay_impl" not in self.compare:
            return
        run = Run(["replay", trace, "--impl", "reference", "--variant", variant.name], timeout=300)
        if not self.unexpected(mid, "replay_impl", run, (0, 1), trace=trace):
            why = replay_ends_wrong(trace, run)
            self.record(mid, "replay_impl", "disagree" if why else "agree", why, [run], trace=trace)

    # -- the table --------------------------------------------------------------------
    def summary(self, n: int, seconds: float) -> str:
        rows = [f"{n} models (seed {self.args.seed}), {seconds:.0f} s", "",
                f"{'comparison':<12} " + " ".join(f"{o:>12}" for o in OUTCOMES)]
        for c in COMPARISONS:
            rows.append(f"{c:<12} " + " ".join(f"{self.table[c][o]:>12}" for o in OUTCOMES))
        rows += ["", "refusals while drawing (the key dropped or the model drawn again):"]
        rows += [f"  {n:>4}  {kind}" for kind, n in self.refusals.most_common()]
        refused = Counter(r["detail"].split(": ", 2)[-1][:100] for r in self._records() if r.get("outcome") == "refused")
        rows += ["", "engine refusals (exit 2, one line):"]
        rows += [f"  {n:>4}  {kind}" for kind, n in refused.most_common()]
        rows += ["", f"disagreements and errors: {len(self.failures)}"]
        rows += [f"  {f['model']} {f['compare']}: {f['outcome']}: {f['detail']}" for f in self.failures]
        return "\n".join(rows) + "\n"

    def _records(self):
        with open(self.out / "results.jsonl") as f:
            return [json.loads(line) for line in f]


def violation_missing(path) -> str:
    """Why the trace at ``path`` does not end in the violation it names ("" when it does):
    the invariant fails in its last state, the transition property on its last step, a
    lasso's cycle returns to its start state, a progress path ends with an obligation open."""
    from tiercheck.models.replay import lasso_closes, replay
    from tiercheck.models.trace import read_trace
    from tiercheck.models.trace_check import check_stored

    trace = read_trace(path)
    _mf, model, actions, _probes = check_stored(trace)
    prop = BY_NAME.get(trace.prop)
    if prop is None:
        return f"the trace names no known property ({trace.prop!r})"
    if trace.loop_start is not None:
        return lasso_closes(model, actions, trace.loop_start) or ""
    states = replay(model, actions)
    if prop.kind == "invariant":
        return "" if prop.fn(model, states[-1]) else f"{prop.name} holds in the last state"
    if prop.kind == "transition":
        if not actions:
            return "a transition property's trace without a step"
        hit = prop.fn(model, states[-2], actions[-1], states[-1])
        return "" if hit else f"{prop.name} holds on the last step"
    return "" if prop.fn.obligations(model, states[-1]) else f"{prop.name}: no obligation open in the last state"


_STOPPED = re.compile(r"disagrees with the spec at (?:step (\d+)/(\d+)|the initial state)")


def replay_ends_wrong(path, run: Run) -> str:
    """Why a `replay` of the counterexample at ``path`` did not end as it should ("" when
    it did): a safety trace stops at its last step breaking a property (`replay` names the
    first it checks; where the last state breaks several, that may be another than the
    trace's, which ``violation_missing`` checks), another trace replays to its end."""
    from tiercheck.models.trace import read_trace

    prop = BY_NAME[read_trace(path).prop]
    stop = _STOPPED.search(run.out)
    if prop.kind not in ("invariant", "transition"):
        return "" if run.rc == 0 else f"a {prop.kind} trace does not replay to its end: {stop and stop.group(0)}"
    if run.rc == 0:
        return f"replayed to the end without breaking {prop.name}"
    broke = re.search(r"breaks (\w+)", run.out)
    if not broke:
        return "stopped otherwise than by a property: " + run.out.strip().splitlines()[-1][:200]
    if stop and stop.group(1) and stop.group(1) != stop.group(2):
        return f"broke {prop.name} at step {stop.group(1)} of {stop.group(2)}, not the last"
    return ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1, help="the run's seed (model i: random.Random(f'{seed}/{i}'))")
    p.add_argument("--models", type=int, default=20, help="models to draw (default 20)")
    p.add_argument("--start", type=int, default=0, help="first model index (default 0)")
    p.add_argument("--only", type=int, help="only this model index (a reproduction)")
    p.add_argument("--out", required=True, help="folder for results.jsonl, summary.txt, the models and traces")
    p.add_argument("--time-limit", type=float, default=20, help="seconds per `check` (default 20)")
    p.add_argument("--walks", type=int, default=100, help="random walks per simulation (default 100)")
    p.add_argument("--examples", type=int, default=8, help="conformance examples per model (default 8)")
    p.add_argument("--tlc-states", type=int, default=3000, help="TLC on models up to this many states")
    p.add_argument("--tlc-timeout", type=float, default=300)
    p.add_argument("--conform-timeout", type=float, default=300)
    p.add_argument("--cluster-share", type=float, default=0.1, help="share of models also run on a local cluster")
    p.add_argument("--cluster-states", type=int, default=20000)
    p.add_argument("--variant-share", type=float, default=0.5, help="share of models also run with a bug variant")
    p.add_argument("--compare", help="comma-separated comparisons to run (default all; spec_holds always runs)")
    args = p.parse_args(argv)
    fuzz = Fuzz(args)
    t0 = time.monotonic()
    indices = [args.only] if args.only is not None else range(args.start, args.start + args.models)
    for i in indices:
        fuzz.model(i)
    text = fuzz.summary(len(indices), time.monotonic() - t0)
    (fuzz.out / "summary.txt").write_text(text)
    print(text)
    return 1 if fuzz.failures else 0


if __name__ == "__main__":
    sys.exit(main())

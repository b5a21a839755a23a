"""The history campaign: the same campaign, same models, same budgets, on every release.

For each release (oldest first): pick its shim (or skip it, saying why), build its lane
(or skip it, saying why), and run ``campaign`` in the lane's interpreter. Every
disagreement the campaign shrinks is a candidate finding; each one is then replayed on
every release's lane, so the table says for each finding where it shows and where it is
gone. Nothing about upstream's bugs is given to the campaign: it only has the shipped
models, the stateful suite and the transition tours.

    tiercheck sglang history --examples 30 --steps 30 --out docs/findings

writes ``history.md`` (release x finding), ``history.json`` (the verdict of every trace
on every release, which tests/sglang/test_lanes.py replays), ``history-campaign.jsonl``
(every campaign row) and the shrunk traces under ``traces/history/``; logs and the raw
rows go to ``--work``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tiercheck.errors import UserError

from . import lane as lanes
from .shims import select
from .versions import parse

# One budget for every release: the runs of campaign.DEFAULT_RUNS (1 rank in-process,
# 2 gloo ranks), write_back on 3 gloo ranks, prefetch from storage and the MLA single
# writer on 2 gloo ranks (n/a, with the reason, where the release lacks the feature or
# its adapter core does not map it) with the stateful suite, plus the
# transition tours of two 1-rank models without storage (the storage tours hit 20,000
# steps: too long for a nightly job). Every run chooses its actions with the reproducible
# ``index`` rule except prefetch: a prefetch needs a page in L3 and off host, which that
# rule never reaches in 30 x 30 steps (every prefetch action untaken on 0.5.20 - 0.5.23);
# ``coverage`` (same seed, still reproducible) walks the spec's shortest path to it.
HISTORY_RUNS = (
    "sglang/wt-1r", "sglang/wts-1r", "sglang/wt-storage-1r", "sglang/wb-1r", "sglang/wb-storage-1r",
    "sglang/wt-2r@gloo", "sglang/wt-storage-2r@gloo", "sglang/wb-2r@gloo", "sglang/wt-alloc-2r@gloo",
    "sglang/wb-2r:3@gloo", "sglang/wt-prefetch-2r@gloo~coverage", "sglang/wt-storage-mla-2r@gloo",
)
TOURS = ("sglang/wt-1r", "sglang/wb-1r")


def _status(release: str, root: Path, log) -> tuple[str, Path | None]:
    """('ok', python) or (reason to skip, None)."""
    try:
        select(release)
    except UserError as exc:
        return str(exc), None
    try:
        return "ok", lanes.setup(root, release, out=log)
    except UserError as exc:
        return f"lane setup failed: {exc}", None


def run_key(spec: str) -> str:
    """A run as the campaign rows name it: MODEL[:R]@BACKEND[~STRATEGY] (``MODEL[@gloo][~STRATEGY]``
    on the command line; no ``~`` for the default ``index``)."""
    head, _, strategy = spec.partition("~")
    model, _, backend = head.partition("@")
    return f"{model}@{backend or 'lockstep'}" + (f"~{strategy}" if strategy and strategy != "index" else "")


def row_keys(row: dict) -> set[str]:
    """The run keys a saved row answers: its own; an n/a row (the model not driven on that
    release) answers every strategy of its model, since no action was chosen."""
    base = f"{row['model']}@{row['backend']}"
    if row.get("result") == "n/a":
        return {base + "~*"}
    return {run_key(base + "~" + row.get("strategy", "index"))}


def _answers(row: dict, spec: str) -> bool:
    key = run_key(spec)
    return bool({key, key.split("~")[0] + "~*"} & row_keys(row))


def missing_runs(rows: list[dict], runs, tours) -> tuple[list[str], list[str]]:
    """The runs and tours a release's saved rows lack (a campaign cut by its timeout, or
    runs added to the list or given another strategy since): those, and only those, run
    again under --reuse."""
    def lacks(kind, spec):
        return not any(r.get("kind") == kind and _answers(r, spec) for r in rows)

    return [x for x in runs if lacks("conform", x)], [x for x in tours if lacks("tour", x)]


def current_rows(rows: list[dict], runs, tours, rerun=()) -> list[dict]:
    """The saved rows --reuse keeps: those of a run still in the list (a run whose strategy
    changed reruns, its old rows go), minus the ``rerun`` runs' driven rows."""
    def keep(r):
        specs = runs if r.get("kind") == "conform" else tours
        if any(_answers(r, x) for x in rerun) and r.get("result") != "n/a":
            return False
        return any(_answers(r, x) for x in specs)

    return [r for r in rows if keep(r)]


def run_release(py: Path, release: str, work: Path, args, log, keep=(), runs=None, tours=None) -> dict:
    """The campaign on one release, in its lane: rows, seconds. ``keep``: rows of an
    earlier run of this release (--reuse) that ``runs``/``tours`` complete."""
    runs = args.runs if runs is None else runs
    tours = args.tours if tours is None else tours
    out = work / release
    if out.exists() and not keep:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    rows_file = out / f"campaign-{time.strftime('%Y%m%dT%H%M%S')}.jsonl"
    t0 = time.monotonic()
    base = [str(py), "-m", "tiercheck.conformance.sglang.campaign", "--examples", str(args.examples),
            "--steps", str(args.steps), "--seed", str(args.seed), "--out", str(out / "counterexamples"),
            "--json", str(rows_file)]
    calls = [base + ["--no-tours", *runs]] if runs else []
    if tours:
        calls.append(base + ["--no-conform", *tours])
    for cmd in calls:
        print("+ " + " ".join(cmd), file=log, flush=True)
        try:
            _run_group(cmd, args.release_timeout, stdout=log, stderr=subprocess.STDOUT)
        except subprocess.TimeoutExpired:
            print(f"# {release}: campaign timed out after {args.release_timeout} s", file=log, flush=True)
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()] if rows_file.exists() else []
    return {"release": release, "rows": [*keep, *rows], "seconds": round(time.monotonic() - t0, 1)}


def replay_set(traces: list[str]) -> list[dict]:
    """Inside a lane: replay each trace on this release, passing the known disagreements
    the trace records (tiercheck.conformance.distinct); per trace: agrees / disagrees
    (with the signature and step of the first disagreement past those) / unreached (a
    disagreement the trace passes did not happen here, so its later steps cannot be
    taken) / n/a (the model is not driven on this release)."""
    from tiercheck.conformance.distinct import replay_past, signature
    from tiercheck.conformance.sglang import SGLangDriver
    from tiercheck.conformance.sglang.campaign import COLLECTIVE_TIMEOUT
    from tiercheck.models import model_file
    from tiercheck.models.trace import read_trace
    import tomllib

    out = []
    for path in traces:
        tr = read_trace(path)
        cfg = model_file.parse(tomllib.loads(tr.model_toml), path).config
        backend = "gloo" if cfg.ranks > 1 else "lockstep"
        try:
            driver = SGLangDriver(cfg, backend=backend, timeout=COLLECTIVE_TIMEOUT)
        except UserError as exc:
            out.append({"trace": path, "result": "n/a", "message": str(exc)})
            continue
        try:
            res = replay_past(driver, tr.actions, tr.meta.get("passes") or (),
                              expect_disabled=set(tr.meta.get("probes", ())))
        finally:
            driver.close()
        mm = res.mismatch
        row = {"trace": path, "result": "unreached" if res.unreached else "agrees" if mm is None else "disagrees",
               "passed": res.passed}
        if mm is not None:
            row.update(step=mm.step, signature=signature(driver.model, mm, tr.actions),
                       message=f"{mm.kind}: {mm.message.splitlines()[0]}")
        out.append(row)
    return out


def _run_group(cmd, timeout: float, **kw) -> subprocess.CompletedProcess:
    """subprocess.run in its own process group: on timeout the whole group is killed, so
    the gloo rank processes a hung campaign forked do not outlive it."""
    with subprocess.Popen(cmd, start_new_session=True, **kw) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _replay_on(py: Path, traces: list[str], log, timeout: float) -> list[dict]:
    cmd = [str(py), "-m", "tiercheck.conformance.sglang.history", "--replay-set", *traces]
    print("+ " + " ".join(cmd[:4]) + f" ... ({len(traces)} traces)", file=log, flush=True)
    try:
        proc = _run_group(cmd, timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except subprocess.TimeoutExpired:
        return [{"trace": t, "result": "timeout"} for t in traces]
    log.write(proc.stderr[-4000:])
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or len(lines) != len(traces):
        return [{"trace": t, "result": "error", "message": proc.stderr.strip().splitlines()[-1:]} for t in traces]
    return [json.loads(line) for line in lines]


def run_name(row) -> str:
    """A campaign row's run as history.md names it: MODEL[-rR][@gloo] without the folder."""
    return row["model"].split("/")[-1].replace(":", "-r") + ("@gloo" if row["backend"] == "gloo" else "")


def _collect_findings(results: list[dict], traces_dir: Path) -> list[dict]:
    """Every distinct disagreement each run found, its shrunk trace copied under
    traces_dir as <run>-<hash>.json (a trace shrunk to the same bytes on several releases
    is stored once); tour disagreements without a trace."""
    traces_dir.mkdir(parents=True, exist_ok=True)
    found = []
    for res in results:
        for row in res.get("rows", ()):
            run = run_name(row)
            if row.get("kind") == "tour":
                for d in row.get("disagreements", ()):
                    found.append({"release": res["release"], "run": run + " (tour)", "trace": None,
                                  "signature": d.get("signature"), "message": d["message"], "passes": [],
                                  "steps": None, "backend": row["backend"]})
                continue
            if row.get("result") != "disagrees":
                continue
            for f in row.get("findings") or [row]:
                if not f.get("trace"):
                    continue
                src = Path(f["trace"])
                digest = hashlib.sha256(src.read_bytes()).hexdigest()[:8]
                dst = traces_dir / f"{run.replace('@', '-')}-{digest}.json"
                if not dst.exists():
                    shutil.copyfile(src, dst)
                found.append({"release": res["release"], "run": run, "trace": str(dst), "message": f["message"],
                              "signature": f.get("signature"), "passes": f.get("passes", []),
                              "steps": f.get("steps_after_shrink"), "backend": row["backend"]})
    return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tiercheck sglang history", description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    if args.replay_set:
        for row in replay_set(args.replay_set):
            print(json.dumps(row), flush=True)
        return 0
    return run(args)


def add_arguments(p):
    from .versions import RELEASES

    p.add_argument("--releases", nargs="+", default=list(RELEASES), help="releases, oldest first")
    p.add_argument("--runs", nargs="+", default=list(HISTORY_RUNS), help="campaign runs (MODEL[@gloo])")
    p.add_argument("--tours", nargs="*", default=list(TOURS), help="models whose transition tour runs")
    p.add_argument("--examples", type=int, default=30)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--release-timeout", type=float, default=1800.0, help="seconds per campaign call")
    p.add_argument("--out", default="docs/findings", help="history.md and traces/history/ go here")
    p.add_argument("--work", default=".tiercheck/history", help="raw campaign rows and logs")
    p.add_argument("--lanes-dir", help=f"lanes (default: ${lanes.ENV_VAR}, else the user cache)")
    p.add_argument("--jobs", type=int, default=1, help="lanes replaying the findings' traces at once")
    p.add_argument("--replays-per-finding", type=int, default=2,
                   help="how many of each finding's traces (shortest first) every release replays")
    p.add_argument("--reuse", action="store_true",
                   help="keep the campaign rows of the last run (--work): run only the runs a release lacks, "
                        "then redo findings, replays, report")
    p.add_argument("--rerun", nargs="+", default=[], metavar="RUN",
                   help="with --reuse: run these runs (MODEL[@gloo][~STRATEGY]) again on the releases that drive them")
    p.add_argument("--campaign-only", action="store_true",
                   help="stop after the campaigns (results.json in --work); a later --reuse replays and reports")
    p.add_argument("--replay-set", nargs="+", help=argparse.SUPPRESS)


def run(args) -> int:
    root = lanes.lanes_dir(args.lanes_dir)
    work, out = Path(args.work), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    releases = sorted(args.releases, key=parse)
    results, pythons = [], {}
    with open(work / "history.log", "a") as log:
        saved = {r["release"]: r for r in json.loads((work / "results.json").read_text())} if args.reuse else {}

        def save():  # after every release: what ran so far, and the saved releases not reached yet
            done = {r["release"] for r in results}
            keep = [r for rel, r in saved.items() if rel not in done]
            (work / "results.json").write_text(json.dumps(sorted(results + keep, key=lambda r: parse(r["release"])),
                                                          indent=1, default=str))

        for release in releases:
            old = saved.get(release, {})
            if "rows" in old:
                old = {**old, "rows": current_rows(old["rows"], args.runs, args.tours, args.rerun)}
            todo_runs, todo_tours = missing_runs(old.get("rows", ()), args.runs, args.tours)
            if "skipped" in old or ("rows" in old and not todo_runs and not todo_tours):
                results.append(old)  # --reuse: this release's campaign is complete in the last run
                if "skipped" not in old:
                    pythons[release] = lanes.python_of(root, release)
                continue
            t0 = time.monotonic()
            status, py = _status(release, root, log)
            setup_s = round(time.monotonic() - t0, 1)
            if py is None:
                results.append({"release": release, "skipped": status})
                print(f"{release}: skipped ({status})", flush=True)
                save()
                continue
            pythons[release] = py
            if "rows" in old:  # --reuse of a cut campaign: keep its rows, run only what it lacks
                print(f"{release}: reusing {len(old['rows'])} runs, running {todo_runs + todo_tours}", flush=True)
                res = run_release(py, release, work, args, log, keep=old["rows"], runs=todo_runs, tours=todo_tours)
                res["seconds"] = round(res["seconds"] + old.get("seconds", 0), 1)
                res["setup_seconds"] = old.get("setup_seconds", setup_s)
            else:
                res = run_release(py, release, work, args, log)
                res["setup_seconds"] = setup_s
            results.append(res)
            bad = sum(r.get("result") == "disagrees" or bool(r.get("disagreements")) for r in res["rows"])
            print(f"{release}: {len(res['rows'])} runs, {bad} disagree, {res['seconds']} s", flush=True)
            save()
        save()
        if args.campaign_only:
            return 0
        findings = _collect_findings(results, out / "traces" / "history")
        from .history_report import group

        # Each finding's shortest traces (1 rank first), not all of them: every replay on
        # every release imports sglang, and a gloo trace that hangs waits out its timeout.
        traces = [t for g in group(findings) for t in g["traces"][: args.replays_per_finding]]
        # Replays already made on a lane (--reuse) are kept: trace files are named by
        # their content's hash, so the same name is the same trace.
        cache_file = work / "replays.json"
        cache = json.loads(cache_file.read_text()) if args.reuse and cache_file.exists() else {}
        replays = {}
        if traces:  # each release's lane replays the traces; lanes run side by side (--jobs)
            import threading
            from concurrent.futures import ThreadPoolExecutor

            lock = threading.Lock()

            def replay_release(release, py):
                with lock:
                    have = cache.setdefault(release, {})
                    todo = [t for t in traces if have.get(t, {}).get("result") in (None, "timeout", "error")]
                new = _replay_on(py, todo, log, args.release_timeout) if todo else []
                with lock:  # saved as each lane finishes: a stopped run keeps what it replayed
                    have.update((r["trace"], r) for r in new)
                    cache_file.write_text(json.dumps(cache, indent=1))
                    return {t: have[t] for t in traces}

            with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
                futures = {release: pool.submit(replay_release, release, py) for release, py in pythons.items()}
            for release, fut in futures.items():
                replays[release] = fut.result()
    data = {"results": results, "findings": findings, "replays": replays,
            "budget": {"examples": args.examples, "steps": args.steps, "seed": args.seed, "runs": args.runs,
                       "tours": args.tours}}
    (work / "history.json").write_text(json.dumps(data, indent=1, default=str))
    # What tests/sglang/test_lanes.py replays on each lane: trace -> release -> verdict.
    expected = {t: {r: replays[r].get(t, {}).get("result") for r in replays} for t in traces}
    summary = {"budget": data["budget"], "expected": expected,
               "timing": {r["release"]: {k: r.get(k) for k in ("setup_seconds", "seconds", "skipped")}
                          for r in results}}
    (out / "history.json").write_text(json.dumps(summary, indent=1) + "\n")
    with open(out / "history-campaign.jsonl", "w") as fh:  # every campaign row, by release
        for r in results:
            for row in r.get("rows", ()):
                fh.write(json.dumps({"release": r["release"], **{k: v for k, v in row.items() if k != "trace"}},
                                    default=str) + "\n")
    from .history_report import write_report

    write_report(data, out / "history.md")
    print(f"wrote {out / 'history.md'} ({len(findings)} disagreements, {len(pythons)} releases run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

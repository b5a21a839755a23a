"""history.md from a history campaign's results (history.json): release x finding.

A finding is a distinct disagreement (tiercheck.conformance.distinct.signature) the
campaign produced on some release, with every shrunk trace of it. Each cell says what the
finding is on that release:

* **caught**: the campaign itself found it on this release;
* **replays**: the campaign did not find it here within its budget, but one of its
  traces disagrees the same way (same signature: the bug is present);
* **clean**: its traces replay and SGLang agrees with the spec (the bug is absent);
* **unreached**: a disagreement its traces pass does not happen here, so their later
  steps cannot be taken;
* **masked**: its traces stop at another disagreement first;
* **n/a**: the release was skipped (no shim or no lane), or the traces' models cannot be
  driven on it.

The upstream column comes from ``upstream.toml`` next to history.md: written after the
campaign (the campaign never reads it), one table per upstream bug with ``pr``,
``fixed_in`` and ``note``, and ``[alias]`` mapping finding ids to them.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

# Why a spec action can stay untaken on every release (docs/sglang.md, "Not driven").
NOT_DRIVEN = {
    "local_access": "the CP planner is not part of HiCache",
    "lock_request": "request-lifetime locks are not in these models (request_locks = false)",
    "unlock_request": "request-lifetime locks are not in these models (request_locks = false)",
    "prefetch_timeout": "the timeout stop policy is not in these models (prefetch_stop != timeout)",
    "prefetch_read_fails": "failing prefetch reads are not in these models (prefetch_read_fail = false)",
    "prefetch_revoke": "revoke is not in these models (prefetch_revoke = false)",
}
PREFETCH_ACTIONS = ("prefetch_from_storage", "prefetch_io", "check_prefetch_progress")


def _why_untaken(name: str, rows) -> str:
    """Why an action no run of a release took: the prefetch actions say why the release's
    prefetch run was not driven (n/a), everything else NOT_DRIVEN or the budget."""
    if name in PREFETCH_ACTIONS:
        na = [r["message"] for r in rows if "prefetch" in r["model"] and r.get("result") == "n/a"]
        if na:
            return "the prefetch run is n/a here: " + na[0].split(": ", 1)[-1]
    return NOT_DRIVEN.get(name, "not reached within the budget")


def unreached_actions(row: dict) -> list[str]:
    """The actions a stateful run's model reaches in the spec (its bounded breadth-first
    map, tiercheck.conformance.atlas) that the run never took: a run that conforms without
    them has not exercised what its model is there for."""
    from tiercheck.conformance.atlas import atlas_for
    from tiercheck.spec.model import Model

    from .campaign import load_config

    reachable = {name for name, _outcome in atlas_for(Model(load_config(row["model"]))).pairs}
    return sorted(n for n in reachable if not (row.get("actions") or {}).get(n))


def _untaken_label(names: list[str]) -> str:
    """``prefetch`` for all the prefetch actions at once, the other actions by name."""
    whole = set(PREFETCH_ACTIONS) <= set(names)
    rest = [f"`{n}`" for n in names if not (whole and n in PREFETCH_ACTIONS)]
    return ", ".join((["prefetch"] if whole else []) + rest)


def _anchor(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^a-z0-9 _-]", "", text.lower()).replace(" ", "-")


def finding_id(sig: str) -> str:
    """A stable short name for a signature: kind-action-hash."""
    kind, _, rest = sig.partition(" at ")
    action = rest.split(":", 1)[0]
    return f"{kind}-{action}-{hashlib.sha1(sig.encode()).hexdigest()[:6]}"


def _cell(g, release, replays, skipped):
    """What the finding is on one release (module docstring)."""
    if release in skipped:
        return "n/a"
    if release in g["found_on"]:
        return "**caught**"
    rows = [replays.get(release, {}).get(t, {}) for t in g["traces"]]
    if any(r.get("result") == "disagrees" and r.get("signature") == g["signature"] for r in rows):
        return "replays"
    results = {r.get("result") for r in rows}
    if "agrees" in results:
        return "clean"
    if "unreached" in results:
        return "unreached"
    if "disagrees" in results:
        return "masked"
    return "n/a"


def group(findings):
    """One entry per distinct signature: the runs and releases that found it, its traces
    (shortest first)."""
    groups: dict = {}
    for f in findings:
        sig = f.get("signature") or f"{f['run']}: {f['message'][:60]}"
        g = groups.setdefault(sig, {"signature": sig, "runs": [], "traces": [], "found_on": [], "messages": [],
                                    "steps": {}, "passes": {}})
        if f["run"] not in g["runs"]:
            g["runs"].append(f["run"])
        if f["trace"] and f["trace"] not in g["traces"]:
            g["traces"].append(f["trace"])
            g["steps"][f["trace"]] = f["steps"]
            g["passes"][f["trace"]] = f.get("passes") or []
        if f["release"] not in g["found_on"]:
            g["found_on"].append(f["release"])
        g["messages"].append(f["message"])
    out = []
    for g in groups.values():
        g["id"] = finding_id(g["signature"])
        # 1-rank traces first (cheapest to replay), then by length
        g["traces"].sort(key=lambda t: ("gloo" in Path(t).name, g["steps"][t] or 0))
        out.append(g)
    return out


def write_report(data: dict, path: Path) -> None:
    results = data["results"]
    releases = [r["release"] for r in results]
    skipped = {r["release"]: r["skipped"] for r in results if "skipped" in r}
    ran = [r for r in releases if r not in skipped]
    replays = data["replays"]
    upstream_file = path.parent / "upstream.toml"
    upstream = tomllib.loads(upstream_file.read_text()) if upstream_file.exists() else {}
    for fid, target in upstream.pop("alias", {}).items():
        upstream[fid] = dict(upstream.get(target, {}), name=target)
    groups = group(data["findings"])
    b = data["budget"]
    lines = [
        "# SGLang HiCache across releases: what the campaign finds",
        "",
        "Generated by `tiercheck sglang history` (conformance/sglang/history.py) from the shipped",
        "models only: the same runs, the same budget and seed on every release. Nothing about",
        "upstream's bugs is given to the campaign; the upstream column is matched afterwards",
        "(`upstream.toml`, written after the campaign).",
        "",
        f"Budget per release: stateful suite `--examples {b['examples']} --steps {b['steps']} --seed {b['seed']}` "
        f"on {', '.join('`' + r + '`' for r in b['runs'])}; transition tours of "
        f"{', '.join('`' + t + '`' for t in b['tours']) or 'none'}.",
        "",
        "## Releases",
        "",
        "| release | status | lane setup (s) | campaign (s) | runs | runs that disagree | distinct findings |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "skipped" in r:
            lines.append(f"| {r['release']} | skipped: {r['skipped']} | | | | | |")
            continue
        if r.get("no_campaign"):  # the lane replays the findings' traces, no campaign rows
            lines.append(f"| {r['release']} | replays only: {r['no_campaign']} | | | | | |")
            continue
        bad = sum(x.get("result") == "disagrees" or bool(x.get("disagreements")) for x in r["rows"])
        distinct = {f.get("signature") for f in data["findings"] if f["release"] == r["release"]}
        lines.append(f"| {r['release']} | ran | {r.get('setup_seconds', '')} | {r['seconds']} | "
                     f"{len(r['rows'])} | {bad} | {len(distinct)} |")
    lines += ["", "## Runs x releases", "",
              "Stateful runs: distinct disagreements found (steps applied in the search, all rounds);"
              " `conforms, X not reached`: the run agreed but never took X, actions its model's spec"
              " reaches; `~STRATEGY`: the run's action choice (tiercheck.conformance.steering), `index`"
              " when none; tours: disagreeing traces / traces.", ""]
    chosen = {}  # (model, backend) -> the strategy the run list gives it
    for spec in b["runs"]:
        head, _, strategy = spec.partition("~")
        model, _, backend = head.partition("@")
        chosen[(model, backend or "lockstep")] = strategy or "index"
    by_run: dict = {}
    unmapped: dict = {}  # why a run is n/a -> releases
    for r in results:
        for row in r.get("rows", ()):
            # an n/a row chose no action: it is named as the run list names its run
            strategy = row.get("strategy") or (chosen.get((row["model"], row["backend"]), "index")
                                               if row.get("result") == "n/a" else "index")
            name = (f"{row['kind']} `{row['model']}{'@gloo' if row['backend'] == 'gloo' else ''}"
                    f"{'~' + strategy if strategy != 'index' else ''}`")
            if row.get("result") == "n/a":  # the release's adapter core does not map the model
                cell = "n/a"
                unmapped.setdefault(row["message"].split(": ", 1)[-1], []).append(r["release"])
            elif row["kind"] == "conform":
                n = len(row.get("findings") or ()) or (row["result"] == "disagrees")
                cell = f"{n} found ({row['steps']})" if n else f"conforms ({row['steps']})"
                if not n and (missed := unreached_actions(row)):
                    cell = f"conforms ({row['steps']}), {_untaken_label(missed)} not reached"
            else:
                cell = f"{len(row['disagreements'])}/{row['traces']} disagree"
            by_run.setdefault(name, {})[r["release"]] = cell
    lines.append("| run | " + " | ".join(ran) + " |")
    lines.append("|---|" + "---|" * len(ran))
    for name, cells in by_run.items():
        lines.append(f"| {name} | " + " | ".join(cells.get(r, "-") for r in ran) + " |")
    for why, rels in unmapped.items():
        lines.append(f"\nn/a on {', '.join(dict.fromkeys(rels))}: {why}.")
    lines += ["", "Spec actions never taken on a release (all runs together), and why:", ""]
    for r in results:
        if "skipped" in r or r.get("no_campaign"):
            continue
        taken: dict = {}
        for row in r["rows"]:
            for name, n in (row.get("actions") or {}).items():
                taken[name] = taken.get(name, 0) + n
        never = [n for n, k in sorted(taken.items()) if not k]
        why = [f"`{n}` ({_why_untaken(n, r['rows'])})" for n in never]
        lines.append(f"- {r['release']}: {', '.join(why) if why else 'none'}")
    lines += ["", "## Findings x releases", "",
              "One row per distinct disagreement (its signature: the kind of mismatch, the action that "
              "showed it, the spec fields that differ; `(some ranks)`: only some replicas differ). "
              "Each stateful run continues past the disagreements it already found "
              "(tiercheck.conformance.distinct), so a finding behind another one is reported too; its "
              "trace records what it passes. caught: found by the campaign on that release; replays: not "
              "found there within the budget but a trace of it disagrees the same way; clean: the traces "
              "replay and SGLang agrees with the spec; unreached: a disagreement the trace passes does not "
              "happen on that release (the trace's later steps cannot be taken); masked: another "
              "disagreement comes first; n/a: not driven there.", ""]
    if not groups:
        lines.append("No run disagreed on any release.")
    else:
        lines.append("| finding | signature | runs | " + " | ".join(ran) + " | upstream fix |")
        lines.append("|---|---|---|" + "---|" * len(ran) + "---|")
        for g in groups:
            up = upstream.get(g["id"], {})
            fix = (f"{up['name']}: " if up.get("name") else "") + up.get("pr", "")
            if up.get("fixed_in"):
                fix += f" (first in {up['fixed_in']})"
            cells = [_cell(g, r, replays, skipped) for r in ran]
            runs = ", ".join(f"`{r}`" for r in g["runs"])
            lines.append(f"| [{g['id']}](#{_anchor(g['id'])}) | {g['signature']} | {runs} | "
                         + " | ".join(cells) + f" | {fix} |")
        lines += ["", "## Each finding", ""]
        for g in groups:
            up = upstream.get(g["id"], {})
            lines += [f"### {g['id']}", ""]
            lines.append(f"Signature `{g['signature']}`, found by {', '.join(f'`{r}`' for r in g['runs'])} on "
                         f"{', '.join(g['found_on'])}: {g['messages'][0]}")
            lines.append("")
            if up.get("note"):
                lines += [up["note"].strip(), ""]
            for t in g["traces"][:3]:
                rel = Path(t)
                gloo = " --backend gloo" if "gloo" in rel.name else ""
                caught = [r for r in ran if _cell({**g, "traces": [t], "found_on": []}, r, replays, skipped)
                          == "replays"]
                clean = [r for r in ran if replays.get(r, {}).get(t, {}).get("result") == "agrees"]
                on = caught[0] if caught else g["found_on"][0]
                passes = g["passes"].get(t) or []
                past = f", passing {'; '.join(f'`{p}`' for p in passes)}" if passes else ""
                lines.append(f"- [{rel.name}](traces/history/{rel.name}) ({g['steps'][t]} steps{past}). "
                             f"On {on} it disagrees (exit 1): "
                             f"`$(tiercheck lane python sglang=={on}) -m tiercheck replay {rel} "
                             f"--impl sglang{gloo}`")
                if clean:
                    lines.append(f"  On {clean[0]} SGLang agrees with the spec (exit 0): the same command "
                                 f"with `sglang=={clean[0]}`.")
            if len(g["traces"]) > 3:
                lines.append(f"- and {len(g['traces']) - 3} more traces of it: "
                             + ", ".join(f"[{Path(t).name}](traces/history/{Path(t).name})" for t in g["traces"][3:]))
            lines.append("")
    extra = path.parent / "history-notes.md"
    if extra.exists():
        lines += ["", extra.read_text().rstrip()]
    path.write_text("\n".join(lines) + "\n")

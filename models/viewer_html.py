"""`tiercheck show TRACE --html OUT.html`: one self-contained page (inline CSS, JS and SVG,
no network) that draws each rank's radix tree at every step of a trace.

Each node is a box split in two halves, the device copy on top and the host copy below,
coloured by tier state; a released mirror is hatched, a load-back pending node has a
dashed blue frame. Nodes and rank fields that the step changed are outlined in red and
highlighted; nodes and fields in which the ranks differ (the replicas should agree) get a
dashed orange frame and are named above the trees. The page opens at the violating step
(conformance: the failing step; a counterexample: its last state), action labels are
shown in full. Ranks are drawn side by side. Navigation: buttons, slider, the step list,
arrow keys, and ``#step=N`` in the address (which the headless-browser test uses).

The page carries stable data attributes for tests: ``main[data-step]``,
``svg.tree[data-rank][data-nodes]``, ``g.node[data-node][data-dev][data-host][data-changed][data-rankdiff]``,
``tr.rankdiff[data-field]``.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from tiercheck.errors import UserError
from tiercheck.models.trace import Trace
from tiercheck.models.viewer_data import loop_start, model_name, steps


def page_data(trace: Trace) -> dict:
    return {
        "path": trace.path,
        "kind": trace.kind,
        "property": trace.prop,
        "message": trace.message,
        "model": model_name(trace),
        "loop_start": loop_start(trace),
        "steps": steps(trace),
        "focus": focus_step(trace),
    }


def focus_step(trace: Trace) -> int:
    """The step the page opens at: where the implementation disagreed (conformance), else
    the last state of a counterexample (where the property breaks, or the lasso closes);
    a plain trace opens at its initial state."""
    last = len(trace.states) - 1
    failing = trace.meta.get("failing_step")
    if trace.kind == "conformance" and isinstance(failing, int) and not isinstance(failing, bool):
        return max(0, min(last, failing + 1))
    return last if trace.prop else 0


def _script_json(obj) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' can end the element early."""
    text = json.dumps(obj, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(trace: Trace) -> str:
    data = page_data(trace)
    title = f"tiercheck trace: {data['model']}"
    if data["property"]:
        title += f" ({data['property']})"
    return (
        _TEMPLATE.replace("__TITLE__", html.escape(title))
        .replace("__CSS__", _CSS)
        .replace("__JS__", _JS)
        .replace("__DATA__", _script_json(data))
    )


def write(trace: Trace, out) -> Path:
    out = Path(out)
    text = render(trace)
    try:
        if out.parent and not out.parent.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{out}: cannot write: {exc.strerror or exc}") from None
    return out


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>__TITLE__</title>
<style>__CSS__</style>
</head>
<body>
<header>
  <h1 id="title"></h1>
  <div id="message"></div>
  <nav>
    <button id="first" title="first step (Home)">&#x00AB;</button>
    <button id="prev" title="previous step (&#x2190;)">&#x25C0;</button>
    <input id="slider" type="range" min="0" value="0">
    <button id="next" title="next step (&#x2192;)">&#x25B6;</button>
    <button id="last" title="last step (End)">&#x00BB;</button>
    <span id="stepno"></span>
  </nav>
</header>
<div id="body">
  <aside><ol id="steps" start="0"></ol></aside>
  <main id="main" data-step="-1">
    <div id="action"></div>
    <div id="flags"></div>
    <div id="ranks"></div>
    <section id="changes-box"><h3>What changed</h3><ul id="changes"></ul></section>
    <section id="legend"></section>
  </main>
</div>
<script id="trace-data" type="application/json">__DATA__</script>
<script>__JS__</script>
</body>
</html>
"""

_CSS = """
body { font: 13px/1.35 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222; background: #fafafa; }
header { padding: 8px 14px; background: #263238; color: #eceff1; }
header h1 { font-size: 16px; margin: 0 0 4px 0; }
#message { color: #ffcc80; margin-bottom: 6px; font-family: ui-monospace, monospace; font-size: 12px; }
nav { display: flex; align-items: center; gap: 6px; }
nav button { font-size: 14px; padding: 2px 8px; }
#slider { flex: 1; max-width: 520px; }
#stepno { font-family: ui-monospace, monospace; }
#body { display: flex; align-items: flex-start; }
aside { width: 300px; min-width: 240px; max-height: calc(100vh - 90px); overflow-y: auto; border-right: 1px solid #ddd; background: #fff; }
#steps { margin: 0; padding: 6px 6px 6px 38px; font-family: ui-monospace, monospace; font-size: 12px; }
#steps li { padding: 2px 4px; cursor: pointer; border-radius: 3px; white-space: normal; overflow-wrap: anywhere; }
#steps li:hover { background: #eceff1; }
#steps li.current { background: #1e88e5; color: #fff; }
#steps li.cycle { border-left: 3px solid #8e24aa; }
main { flex: 1; padding: 8px 14px; min-width: 0; }
#action { font-size: 15px; font-weight: 600; margin: 4px 0 6px 0; font-family: ui-monospace, monospace; }
#flags .flag { display: inline-block; background: #c62828; color: #fff; padding: 2px 8px; border-radius: 3px; margin: 0 6px 6px 0; }
#flags .loop { background: #8e24aa; }
#ranks { display: flex; flex-wrap: wrap; gap: 12px; }
.rank { background: #fff; border: 1px solid #cfd8dc; border-radius: 6px; padding: 6px 8px; }
.rank h2 { font-size: 14px; margin: 2px 0 4px 0; }
.rank svg { display: block; }
table.fields { border-collapse: collapse; font-family: ui-monospace, monospace; font-size: 11.5px; margin-top: 4px; }
table.fields td { padding: 1px 6px; border-bottom: 1px solid #eee; vertical-align: top; max-width: 360px; overflow-wrap: anywhere; }
table.fields td.k { color: #607d8b; white-space: nowrap; }
table.fields tr.chg td { background: #fff59d; }
table.fields tr.chg td.k { color: #b71c1c; font-weight: 600; }
table.fields tr.rankdiff td { outline: 2px dashed #ef6c00; outline-offset: -2px; }
table.fields tr.rankdiff td.k::after { content: " \2260 other ranks"; color: #e65100; font-weight: 600; }
#flags .flag.rankdiff { background: #ef6c00; }
.removed { color: #b71c1c; font-family: ui-monospace, monospace; font-size: 11.5px; }
#changes { font-family: ui-monospace, monospace; font-size: 12px; margin: 4px 0; padding-left: 18px; }
#changes-box h3, #legend h3 { font-size: 13px; margin: 10px 0 2px 0; }
#legend svg { display: block; }
g.node text { font-family: ui-monospace, monospace; pointer-events: none; }
"""

_JS = r"""
"use strict";
const D = JSON.parse(document.getElementById("trace-data").textContent);
const N = D.steps.length;
const DEV = {absent: "#cfd8dc", resident: "#43a047", loading: "#42a5f5"};
const HOST = {absent: "#f5f5f5", writing: "#ffa726", resident: "#7e57c2"};
const BOX_W = 104, BOX_H = 46, GAP_X = 14, GAP_Y = 30;
const SVGNS = "http://www.w3.org/2000/svg";
let cur = 0;

function el(tag, attrs, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function nodesOf(rank) { return new Map(rank.nodes["#map"].map(([name, n]) => [name, n])); }
function parentPage(page) { const i = page.lastIndexOf("/"); return i < 0 ? null : page.slice(0, i); }
function same(a, b) { return JSON.stringify(a) === JSON.stringify(b); }
function inCycle(i) { return D.loop_start !== null && i > D.loop_start; }

// Children lists of the radix tree (node name -> child names), parents found by page path.
function treeOf(nodes) {
  const owner = new Map();
  for (const [name, n] of nodes) for (const p of n.pages) owner.set(p, name);
  const kids = new Map([["", []]]);
  for (const name of nodes.keys()) kids.set(name, []);
  for (const [name, n] of nodes) {
    const pp = parentPage(n.pages[0]);
    const parent = pp !== null && owner.has(pp) ? owner.get(pp) : "";
    kids.get(parent).push(name);
  }
  for (const list of kids.values()) list.sort();
  return kids;
}

// Tidy layout: leaves take consecutive columns, parents sit over their children.
function layout(kids) {
  const pos = new Map();
  let col = 0, depth = 0;
  (function place(name, d) {
    depth = Math.max(depth, d);
    const ch = kids.get(name) || [];
    if (!ch.length) { pos.set(name, {x: col++, d}); return; }
    ch.forEach(c => place(c, d + 1));
    const xs = ch.map(c => pos.get(c).x);
    pos.set(name, {x: (Math.min(...xs) + Math.max(...xs)) / 2, d});
  })("", 0);
  return {pos, cols: Math.max(col, 1), depth};
}

// What differs between the ranks in one state (the replicas should agree): rank fields
// and nodes (missing on some rank, or with other values).
function rankDiff(st) {
  const fields = new Set(), nodes = new Set();
  if (st.ranks.length < 2) return {fields, nodes};
  const first = st.ranks[0];
  for (const k of Object.keys(first)) {
    if (k !== "nodes" && st.ranks.some(r => !same(r[k], first[k]))) fields.add(k);
  }
  const maps = st.ranks.map(nodesOf);
  const names = new Set(maps.flatMap(m => [...m.keys()]));
  for (const name of names) {
    const v = maps[0].get(name);
    if (maps.some(m => !m.has(name) || !same(m.get(name), v))) nodes.add(name);
  }
  return {fields, nodes};
}

function nodeChanged(before, after) {
  if (!before) return "new";
  return same(before, after) ? "" : "changed";
}

function drawTree(r, rank, prevRank, diff) {
  const nodes = nodesOf(rank);
  const prev = prevRank ? nodesOf(prevRank) : null;
  const kids = treeOf(nodes);
  const {pos, cols, depth} = layout(kids);
  // The root is a small pill at the top; nodes of depth d >= 1 hang below it.
  const ROOT_H = 18, TOP = 6;
  const X = p => 10 + p.x * (BOX_W + GAP_X);
  const Y = p => p.d === 0 ? TOP : TOP + ROOT_H + GAP_Y + (p.d - 1) * (BOX_H + GAP_Y);
  const width = 20 + cols * (BOX_W + GAP_X) - GAP_X;
  const height = depth === 0 ? TOP + ROOT_H + 8 : Y({d: depth}) + BOX_H + 8;
  const svg = el("svg:svg", {width, height, class: "tree", "data-rank": r,
                             "data-nodes": [...nodes.keys()].sort().join(",")});
  const defs = el("svg:defs");
  const pat = el("svg:pattern", {id: "rel" + r, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)"});
  pat.appendChild(el("svg:rect", {width: 6, height: 6, fill: "#ffebee"}));
  pat.appendChild(el("svg:line", {x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#e53935", "stroke-width": 3}));
  defs.appendChild(pat);
  svg.appendChild(defs);
  // Edges first, under the boxes.
  for (const [parent, ch] of kids) for (const c of ch) {
    const a = pos.get(parent), b = pos.get(c);
    const y1 = parent === "" ? Y(a) + ROOT_H : Y(a) + BOX_H;
    svg.appendChild(el("svg:line", {x1: X(a) + BOX_W / 2, y1, x2: X(b) + BOX_W / 2, y2: Y(b), stroke: "#90a4ae", "stroke-width": 1.5}));
  }
  const root = pos.get("");
  const rg = el("svg:g", {class: "root"});
  rg.appendChild(el("svg:rect", {x: X(root) + BOX_W / 2 - 22, y: Y(root), width: 44, height: 18, rx: 9, fill: "#37474f"}));
  rg.appendChild(el("svg:text", {x: X(root) + BOX_W / 2, y: Y(root) + 13, "text-anchor": "middle", fill: "#fff", "font-size": 11}, "root"));
  svg.appendChild(rg);
  for (const [name, n] of nodes) {
    const p = pos.get(name), x = X(p), y = Y(p);
    const changed = prev ? nodeChanged(prev.get(name), n) : "";
    const g = el("svg:g", {class: "node", "data-node": name, "data-dev": n.device, "data-host": n.host,
                           "data-changed": changed, "data-rankdiff": diff.nodes.has(name) ? "1" : "",
                           transform: `translate(${x},${y})`});
    const title = el("svg:title");
    title.textContent = `node ${name}: pages ${n.pages.join(", ")}\ndevice ${n.device}, host ${n.host}` +
      `\nlock_ref ${n.lock_ref}, host_ref_counter ${n.host_ref_counter}, hit_count ${n.hit_count}` +
      (n.load_back_pending ? "\nload_back_pending" : "") + (n.released ? "\nmirror released" : "");
    g.appendChild(title);
    const half = BOX_H / 2;
    g.appendChild(el("svg:rect", {x: 0, y: 0, width: BOX_W, height: half, fill: DEV[n.device] || "#000"}));
    const hostFill = n.released && n.host === "absent" ? `url(#rel${r})` : (HOST[n.host] || "#000");
    g.appendChild(el("svg:rect", {x: 0, y: half, width: BOX_W, height: half, fill: hostFill}));
    const frame = {x: 0, y: 0, width: BOX_W, height: BOX_H, rx: 3, fill: "none", stroke: "#37474f", "stroke-width": 1};
    if (n.load_back_pending) Object.assign(frame, {stroke: "#1565c0", "stroke-width": 2.5, "stroke-dasharray": "5 3"});
    g.appendChild(el("svg:rect", frame));
    if (changed) g.appendChild(el("svg:rect", {x: -4, y: -4, width: BOX_W + 8, height: BOX_H + 8, rx: 5, fill: "none",
                                               stroke: "#e53935", "stroke-width": 3, class: "hl"}));
    if (diff.nodes.has(name)) g.appendChild(el("svg:rect", {x: -8, y: -8, width: BOX_W + 16, height: BOX_H + 16, rx: 7,
                                                           fill: "none", stroke: "#ef6c00", "stroke-width": 2,
                                                           "stroke-dasharray": "6 3", class: "rd"}));
    const light = n.device === "resident" || n.device === "loading";
    g.appendChild(el("svg:text", {x: 5, y: 15, "font-size": 12, "font-weight": 700, fill: light ? "#fff" : "#263238"}, name));
    g.appendChild(el("svg:text", {x: BOX_W - 4, y: 15, "font-size": 10, "text-anchor": "end", fill: light ? "#fff" : "#263238"},
                     `${n.pages.length}p` + (n.load_back_pending ? " LB" : "")));
    const tags = [];
    if (n.lock_ref) tags.push(`L${n.lock_ref}`);
    if (n.host_ref_counter) tags.push(`H${n.host_ref_counter}`);
    if (n.hit_count) tags.push(`hit${n.hit_count}`);
    if (n.released) tags.push("rel");
    const hostLight = n.host === "resident";
    g.appendChild(el("svg:text", {x: 5, y: half + 15, "font-size": 10, fill: hostLight ? "#fff" : "#263238"},
                     `${n.host}${tags.length ? "  " + tags.join(" ") : ""}`));
    svg.appendChild(g);
  }
  return svg;
}

function short(v) {
  if (v && typeof v === "object" && "#set" in v) return "{" + v["#set"].join(", ") + "}";
  return JSON.stringify(v);
}

function drawRank(r, st, prevSt, diff) {
  const rank = st.ranks[r], prevRank = prevSt ? prevSt.ranks[r] : null;
  const box = el("div", {class: "rank", "data-rank": r});
  box.appendChild(el("h2", {}, `rank ${r}`));
  box.appendChild(drawTree(r, rank, prevRank, diff));
  if (prevRank) {
    const now = nodesOf(rank), gone = [...nodesOf(prevRank).keys()].filter(k => !now.has(k));
    if (gone.length) box.appendChild(el("div", {class: "removed"}, "removed: " + gone.join(", ")));
  }
  const t = el("table", {class: "fields"});
  const rows = Object.keys(rank).filter(k => k !== "nodes").map(k => [k, rank[k], prevRank ? prevRank[k] : undefined]);
  rows.push(["store", st.store[r], prevSt ? prevSt.store[r] : undefined]);
  for (const [k, v, old] of rows) {
    const chg = prevSt && !same(v, old);
    const cls = [chg ? "chg" : "", diff.fields.has(k) ? "rankdiff" : ""].filter(Boolean).join(" ");
    const tr = el("tr", cls ? {class: cls, "data-field": k} : {"data-field": k});
    tr.appendChild(el("td", {class: "k"}, k));
    tr.appendChild(el("td", {}, chg ? `${short(old)} \u2192 ${short(v)}` : short(v)));
    t.appendChild(tr);
  }
  box.appendChild(t);
  return box;
}

function drawLegend() {
  const box = document.getElementById("legend");
  box.appendChild(el("h3", {}, "Legend: top half device copy, bottom half host copy"));
  const svg = el("svg:svg", {width: 900, height: 58});
  const items = [["device absent", DEV.absent], ["device resident", DEV.resident], ["device loading", DEV.loading],
                 ["host absent", HOST.absent], ["host writing", HOST.writing], ["host resident", HOST.resident]];
  items.forEach(([label, fill], i) => {
    svg.appendChild(el("svg:rect", {x: 4 + i * 134, y: 4, width: 16, height: 14, fill, stroke: "#37474f"}));
    svg.appendChild(el("svg:text", {x: 24 + i * 134, y: 16, "font-size": 11}, label));
  });
  const defs = el("svg:defs");
  const pat = el("svg:pattern", {id: "relLegend", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)"});
  pat.appendChild(el("svg:rect", {width: 6, height: 6, fill: "#ffebee"}));
  pat.appendChild(el("svg:line", {x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#e53935", "stroke-width": 3}));
  defs.appendChild(pat); svg.appendChild(defs);
  svg.appendChild(el("svg:rect", {x: 4, y: 32, width: 16, height: 14, fill: "url(#relLegend)", stroke: "#37474f"}));
  svg.appendChild(el("svg:text", {x: 24, y: 44, "font-size": 11}, "mirror released"));
  svg.appendChild(el("svg:rect", {x: 138, y: 32, width: 16, height: 14, fill: "none", stroke: "#1565c0", "stroke-width": 2.5, "stroke-dasharray": "5 3"}));
  svg.appendChild(el("svg:text", {x: 158, y: 44, "font-size": 11}, "load-back pending"));
  svg.appendChild(el("svg:rect", {x: 290, y: 32, width: 16, height: 14, fill: "none", stroke: "#e53935", "stroke-width": 3}));
  svg.appendChild(el("svg:text", {x: 310, y: 44, "font-size": 11}, "changed by this step"));
  svg.appendChild(el("svg:text", {x: 450, y: 44, "font-size": 11}, "L lock_ref, H host_ref_counter, hit hit_count, Np pages, LB load-back pending"));
  box.appendChild(svg);
}

function show(i) {
  cur = Math.max(0, Math.min(N - 1, i));
  const s = D.steps[cur], prev = cur > 0 ? D.steps[cur - 1].state : null;
  document.getElementById("main").setAttribute("data-step", cur);
  document.getElementById("action").textContent = `step ${cur}: ${s.action}`;
  document.getElementById("stepno").textContent = `${cur} / ${N - 1}`;
  document.getElementById("slider").value = cur;
  const flags = document.getElementById("flags");
  flags.replaceChildren();
  if (s.state.hung) flags.appendChild(el("span", {class: "flag"}, "hung in " + s.state.hung));
  if (s.state.halted) flags.appendChild(el("span", {class: "flag"}, "halted: " + s.state.halted));
  if (inCycle(cur)) flags.appendChild(el("span", {class: "flag loop"}, `cycle: steps ${D.loop_start + 1}..${N - 1} repeat (state ${N - 1} = state ${D.loop_start})`));
  const diff = rankDiff(s.state);
  if (diff.fields.size || diff.nodes.size) {
    const what = [...diff.fields, ...[...diff.nodes].map(n => "node " + n)];
    flags.appendChild(el("span", {class: "flag rankdiff"}, "ranks differ: " + what.join(", ")));
  }
  const ranks = document.getElementById("ranks");
  ranks.replaceChildren(...s.state.ranks.map((_, r) => drawRank(r, s.state, prev, diff)));
  const ch = document.getElementById("changes");
  ch.replaceChildren(...(s.changes.length ? s.changes : ["initial state"]).map(c => el("li", {}, c)));
  for (const li of document.querySelectorAll("#steps li")) li.classList.toggle("current", +li.dataset.step === cur);
  const li = document.querySelector(`#steps li[data-step="${cur}"]`);
  if (li && li.scrollIntoView) li.scrollIntoView({block: "nearest"});
  try { if (location.hash !== `#step=${cur}`) history.replaceState(null, "", `#step=${cur}`); } catch (e) { /* file: URL */ }
}

function init() {
  let head = `${D.kind}${D.property ? " of " + D.property : ""} \u2014 model ${D.model}`;
  document.getElementById("title").textContent = head;
  document.title = "tiercheck: " + head;
  document.getElementById("message").textContent = D.message || "";
  const list = document.getElementById("steps");
  D.steps.forEach((s, i) => {
    const li = el("li", {"data-step": i, class: "step" + (inCycle(i) ? " cycle" : ""), title: s.changes.join("\n")}, s.action);
    li.addEventListener("click", () => show(i));
    list.appendChild(li);
  });
  const slider = document.getElementById("slider");
  slider.max = N - 1;
  slider.addEventListener("input", () => show(+slider.value));
  document.getElementById("first").onclick = () => show(0);
  document.getElementById("prev").onclick = () => show(cur - 1);
  document.getElementById("next").onclick = () => show(cur + 1);
  document.getElementById("last").onclick = () => show(N - 1);
  document.addEventListener("keydown", e => {
    if (e.key === "ArrowLeft") show(cur - 1);
    else if (e.key === "ArrowRight") show(cur + 1);
    else if (e.key === "Home") show(0);
    else if (e.key === "End") show(N - 1);
  });
  drawLegend();
  const m = /step=(\d+)/.exec(location.hash);
  show(m ? +m[1] : D.focus);
}
init();
"""

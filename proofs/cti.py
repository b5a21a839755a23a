"""Counterexamples to induction, in the spec's own names, replayed by the explicit spec.

A satisfiable obligation gives a z3 model: a configuration, a page universe, a pre-state
satisfying every invariant, an enabled action and its successor that breaks the target.
``extract`` turns it into explicit spec values: a ``Config`` (requests = every page's
token path, so any page may be a request's last page), ``State``s for pre and post
(nodes named by their end page's token path, fields named as in spec/state.py) and the
``Action``. The explicit spec then replays the step: its successor must be the post-state
(the two semantics agree) and the explicit property must fail on it (for spec
properties; strengthening invariants have no explicit counterpart).
"""

from __future__ import annotations

from typing import Dict, List

import z3

from ..spec.action import act
from ..spec.config import Config
from ..spec.durable import tracks_lru
from ..spec.model import Model
from ..spec.prefetch_end import tracks_flags
from ..spec.properties import BY_NAME as SPEC_PROPERTIES
from ..spec.state import DEV_NAMES, HOST_NAMES, live_nodes
from .config import FLAGS
from .encode.cp_planner import order_into_state
from .encode.durable import dlru_into_state
from .encode.host_eviction import host_order_into_state
from .sym import const, model_value
from .translate import rv_values, values_to_state
from .universe import token_paths

FAULT_FLAGS = ("partial_storage", "store_loss", "alloc_asymmetry", "registry_skew")


def _ranks(su, model):
    """Distinct ranks of the model: (representative handle) per rank, rank 0 first."""
    space = su.ctx.space
    reps, seen = [], {}
    order = [space.r0] + [c for c in space.consts if not c.eq(space.r0)]
    for h in order:
        v = model.eval(h, model_completion=True)
        key = str(v)
        if key not in seen:
            seen[key] = len(reps)
            reps.append(h)
    return reps, seen


def _config(su, model, n_ranks, paths) -> Config:
    cfg = su.ctx.cfg
    val = lambda x: model_value(model, const(x))
    faults = frozenset(f for f in FAULT_FLAGS if val(getattr(cfg, f)))
    return Config(
        ranks=n_ranks,
        requests=tuple(paths),
        device_pages=val(cfg.device_pages),
        host_pages=val(cfg.host_pages),
        policy=cfg.policy_of(model),
        storage=val(cfg.storage),
        prefetch=val(cfg.prefetch),
        mirror_release=val(cfg.mirror),
        duplicate_reclaim=val(cfg.dupr),
        single_writer=val(cfg.single_writer),
        faults=faults,
        host_free_target=val(cfg.host_free_target),
        fail_close_after=val(cfg.fail_close_after),
        digest_bits=cfg.digest_bits,
        prefetch_stop="timeout" if val(cfg.timeout) else ("wait_complete" if val(cfg.wait_complete) else "best_effort"),
        prefetch_revoke=val(cfg.revoke),
        prefetch_read_fail=val(cfg.read_fail),
        request_locks=val(cfg.request_locks),
        insert_evicts=val(cfg.insert_evicts),
        load_back_evicts=val(cfg.load_back_evicts),
        victim_order="lru" if val(cfg.lru) else "path",
        page_size=2 if val(cfg.paged) else 1,
        durable_capacity=val(cfg.durable_capacity),
        refresh_rounds=val(cfg.refresh_rounds),
        cp_planner=val(cfg.cp),
        cp_lanes=val(cfg.cp_lanes),
        max_lock=1 << 30,
        variants=cfg.variants,
        slots=cfg.slots,
    )


def _action(su, model, reps, seen, m):
    params = {}
    for k, v in su.step.params.items():
        if k == "fail":
            failing = tuple(i for i, h in enumerate(reps) if z3.is_true(model.eval(const(v(h)), model_completion=True)))
            if failing:
                params["fail"] = failing
        elif k == "rank":
            params["rank"] = seen[str(model.eval(v, model_completion=True))]
        else:
            params[k] = model_value(model, v)
    return act(su.step.name, **params)


def extract(su, model, target: str, action: str) -> Dict:
    reps, seen = _ranks(su, model)
    parent = su.ctx.uni.concrete_parent(model)
    paged = model_value(model, const(su.ctx.cfg.paged))
    paths = token_paths(parent, 2 if paged else 1)
    cfg = _config(su, model, len(reps), paths)
    m = Model(cfg)
    req_of_end = lambda e: e  # requests are the pages' paths, in page order
    pre_vals = [rv_values(model, su.pre.rank(h), cfg.host_pages) for h in reps]
    post_vals = [rv_values(model, su.post.rank(h), cfg.host_pages) for h in reps]
    hung = lambda s: model_value(model, const(s.hung))
    halted = lambda s: model_value(model, const(s.halted))
    out = {"target": target, "action": action, "config": _config_dict(cfg), "ranks": len(reps)}
    post = values_to_state(post_vals, hung(su.post), halted(su.post), req_of_end, tracks_flags(cfg))
    if action == "init":
        out.update(step="init", pre=None, post=render_state(m, post))
        out["explicit"] = _explicit_invariant(m, target, post)
        return out
    pre = values_to_state(pre_vals, hung(su.pre), halted(su.pre), req_of_end, tracks_flags(cfg))
    pre = order_into_state(su.ctx, lambda x: model_value(model, const(x)), reps, pre)  # the CP planner's order
    pre = host_order_into_state(su.ctx, lambda x: model_value(model, const(x)), reps, pre)  # evict_host's LRU
    if tracks_lru(cfg):  # the durable LRU's order and ages
        pre = dlru_into_state(su.ctx, lambda x: model_value(model, const(x)), reps, pre)
    a = _action(su, model, reps, seen, m)
    if cfg.slots:  # the device half is not in the bounded encoding: packed, and the successor's
        from .encode.host_slots import with_device_half

        pre, post = with_device_half(m, pre, a, post)
    out.update(step=str(a), action_json=a.to_json(), pre=render_state(m, pre), post=render_state(m, post))
    out["explicit"] = replay(m, pre, a, post, target)
    out["_states"] = (m, pre, a, post)
    return out


def replay(m, pre, a, post, target) -> Dict:
    """What the explicit spec says about the same step."""
    res = {}
    try:
        t = m.next_state(pre, a)
    except Exception as exc:  # an encoding state the explicit spec cannot even step
        return {"successor": f"explicit spec raised {exc.__class__.__name__}: {exc}"}
    if t is None:
        res["successor"] = "explicit spec: action not enabled"
        return res
    # the access orders are not encoded state (encode.host_eviction.victim_keys,
    # encode.cp_planner.planner_keys, encode.durable.lru_view): the successor is compared
    # without them
    orders = lambda st: st._replace(ranks=tuple(r._replace(clock=(), lru=(), dlru=()) for r in st.ranks))
    res["successor"] = "same" if orders(t) == orders(post) else "differs"
    from .host_slots import NAME as HOST_SLOTS

    prop = SPEC_PROPERTIES.get("slot_ownership" if target == HOST_SLOTS else target)
    if prop is not None:
        try:
            msg = prop.fn(m, post) if prop.kind == "invariant" else prop.fn(m, pre, a, post)
        except Exception as exc:
            msg = f"(evaluation raised {exc.__class__.__name__}: {exc})"
        res["property"] = msg
    return res


def _explicit_invariant(m, target, s) -> Dict:
    prop = SPEC_PROPERTIES.get(target)
    if prop is None or prop.kind != "invariant":
        return {}
    return {"property": prop.fn(m, s)}


def _config_dict(cfg: Config) -> Dict:
    return {
        "ranks": cfg.ranks,
        "pages": [list(p) for p in cfg.requests],
        "policy": cfg.policy,
        "device_pages": cfg.device_pages,
        "host_pages": cfg.host_pages,
        "storage": cfg.storage,
        "prefetch": cfg.prefetch,
        "mirror_release": cfg.mirror_release,
        "duplicate_reclaim": cfg.duplicate_reclaim,
        "single_writer": cfg.single_writer,
        "faults": sorted(cfg.faults),
        "host_free_target": cfg.host_free_target,
        "fail_close_after": cfg.fail_close_after,
        "prefetch_stop": cfg.prefetch_stop,
        "prefetch_revoke": cfg.prefetch_revoke,
        "prefetch_read_fail": cfg.prefetch_read_fail,
        "request_locks": cfg.request_locks,
        "insert_evicts": cfg.insert_evicts,
        "load_back_evicts": cfg.load_back_evicts,
        "victim_order": cfg.victim_order,
        "durable_capacity": cfg.durable_capacity,
        "page_size": cfg.page_size,
        "refresh_rounds": cfg.refresh_rounds,
        "cp_planner": cfg.cp_planner,
        "cp_lanes": cfg.cp_lanes,
        **({"slots": True} if cfg.slots else {}),
        "variants": sorted(cfg.variants),
    }


# --- rendering in the spec's names --------------------------------------------------------


def render_state(m, s) -> Dict:
    name = m.name
    page = m.page_name

    def span(a, b):
        try:
            return f"{page(a)}..{page(b)}" if a != b else page(b)
        except (IndexError, TypeError):
            return f"{a}..{b}"

    ranks = []
    for r, rs in enumerate(s.ranks):
        nodes = {}
        for e in live_nodes(rs):
            n = rs.nodes[e]
            nodes[name(e)] = {
                "start": _safe(page, n.start), "dev": _enum(DEV_NAMES, n.dev), "host": _enum(HOST_NAMES, n.host),
                "lock": n.lock, "href": n.href, "hits": n.hits, "lbp": n.lbp, "rel": n.rel,
            }
        ranks.append({
            "nodes": nodes,
            "owner": {page(p): (_safe(name, o) if o >= 0 else None) for p, o in enumerate(rs.owner) if o >= 0},
            "dev_free": rs.dev_free,
            "host_free": rs.host_free,
            "durable": [page(p) for p in range(m.pages.count) if rs.durable >> p & 1],
            "store": [page(p) for p in range(m.pages.count) if s.store[r] >> p & 1],
            "wq": [span(a, b) for a, b in rs.wq], "wdone": rs.wdone,
            "lq": [span(a, b) for a, b in rs.lq], "ldone": rs.ldone,
            "sq": [span(a, b) for a, b in rs.sq],
            "sdone": [{"reported": x.reported, "actual": x.actual} for x in rs.sdone],
            "pq": [{"req": _safe(page, m.pages.request_pages[q[0]][-1]) if 0 <= q[0] < len(m.pages.request_pages) else q[0],
                    "anchor": _safe(name, q[1]), "k": q[2], "n": q[3], "pdone": d,
                    **({"pflags": rs.pflags[i]} if rs.pflags else {})}
                   for i, (q, d) in enumerate(zip(rs.pq, rs.pdone))],
            "relq": list(rs.relq),
            **({"hslot": {page(p): x for p, x in enumerate(rs.hslot) if x >= 0},
                "hfree": [x for x in range(m.cfg.host_pages) if rs.hfree >> x & 1],
                "pslots": [list(x) for x in rs.pslots], "rslots": [list(x) for x in rs.rslots]}
               if m.cfg.slots else {}),
            **({"running": [{"req": r, "locked": _safe(name, e)} for r, e in rs.running]} if rs.running else {}),
            "plan": [_safe(name, e) for e in rs.plan], "mismatch": rs.mismatch, "closed": rs.closed,
            "dups": [_safe(name, e) for e in rs.dups], "digest": [_safe(name, e) for e in rs.digest],
        })
    return {"ranks": ranks, "hung": s.hung, "halted": s.halted}


def _safe(fn, x):
    try:
        return fn(x)
    except (IndexError, TypeError):
        return str(x)


def _enum(names, v):
    return names[v] if isinstance(v, int) and 0 <= v < len(names) else str(v)


def format_cti(cti: Dict) -> List[str]:
    """Text lines: the configuration, the step, the pre-state and what the step changed."""
    lines = []
    c = cti["config"]
    feats = [f for f in ("storage", "prefetch", "mirror_release", "duplicate_reclaim", "single_writer") if c[f]]
    lines.append(
        f"config: {c['ranks']} rank(s), pages {', '.join('/'.join(map(str, p)) for p in c['pages'])}; "
        f"{c['policy']}; device_pages {c['device_pages']}, host_pages {c['host_pages']}; "
        f"{' '.join(feats) or 'no features'}; faults {c['faults'] or '-'}; host_free_target "
        f"{c['host_free_target']}, fail_close_after {c['fail_close_after']}; variants {c['variants'] or '-'}"
        + "".join(f"; {k} {c[k]}" for k in ("page_size", "victim_order", "prefetch_stop", "durable_capacity",
                                           "refresh_rounds", "cp_planner", "cp_lanes", "slots") if k in c)
    )
    if "forest" in cti:
        f = cti["forest"]
        lines.append(f"forest: {f['pages']} pages, parents {f['parent']} (a finite model of the unbounded "
                     f"encoding: one rank's tree; pools and queues are not part of it)")
    if cti.get("pre") is None:
        lines.append("initial state:")
        lines += _state_lines(cti["post"])
    else:
        lines.append("pre-state (satisfies every invariant):")
        lines += _state_lines(cti["pre"])
        lines.append(f"step: {cti['step']}")
        lines.append("post-state changes:")
        lines += ["  " + x for x in diff_states(cti["pre"], cti["post"])] or ["  (none)"]
    if "slots" in cti:
        for when in ("pre", "post"):
            sl = cti["slots"][when]
            lines.append(f"device slots {when}: " + ", ".join(f"page {p} -> slot {x}" for p, x in sl["owner"].items())
                         + f"; free {sl['free']}")
    for when, q in (cti.get("queues") or {}).items():  # no_use_after_free's page relations (epr_obligations)
        lines.append(f"copies in flight {when}: " + "; ".join(f"{k} {v}" for k, v in q.items()))
    ex = cti.get("explicit") or {}
    if "successor" in ex:
        lines.append(f"explicit spec replay: successor {ex['successor']}")
    if "property" in ex:
        lines.append(f"explicit property {cti['target']}: {ex['property'] or 'holds (!)'}")
    return lines


def _state_lines(st: Dict) -> List[str]:
    out = []
    for r, rs in enumerate(st["ranks"]):
        nodes = "; ".join(
            f"{n} [start {f['start']}, dev {f['dev']}, host {f['host']}, lock {f['lock']}, href {f['href']}, "
            f"hits {f['hits']}{', lbp' if f['lbp'] else ''}{', rel' if f['rel'] else ''}]"
            for n, f in rs["nodes"].items()
        ) or "no nodes"
        out.append(f"  rank {r}: {nodes}")
        rest = {k: v for k, v in rs.items() if k not in ("nodes", "owner") and v not in ([], {}, 0, False)}
        rest.setdefault("dev_free", rs["dev_free"])
        rest.setdefault("host_free", rs["host_free"])
        out.append("          " + ", ".join(f"{k} {v}" for k, v in rest.items()))
    if st["hung"] or st["halted"]:
        out.append(f"  hung {st['hung']!r}, halted {st['halted']!r}")
    return out


def diff_states(a: Dict, b: Dict) -> List[str]:
    out = []
    for r, (x, y) in enumerate(zip(a["ranks"], b["ranks"])):
        for n in sorted(set(x["nodes"]) | set(y["nodes"])):
            u, v = x["nodes"].get(n), y["nodes"].get(n)
            if u is None:
                out.append(f"rank {r}: + node {n} {v}")
            elif v is None:
                out.append(f"rank {r}: - node {n}")
            else:
                ch = [f"{k} {u[k]}->{v[k]}" for k in v if u[k] != v[k]]
                if ch:
                    out.append(f"rank {r}: node {n}: " + ", ".join(ch))
        for k in x:
            if k in ("nodes", "owner"):
                continue
            if x[k] != y[k]:
                out.append(f"rank {r}: {k} {x[k]} -> {y[k]}")
    for k in ("hung", "halted"):
        if a[k] != b[k]:
            out.append(f"{k}: {a[k]!r} -> {b[k]!r}")
    return out

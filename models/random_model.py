"""Random valid model files, for differential testing of tiercheck's engines
(benchmarks/random_models.py).

``draw(rng)`` draws a small model: every key a model file accepts ([model]: each constant
of spec/config.py, options and faults included; [check]: properties, symmetry), sized so
that an exhaustive check usually ends in seconds (1-3 ranks, one to three requests of one
to three pages with shared prefixes, pools of 0-4 pages). ``settle`` loads it through the
model loader; a one-line refusal that names a key the draw set drops that key and loads
again, any other refusal draws again, and every refusal is counted. The same ``rng``
state gives the same model: seed a ``random.Random`` per model.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Callable, Dict, Optional

from tiercheck.errors import UserError
from tiercheck.models import model_file
from tiercheck.spec.config import CONSTANTS, FAULTS, POLICIES, PREFETCH_STOPS, VICTIM_ORDERS

# Properties a model file checks only when it names them (no default selects them).
ON_REQUEST = ("lock_release", "eviction_progress_fair", "host_channel_fair")


def _maybe(rng, p: float) -> bool:
    return rng.random() < p


def _requests(rng, m) -> list:
    """One to three requests of one to three pages; half of the later ones extend or
    branch off an earlier one (a shared prefix: shared pages, a split)."""
    size = m.get("page_size", 1)
    pages = []
    for _ in range(rng.randint(1, 3)):
        n = rng.randint(1, 3)
        if pages and _maybe(rng, 0.5):
            base = rng.choice(pages)
            keep = rng.randint(0, min(len(base), n))
            req = base[:keep] + [rng.randint(1, 4) for _ in range(n - keep)]
        else:
            req = [rng.randint(1, 4) for _ in range(n)]
        if req not in pages:
            pages.append(req)
    # page_size > 1: a page is page_size copies of its token; a later request may change
    # one token, so that a divergence falls inside a page (matching stops there), and
    # may end in a partial page (never cached).
    out = []
    for k, req in enumerate(pages):
        tokens = [t for page in req for t in [page] * size]
        if size > 1 and k and _maybe(rng, 0.3):
            tokens[rng.randrange(len(tokens))] = 5
        if size > 1 and _maybe(rng, 0.2):
            tokens.append(rng.randint(1, 4))
        if tokens not in out:
            out.append(tokens)
    return out


def _flag(p: float, needs: Callable[[dict], bool] = lambda m: True):
    return lambda rng, m: True if needs(m) and _maybe(rng, p) else None


def _int(p: float, lo: int, hi: int, needs: Callable[[dict], bool] = lambda m: True):
    return lambda rng, m: rng.randint(lo, hi) if needs(m) and _maybe(rng, p) else None


def _choice(p: float, values, needs: Callable[[dict], bool] = lambda m: True):
    return lambda rng, m: rng.choice(values) if needs(m) and _maybe(rng, p) else None


def _storage(m) -> bool:
    return bool(m.get("storage"))


def _prefetch(m) -> bool:
    return bool(m.get("prefetch"))


# What a fault needs; a drawn fault ignores it one time in ten (the loader's refusal).
_FAULT_NEEDS = {"partial_storage": _storage, "store_loss": _storage,
                "registry_skew": lambda m: bool(m.get("duplicate_reclaim"))}


def _faults(rng, m) -> Optional[list]:
    names = [f for f in sorted(FAULTS) if _maybe(rng, 0.2)
             and (_FAULT_NEEDS.get(f, lambda m: True)(m) or _maybe(rng, 0.1))]
    return names or None


# Drawn in this order (later keys look at earlier ones). A drawer returns None to leave
# the key out (its default). tests/models/test_random_model.py checks that every
# constant of spec/config.py has a drawer, so a new constant is drawn too.
DRAWERS: Dict[str, Callable] = {
    "page_size": _choice(0.2, (2, 3)),
    "ranks": lambda rng, m: rng.choice((1, 1, 2, 2, 3)),
    "requests": _requests,
    "device_pages": lambda rng, m: rng.randint(1, 4),
    "host_pages": lambda rng, m: rng.randint(0, 4),
    "policy": lambda rng, m: rng.choice(POLICIES),
    "storage": _flag(0.5),
    "prefetch": _flag(0.4, _storage),
    "mirror_release": _flag(0.4, lambda m: _storage(m) and m["policy"] != "write_back"),
    "duplicate_reclaim": _flag(0.4, lambda m: m["policy"] == "write_back"),
    "single_writer": _flag(0.2, _storage),
    "cp_planner": _flag(0.15),
    "cp_lanes": _int(0.5, 2, 3, lambda m: m.get("cp_planner")),
    "faults": _faults,
    "host_free_target": _int(0.3, 0, 3),
    "fail_close_after": _int(0.1, 1, 3),
    "digest_bits": _int(0.1, 2, 8),
    "prefetch_stop": _choice(0.5, PREFETCH_STOPS, _prefetch),
    "prefetch_revoke": _flag(0.3, _prefetch),
    "prefetch_read_fail": _flag(0.3, _prefetch),
    "durable_capacity": _int(0.25, 1, 3, _storage),
    "refresh_rounds": _int(0.2, 1, 2, _storage),
    "max_lock": _int(0.15, 1, 4),
    "variants": lambda rng, m: None,  # the correct protocol; benchmarks/random_models.py adds one
    "backup_chain": _flag(0.035),
    "evict_host_shortfall": _flag(0.035),
    "backup_path_lock": _flag(0.035),
    "storage_per_node": _flag(0.035, _storage),
    "lbp_write_back_only": _flag(0.035),
    "settled_duplicates": _flag(0.035),
    "wb_drop_unbacked": _flag(0.035),
    "load_back_threshold": _int(0.035, 2, 3),
    "prefetch_at_hit": _flag(0.1, _prefetch),
    "victim_order": _choice(0.25, VICTIM_ORDERS),
    "slots": _flag(0.2),
    "request_locks": _flag(0.2),
    "insert_evicts": _flag(0.2),
    "load_back_evicts": _flag(0.2),
}


def draw(rng) -> dict:
    """A raw model-file dict ({"model": ..., "check": ...}); not yet validated."""
    m: dict = {"description": "random model (tiercheck.models.random_model)"}
    for key, drawer in DRAWERS.items():
        v = drawer(rng, m)
        if v is not None:
            m[key] = v
    check: dict = {}
    if _maybe(rng, 0.15):
        check["symmetry"] = True
    return {"model": m, "check": check} if check else {"model": m}


def to_toml(raw: dict) -> str:
    """The dict as model-file TOML (the subset of TOML the drawn values need)."""
    lines = []
    for table in ("model", "check"):
        if table not in raw:
            continue
        lines.append(f"[{table}]")
        for key, v in raw[table].items():
            lines.append(f"{key} = {_value(v)}")
        lines.append("")
    return "\n".join(lines)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "[" + ", ".join(_value(x) for x in v) + "]"


_KEY = re.compile(r": (model|check)\.(\w+): ")


def refusal_kind(message: str) -> str:
    """A refusal message without its path and values: what the summary counts."""
    m = _KEY.search(message)
    if not m:
        return message.split(": ", 1)[-1][:80]
    rest = message[m.end():]
    return f"{m.group(1)}.{m.group(2)}: " + re.sub(r"\d+", "N", rest)[:70]


def settle(rng, refusals: Counter, path: str = "<random>", tries: int = 50):
    """(raw dict, loaded ModelFile): a drawn model the loader accepts. Each refusal is
    counted in ``refusals`` by ``refusal_kind``; the key it names is dropped when the draw
    set it (the named constraint then holds by default), else the model is drawn again."""
    raw = draw(rng)
    extra = rng.choice(ON_REQUEST) if _maybe(rng, 0.15) else None
    msg = ""
    for _ in range(tries):
        try:
            mf = model_file.parse(model_file.loads(to_toml(raw), path), path)
        except UserError as exc:
            msg = str(exc)
            refusals[refusal_kind(msg)] += 1
            m = _KEY.search(msg)
            table, key = (m.group(1), m.group(2)) if m else (None, None)
            if table and key in raw.get(table, {}) and key not in ("requests", "ranks", "policy"):
                del raw[table][key]
                if not raw[table]:
                    del raw[table]
            else:
                raw = draw(rng)
            continue
        if extra is None or extra in mf.properties:
            return raw, mf
        # Also check a property no default selects (refused where it does not apply).
        raw.setdefault("check", {})["properties"] = mf.properties + [extra]
        extra = None
    raise RuntimeError(f"no valid model after {tries} draws (last refusal: {msg})")


# Keys of a variant's shipped model that stay drawn: the workload and the pools.
_SHAPE = ("name", "description", "requests", "device_pages", "host_pages", "variants")


def with_variant(rng, raw: dict, name: str, refusals: Counter, path: str = "<random>", tries: int = 20):
    """(raw dict, ModelFile) of a model with bug variant ``name`` switched on, or None
    when the loader refuses every try. Three mixes, so that the bug is reachable more often
    than on an arbitrary model: four times in ten the variant's shipped model with each
    other key of the drawn model added at even odds; three times the drawn model with the
    shipped model's settings (every key but the requests and the pools; the larger rank
    count); three times the drawn model as it is. [check] is left out (the default
    properties of the result). Refusals are counted and handled as in ``settle``."""
    from tiercheck.spec.variants import VARIANTS

    shipped = model_file.load(VARIANTS[name].model).raw["model"]
    mix = rng.random()
    if mix < 0.4:
        m = {k: v for k, v in shipped.items() if k != "name"}
        for key, value in raw["model"].items():
            if key not in m and key not in _SHAPE and rng.random() < 0.5:
                m[key] = value
    else:
        m = dict(raw["model"])
        for key, value in shipped.items() if mix < 0.7 else ():
            if key not in _SHAPE:
                m[key] = max(value, m.get("ranks", 1)) if key == "ranks" else value
    m["variants"] = [name]
    out = {"model": m}
    for _ in range(tries):
        try:
            return out, model_file.parse(model_file.loads(to_toml(out), path), path)
        except UserError as exc:
            msg = str(exc)
            refusals[refusal_kind(msg)] += 1
            found = _KEY.search(msg)
            key = found.group(2) if found and found.group(1) == "model" else None
            if key not in m or key in ("requests", "variants"):
                return None
            del m[key]
    return None


__all__ = ["DRAWERS", "ON_REQUEST", "draw", "to_toml", "settle", "with_variant", "refusal_kind"]

"""TOML model files: the constants of one bounded model and what to check on it.

    [model]                      # the spec's constants (tiercheck.spec.config.Config)
    ranks = 2
    requests = [[1, 2], [1, 3]]  # each request: its page tokens; shared prefixes share pages
    device_pages = 3
    host_pages = 2
    policy = "write_through"     # write_through | write_through_selective | write_back
    storage = true
    mirror_release = true
    faults = ["partial_storage"]
    variants = []                # bug variants to switch on (tiercheck.spec.variants)

    [check]
    properties = ["no_ghost", "host_channel"]   # default: every property that applies
    expect_violation = "host_channel"           # for variant models: what must fail
    symmetry = false

Every error names the file and the key and is one line; the CLI exits 2 on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from tiercheck.errors import UserError
from tiercheck.inputs import MODEL_BYTES, read_text
from tiercheck.spec.config import CONSTANTS, FAULTS, POLICIES, PREFETCH_STOPS, VICTIM_ORDERS, Config
from tiercheck.spec.properties import BY_NAME, default_properties, evictions_can_finish
from tiercheck.spec.variants import VARIANTS

from tiercheck.toml_compat import tomllib

LIBRARY = Path(__file__).resolve().parent / "library"

# Size caps (the error names the cap): beyond these no exhaustive check ends in useful time.
MAX_REQUESTS = 16
MAX_PAGES = 64

# Validation of the [model] table, from the Config fields (spec/config.py CONSTANTS).
_INT_KEYS = {c.name: c.bounds for c in CONSTANTS.values() if c.bounds}
_BOOL_KEYS = tuple(c.name for c in CONSTANTS.values() if c.type == "bool")
_MODEL_KEYS = set(_INT_KEYS) | set(_BOOL_KEYS) | {
    "name", "description", "requests", "policy", "victim_order", "prefetch_stop", "faults", "variants",
}
_CHECK_KEYS = {"properties", "expect_violation", "symmetry", "max_states", "slow"}


@dataclass
class ModelFile:
    path: str
    name: str
    description: str
    config: Config
    properties: List[str]
    expect_violation: Optional[str] = None
    symmetry: bool = False
    max_states: Optional[int] = None
    slow: bool = False  # left out of `tiercheck suite` and the default tests unless asked
    raw: dict = field(default_factory=dict, repr=False)


class _Err:
    def __init__(self, path):
        self.path = path

    def __call__(self, key, msg):
        return UserError(f"{self.path}: {key}: {msg}")


def resolve(path_or_name: str) -> Path:
    """A path, or the name of a shipped model (``wt-mirror-2r`` or ``variants/host-starvation``)."""
    p = Path(path_or_name)
    if p.exists():
        return p
    for candidate in (LIBRARY / f"{path_or_name}.toml", LIBRARY / path_or_name):
        if candidate.exists():
            return candidate
    raise UserError(f"{path_or_name}: no such model file (and no shipped model of that name)")


def load(path_or_name: str) -> ModelFile:
    path = resolve(path_or_name)
    return parse(loads(read_text(path, "model file", MODEL_BYTES), str(path)), str(path))


def loads(text: str, where: str) -> dict:
    """TOML text as a dict; malformed or absurdly nested text is a one-line UserError."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:
        raise UserError(f"{where}: not valid TOML: nested too deeply") from None


def parse(raw: dict, path: str = "<model>") -> ModelFile:
    err = _Err(path)
    for key in raw:
        if key not in ("model", "check"):
            raise err(key, "unknown table (expected [model] and optionally [check])")
    if not isinstance(raw.get("model"), dict):
        raise err("[model]", "missing table")
    model = raw["model"]
    check = raw.get("check", {})
    if not isinstance(check, dict):
        raise err("[check]", "must be a table")
    for key in model:
        if key not in _MODEL_KEYS:
            raise err(f"model.{key}", f"unknown key (known: {', '.join(sorted(_MODEL_KEYS))})")
    for key in check:
        if key not in _CHECK_KEYS:
            raise err(f"check.{key}", f"unknown key (known: {', '.join(sorted(_CHECK_KEYS))})")

    kwargs = {}
    for key, (lo, hi) in _INT_KEYS.items():
        if key in model:
            v = model[key]
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise err(f"model.{key}", f"must be an integer in [{lo}, {hi}], got {v!r}")
            kwargs[key] = v
    for key in _BOOL_KEYS:
        if key in model:
            if not isinstance(model[key], bool):
                raise err(f"model.{key}", f"must be true or false, got {model[key]!r}")
            kwargs[key] = model[key]
    if "requests" not in model:
        raise err("model.requests", "missing (a list of requests, each a list of page tokens)")
    reqs = model["requests"]
    if not isinstance(reqs, list) or not reqs or not all(
        isinstance(r, list) and r and all(isinstance(t, int) and not isinstance(t, bool) for t in r)
        for r in reqs
    ):
        raise err("model.requests", "must be a non-empty list of non-empty lists of integers")
    if len(reqs) > MAX_REQUESTS:
        raise err("model.requests", f"{len(reqs)} requests, over the cap of {MAX_REQUESTS}")
    if len({tuple(r[: k + 1]) for r in reqs for k in range(len(r))}) > MAX_PAGES:
        raise err("model.requests", f"more than {MAX_PAGES} distinct pages (the cap)")
    kwargs["requests"] = tuple(tuple(r) for r in reqs)
    if "policy" in model:
        if model["policy"] not in POLICIES:
            raise err("model.policy", f"{model['policy']!r} is not one of {', '.join(POLICIES)}")
        kwargs["policy"] = model["policy"]
    if "victim_order" in model:
        if model["victim_order"] not in VICTIM_ORDERS:
            raise err("model.victim_order", f"{model['victim_order']!r} is not one of {', '.join(VICTIM_ORDERS)}")
        kwargs["victim_order"] = model["victim_order"]
    if "prefetch_stop" in model:
        if model["prefetch_stop"] not in PREFETCH_STOPS:
            raise err("model.prefetch_stop", f"{model['prefetch_stop']!r} is not one of {', '.join(PREFETCH_STOPS)}")
        kwargs["prefetch_stop"] = model["prefetch_stop"]
    for key, known in (("faults", FAULTS), ("variants", VARIANTS)):
        if key in model:
            v = model[key]
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise err(f"model.{key}", "must be a list of names")
            for x in v:
                if x not in known:
                    raise err(f"model.{key}", f"unknown name {x!r} (known: {', '.join(sorted(known))})")
            kwargs[key] = frozenset(v)
    cfg = Config(**kwargs)
    _check_consistent(cfg, err)

    props = check.get("properties")
    if props is None:
        props = default_properties(cfg)
    elif not isinstance(props, list) or not all(isinstance(x, str) for x in props):
        raise err("check.properties", "must be a list of property names")
    elif not props:
        raise err("check.properties", "is empty (leave it out to check every property that applies)")
    for x in props:
        if x not in BY_NAME:
            known = ", ".join(BY_NAME)
            raise err("check.properties", f"unknown property {x!r} (known: {known})")
    channel = [x for x in ("host_channel", "host_channel_fair") if x in props]
    if channel:
        largest = max(cfg.pages_of(r) for r in cfg.requests)
        if cfg.host_free_target < largest:
            raise err(
                "model.host_free_target",
                f"is {cfg.host_free_target}, but {channel[0]} needs it >= the longest request "
                f"({largest} pages): mirror release only releases up to the target, so a larger "
                f"waiting node could never be admitted",
            )
    progress = [x for x in ("eviction_progress", "eviction_progress_fair") if x in props]
    if progress and not evictions_can_finish(cfg):
        largest = max(cfg.pages_of(r) for r in cfg.requests)
        raise err(
            "model.host_pages",
            f"is {cfg.host_pages}, but {progress[0]} under write_back needs it >= the longest request "
            f"({largest} pages): a node is evicted only after its backup, so a larger node could "
            f"never leave the device",
        )
    expect = check.get("expect_violation")
    if expect is not None and not isinstance(expect, str):
        raise err("check.expect_violation", f"must be one property name (a string), got a {type(expect).__name__}")
    if expect is not None and expect not in BY_NAME:
        raise err("check.expect_violation", f"unknown property {expect!r}")
    if expect is not None and expect not in props:
        raise err("check.expect_violation", f"{expect!r} is not among the checked properties")
    sym = check.get("symmetry", False)
    if not isinstance(sym, bool):
        raise err("check.symmetry", "must be true or false")
    slow = check.get("slow", False)
    if not isinstance(slow, bool):
        raise err("check.slow", "must be true or false")
    max_states = check.get("max_states")
    if max_states is not None and (not isinstance(max_states, int) or max_states < 1):
        raise err("check.max_states", "must be a positive integer")
    name = model.get("name", Path(path).stem)
    if not isinstance(name, str):
        raise err("model.name", "must be a string")
    return ModelFile(
        path=path,
        name=name,
        description=str(model.get("description", "")),
        config=cfg,
        properties=list(props),
        expect_violation=expect,
        symmetry=sym,
        max_states=max_states,
        slow=slow,
        raw=raw,
    )


def _check_consistent(cfg: Config, err) -> None:
    if cfg.mirror_release and (cfg.write_back or not cfg.storage):
        raise err("model.mirror_release", "needs storage = true and a write_through policy")
    if cfg.duplicate_reclaim and not cfg.write_back:
        raise err("model.duplicate_reclaim", "needs policy = \"write_back\"")
    if cfg.prefetch and not cfg.storage:
        raise err("model.prefetch", "needs storage = true")
    if cfg.single_writer and not cfg.storage:
        raise err("model.single_writer", "needs storage = true")
    if cfg.slots and cfg.prefetch_at_hit:
        raise err("model.prefetch_at_hit", "is not modelled with slots = true (prefetched slots refilling host copies)")
    if len({len(r) for r in cfg.requests}) and max(len(r) for r in cfg.requests) > 16:
        raise err("model.requests", "a request longer than 16 pages is out of reach for exhaustive checking")
    if min(cfg.pages_of(r) for r in cfg.requests) < 1:
        raise err("model.requests", f"a request shorter than page_size ({cfg.page_size} tokens) caches no page")
    shortest = min(cfg.pages_of(r) for r in cfg.requests)
    if shortest > cfg.device_pages:
        # insert needs device room for the request's pages (CP lanes split the pool the way
        # a request's pages split, so an empty pool that holds them holds each lane's share).
        raise err("model.device_pages", f"is {cfg.device_pages}, but the shortest request caches {shortest} pages: "
                  f"no request ever fits the device pool, so nothing can happen (one state)")
    for fault in ("partial_storage", "store_loss"):
        if fault in cfg.faults and not cfg.storage:
            raise err("model.faults", f"{fault!r} needs storage = true")
    if "registry_skew" in cfg.faults and not cfg.duplicate_reclaim:
        raise err("model.faults", "'registry_skew' needs duplicate_reclaim = true")


def dump(mf: ModelFile) -> str:
    """The model back as TOML (for generated suites and the ITF #meta)."""
    lines = config_lines(mf.config, mf.name, mf.description)
    lines += ["", "[check]", f"properties = {_toml_value(mf.properties)}"]
    if mf.expect_violation:
        lines.append(f'expect_violation = "{mf.expect_violation}"')
    if mf.symmetry:
        lines.append("symmetry = true")
    return "\n".join(lines) + "\n"


def config_lines(cfg: Config, name: str, description: str = "") -> List[str]:
    lines = ["[model]", f"name = {_toml_str(name)}"]
    if description:
        lines.append(f"description = {_toml_str(description)}")
    for c in CONSTANTS.values():
        v = getattr(cfg, c.name)
        if c.name != "requests" and v == c.default:
            continue
        lines.append(f"{c.name} = {_toml_value(v)}")
    return lines


def config_toml(cfg: Config, name: str = "model", description: str = "") -> str:
    """A model file for ``cfg`` with the default properties."""
    lines = config_lines(cfg, name, description)
    lines += ["", "[check]", f"properties = {_toml_value(default_properties(cfg))}"]
    return "\n".join(lines) + "\n"


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, (frozenset, set)):
        v = sorted(v)
    return "[" + ", ".join(_toml_value(x) for x in v) + "]"

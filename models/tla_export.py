"""A TOML model as a ready-to-run TLC model of the hand-written TLA+ twin (tla/HiCache.tla).

TLC 2.15's .cfg accepts only numbers, strings, booleans and model values on the right of
``=``, so sequences and sets (requests, page paths, faults, variants) are defined as
operators in a small ``MC.tla`` that EXTENDS HiCache and bound with ``<-`` in ``MC.cfg``
(the pattern the TLA+ Toolbox uses). The page universe is numbered here exactly as
spec/config.py build_pages numbers it, and HiCacheConfig.tla ASSUMEs that numbering.
"""

from __future__ import annotations

import shutil
from pathlib import Path
import importlib.resources
from typing import Dict, List, Optional, Tuple

from tiercheck.errors import UserError
from tiercheck.spec.config import CONSTANTS, UNMODELLED, build_pages, changed
from tiercheck.spec.properties import BY_NAME
from tiercheck.spec.variants import VARIANTS

# The modules are package data of tiercheck.tla (the repository's tla/ folder), so they are
# found in an editable install and in a wheel alike.
TLA_DIR = Path(str(importlib.resources.files("tiercheck.tla")))
MODULES = ("HiCache.tla", "HiCacheTree.tla", "HiCacheConfig.tla")
MC_NAME = "MC"

MAX_TLC_DIGEST_BITS = 30  # TLC 2.15 integers are 32-bit (HiCacheConfig ASSUMEs this)

# The twin's CONSTANTS in HiCache.tla's order: the Config fields it models (spec/config.py,
# ``twin``), with the page universe numbered here right after the requests.
TWIN_FIELDS = frozenset(c.name for c in CONSTANTS.values() if c.twin)
ORDER = [x for c in CONSTANTS.values() if c.twin
         for x in ((c.twin, "PagePaths") if c.name == "requests" else (c.twin,))]


def refuse_options(cfg, where: str = "model") -> None:
    """UserError when ``cfg`` sets a field or a bug variant the TLA+ twin does not model
    (spec/config.py ``twin``, spec/variants.py ``twin``): the twin models the seeds'
    protocol only, and such a model would be checked against a different protocol
    without notice."""
    for v in sorted(cfg.variants):
        if not VARIANTS[v].twin:
            raise UserError(f"{where}: variant {v} is not in the TLA+ twin (tla/HiCache.tla does not model it)")
    for u in UNMODELLED:
        if u.twin and u.applies(cfg):
            raise UserError(f"{where}: option {u.option} is not in the TLA+ twin (tla/HiCache.tla: {u.twin})")
    for name in changed(cfg, lambda c: not c.twin):
        value, default = getattr(cfg, name), CONSTANTS[name].default
        raise UserError(
            f"{where}: option {name} = {tla_value(value).lower()} is not in the TLA+ twin "
            f"(tla/HiCache.tla models the default protocol only; default {tla_value(default).lower()})"
        )


def tla_value(v) -> str:
    """A Python constant as a TLA+ expression (tuples/lists -> sequences, sets -> sets)."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (frozenset, set)):
        return "{" + ", ".join(tla_value(x) for x in sorted(v)) + "}"
    if isinstance(v, (tuple, list)):
        return "<<" + ", ".join(tla_value(x) for x in v) + ">>"
    raise TypeError(f"no TLA+ value for {v!r}")


def _uses_digests(cfg) -> bool:
    """Does any wire digest take part in a comparison (mirror-release plans, the
    negated-pair-overflow arithmetic)? Otherwise the width never matters."""
    mirror = cfg.mirror_release and cfg.storage and not cfg.write_back
    return mirror or cfg.has("negated-pair-overflow")


def constants(cfg) -> Tuple[Dict[str, str], Dict[str, str]]:
    """(scalar constants for the .cfg, operator definitions for MC.tla), in CONSTANTS order."""
    refuse_options(cfg)
    pages = build_pages(cfg.requests, cfg.page_size)
    bits = cfg.digest_bits
    if bits > MAX_TLC_DIGEST_BITS:
        if _uses_digests(cfg):
            raise UserError(
                f"model.digest_bits: {bits} is wider than TLC's 32-bit integers allow "
                f"(at most {MAX_TLC_DIGEST_BITS} when digests are compared)"
            )
        bits = MAX_TLC_DIGEST_BITS  # never used by this configuration
    scalars, defs = {}, {"PagePaths": tla_value(pages.paths)}
    for c in CONSTANTS.values():
        if not c.twin:
            continue
        value = bits if c.name == "digest_bits" else getattr(cfg, c.name)
        if isinstance(value, (tuple, frozenset)):  # sequences and sets: operators in MC.tla
            defs[c.twin] = tla_value(value)
        else:
            scalars[c.twin] = tla_value(value)
    return scalars, {n: defs[n] for n in ORDER if n in defs}


def split_properties(names) -> Tuple[List[str], List[str], List[str]]:
    """(state invariants, action properties, names TLC does not check) of a property list:
    the twin defines the properties whose record says ``twin`` (spec/properties.py); the
    progress and liveness ones are graph properties of tiercheck's own."""
    kind = {n: p.kind for n, p in BY_NAME.items() if p.twin}
    inv = [n for n in names if kind.get(n) == "invariant"]
    act = [n for n in names if kind.get(n) == "transition"]
    rest = [n for n in names if n not in kind]
    return inv, act, rest


def render(mf, properties: Optional[List[str]] = None) -> Tuple[str, str]:
    """The text of MC.tla and MC.cfg for a loaded model file."""
    props = list(mf.properties if properties is None else properties)
    refuse_options(mf.config, str(mf.path))
    scalars, defs = constants(mf.config)
    inv, act, rest = split_properties(props)
    mc = [
        f"---- MODULE {MC_NAME} ----",
        f"\\* Generated by `tiercheck tla` from {mf.path} (model {mf.name}).",
        "EXTENDS HiCache",
        "",
    ]
    mc += [f"MC_{name} == {value}" for name, value in defs.items()]
    mc += ["", "===="]
    cfg = [
        f"\\* Generated by `tiercheck tla` from {mf.path} (model {mf.name}).",
        "\\* Run: java -XX:+UseParallelGC -cp tla2tools.jar tlc2.TLC -workers 2 -deadlock MC.tla",
        "\\* (-deadlock: states without successors, e.g. a halted group, are not errors.)",
        "CONSTANTS",
    ]
    for name in ORDER:
        cfg.append(f"    {name} = {scalars[name]}" if name in scalars else f"    {name} <- MC_{name}")
    cfg += ["", "INIT Init", "NEXT Next"]
    if inv:
        cfg += ["", "INVARIANT"] + [f"    {n}" for n in inv]
    if act:
        cfg += ["", "PROPERTY"] + [f"    {n}" for n in act]
    if rest:
        cfg += ["", f"\\* Checked by tiercheck only (graph properties): {', '.join(rest)}"]
    return "\n".join(mc) + "\n", "\n".join(cfg) + "\n"


def export(mf, out_dir, properties: Optional[List[str]] = None) -> List[Path]:
    """Write MC.tla, MC.cfg and a copy of the TLA+ modules into ``out_dir``."""
    missing = [m for m in MODULES if not (TLA_DIR / m).is_file()]
    if missing:
        raise UserError(f"{TLA_DIR}: TLA+ modules missing ({', '.join(missing)})")
    mc_text, cfg_text = render(mf, properties)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for m in MODULES:
            shutil.copyfile(TLA_DIR / m, out / m)
            written.append(out / m)
        (out / f"{MC_NAME}.tla").write_text(mc_text)
        (out / f"{MC_NAME}.cfg").write_text(cfg_text)
    except OSError as exc:
        raise UserError(f"{out}: cannot write: {exc.strerror or exc}") from None
    return written + [out / f"{MC_NAME}.tla", out / f"{MC_NAME}.cfg"]

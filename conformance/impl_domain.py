"""The reference implementation's configuration domain against the spec's.

Every conformance run builds its HiCacheConfig through the refinement's ``impl_config``,
so no run ever hands the implementation a value the spec does not have. A user does. Two
checks, by probing ``HiCacheConfig`` one field at a time:

- Boundary: for every integer constant of the spec with model-file bounds (lo, hi), the
  values ``impl_config`` gives the implementation field it maps to, for lo..lo+2, are
  accepted, and no other value of lo-2..lo+2 (or None) is: a value the spec has no
  configuration for (durable capacity 0, which the spec spells "unbounded") is refused.
- Types: a value of the wrong type for the field's annotation (a string for a number, a
  float or a boolean for an int, a number for a switch, NaN or infinity) is refused.
- Durations: the float fields (the prefetch timer's seconds) accept 0 and positive
  values below and above 1, and refuse negative ones.

Refused means a UserError (one line for the user), never another exception.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace

from tiercheck.errors import UserError
from tiercheck.impl.hicache.config import HiCacheConfig
from tiercheck.spec.config import CONSTANTS, Config

from .reference import impl_config


def _outcome(name: str, value) -> str:
    """"ok", "refused", or the name of the exception HiCacheConfig(name=value) raised."""
    try:
        HiCacheConfig(**{name: value})
    except UserError:
        return "refused"
    except Exception as exc:  # noqa: BLE001 - any other exception is the finding
        return f"raised {type(exc).__name__}"
    return "ok"


def _image(spec_field: str, lo: int, hi: int) -> dict:
    """impl field -> the values impl_config gives it for the spec's lo..lo+2 (integers only)."""
    base = impl_config(Config())
    images = [impl_config(replace(Config(), **{spec_field: v})) for v in range(lo, min(hi, lo + 2) + 1)]
    out = {}
    for f in dataclasses.fields(HiCacheConfig):
        vals = {getattr(got, f.name) for got in images}
        if vals != {getattr(base, f.name)} and all(x is None or type(x) is int for x in vals):
            out[f.name] = vals  # the field this constant maps to (an integer field)
    return out


def boundary_problems() -> list:
    out = []
    for c in CONSTANTS.values():
        if not c.bounds:
            continue
        lo, hi = c.bounds
        for impl_field, image in sorted(_image(c.name, lo, hi).items()):
            for probe in [*range(lo - 2, lo + 3), None]:
                want = "ok" if probe in image else "refused"
                got = _outcome(impl_field, probe)
                if got != want:
                    out.append(f"HiCacheConfig({impl_field}={probe!r}) {got}, but the spec's {c.name} in "
                               f"{lo}..{hi} maps to {sorted(image, key=repr)} near {lo}: want {want}")
    return out


def _wrong_values(annotation: str) -> list:
    kinds = {k.strip() for k in annotation.split("|")}
    if "int" in kinds:
        return ["7", 1.5, True, math.nan]
    if "float" in kinds:
        return ["7", True, math.nan, math.inf, -math.inf]
    if "bool" in kinds:
        return ["false", 0, 1.0]
    if "str" in kinds:
        return [7, True]
    return []


def type_problems() -> list:
    out = []
    for f in dataclasses.fields(HiCacheConfig):
        for value in _wrong_values(str(f.type)):
            got = _outcome(f.name, value)
            if got != "refused":
                out.append(f"HiCacheConfig({f.name}={value!r}) {got}: a {f.type} field must refuse it "
                           f"with a UserError")
    return out


# The float fields are the prefetch timer's seconds (seed 004's prefetch_timeout_base,
# _per_ki_token, _per_page): any finite number >= 0, zero included (a timer that fires at
# once); the spec has no such constant (its timer is an action), so the domain is the
# seed's. Probed on both sides of 0 and of 1.
DURATIONS_OK = (0, 0.0, 0.25, 1, 2.5)
DURATIONS_REFUSED = (-0.25, -1, -2.5)


def duration_problems() -> list:
    out = []
    for f in dataclasses.fields(HiCacheConfig):
        if "float" not in str(f.type):
            continue
        for value in DURATIONS_OK + DURATIONS_REFUSED:
            want = "ok" if value in DURATIONS_OK else "refused"
            got = _outcome(f.name, value)
            if got != want:
                out.append(f"HiCacheConfig({f.name}={value!r}) {got}: a timer's seconds must be a finite "
                           f"number >= 0 (want {want})")
    return out


def problems() -> list:
    """One line per configuration the implementation takes or refuses against the spec."""
    return boundary_problems() + type_problems() + duration_problems()

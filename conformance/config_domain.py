"""The configuration domain through the refinement mapping: the reference implementation
accepts every model constant the spec accepts and refuses every one the spec refuses.

The spec's domain of an integer constant is the ``bounds`` of its declaration
(spec/config.py; models/model_file.py refuses a model file's value outside them, or a
value that is not an integer, with "model.KEY: must be ..."). The implementation's is
HiCacheConfig's validation (impl/hicache/config.py), reached through the same mapping
every conformance run uses (conformance/reference.impl_config). For every such constant
the mapping passes on, values around the domain's edges and values of the wrong type are
put to both sides, one constant at a time on a base model the spec accepts; a probe the
spec refuses for another reason (a cross-key consistency check) is left out, as is a
constant the implementation's configuration does not carry (the rank count is the
group's, not the configuration's; max_lock bounds the spec's state space only).

Above a bound the spec's domain is the model file's size cap for exhaustive checking
(``constant(bounds=...)``: "the range a model file may give an integer"), not a value the
protocol forbids, so there only the implementation's acceptance of the bound itself is
checked. Where the implementation is deliberately wider than the spec below a bound it
is listed in WIDER with the reason.
"""

from __future__ import annotations

from dataclasses import replace

from tiercheck.errors import UserError
from tiercheck.models import model_file
from tiercheck.spec.config import CONSTANTS, Config

from .reference import impl_config

# Models the spec accepts (storage on); a probe goes to the first whose consistency
# checks let it through (one page for device_pages = 1, eight tokens for page_size = 8).
BASES = ({"requests": [[1, 2]], "storage": True}, {"requests": [[1]], "storage": True},
         {"requests": [list(range(1, 9))], "storage": True, "device_pages": 8})
# (constant, value) -> why the implementation accepts what the spec refuses.
WIDER = {
    ("fail_close_after", 0): "HiCacheConfig takes any non-negative count; 0 closes a rank at its first "
                             "mismatch, as 1 does (storage_path.py: closed once mismatch >= fail_close_after, "
                             "checked only after a mismatch)",
}


def domain_keys():
    """(name, (lo, hi)) of every bounded integer constant of the spec."""
    return [(c.name, c.bounds) for c in CONSTANTS.values() if c.bounds]


def probes(lo: int, hi: int):
    """Values put to both sides: the edges, one past the lower one, and wrong types."""
    out = [lo - 1, lo, lo + 1, hi, -1, True, lo + 0.5, str(lo)]
    return list(dict.fromkeys((type(v), v) for v in out))


def spec_verdict(key: str, value, base=None):
    """True: the spec accepts ``key = value`` on ``base`` (default: the first of BASES
    whose other checks let it through); False: its domain refuses it; None: refused for
    another reason on every base (not a domain probe)."""
    for b in (BASES if base is None else (base,)):
        try:
            model_file.parse({"model": {**b, key: value}}, "<domain>")
        except UserError as exc:
            if f"model.{key}: must be" in str(exc):
                return False
            continue
        return True
    return None


def base_for(key: str, value) -> dict:
    """The first base the spec takes ``key = value`` on (the first base when none does)."""
    return next((b for b in BASES if spec_verdict(key, value, b) is not None), BASES[0])


def impl_verdict(key: str, value, base=None):
    """(accepted, the implementation's configuration or the refusal's text); accepted is
    None when the implementation crashes (anything but a UserError)."""
    cfg: Config = model_file.parse({"model": dict(base or BASES[0])}, "<domain>").config
    try:
        return True, impl_config(replace(cfg, **{key: value}))
    except UserError as exc:
        return False, str(exc)
    except Exception as exc:  # noqa: BLE001 -- bad input must be a one-line UserError (docs/errors.md)
        return None, f"{type(exc).__name__}: {exc}"


def carried(key: str, lo: int, hi: int) -> bool:
    """Whether the implementation's configuration depends on ``key`` at all."""
    seen = {repr(impl_verdict(key, v)[1]) for v in {lo, min(lo + 1, hi), hi}}
    return len(seen) > 1


def problems() -> list:
    """One line per probe where the two sides disagree ([] when they agree on all)."""
    out = []
    for key, (lo, hi) in domain_keys():
        if not carried(key, lo, hi):
            continue
        for _t, value in probes(lo, hi):
            spec = spec_verdict(key, value)
            if spec is None:
                continue
            if isinstance(value, int) and not isinstance(value, bool) and value > hi:
                continue  # the model file's size cap, not the protocol's domain
            ok, what = impl_verdict(key, value, base_for(key, value))
            if ok is None:
                out.append(f"{key} = {value!r}: the implementation crashes instead of a one-line error ({what})")
            elif spec and not ok:
                out.append(f"{key} = {value!r}: the spec accepts it, the implementation refuses it ({what})")
            elif not spec and ok and (key, value) not in WIDER:
                out.append(f"{key} = {value!r}: the spec refuses it, the implementation accepts it")
    return out

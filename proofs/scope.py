"""What the proofs cover: the seeds' protocol with its features, faults and bug variants.

Derived from the spec's records: a Config field whose ``proofs`` metadata is off
(spec/config.py: the options of other HiCache versions, the CP load-back planner) and a
variant whose ``proof`` says it is out of scope (spec/variants.py) are refused with one
line rather than checked against the wrong transition relation.
"""

from __future__ import annotations

from ..errors import UserError
from ..spec.config import CONSTANTS, changed
from ..spec.properties import BY_NAME as PROPERTIES
from ..spec.variants import LIVENESS_ONLY as _LIVENESS, OUT_OF_SCOPE, VARIANTS

# Config fields the encoding does not model.
OPTIONS = tuple(c.name for c in CONSTANTS.values() if not c.proofs)
# Variants whose bug lives in code the encoding does not cover, and why.
OUT_OF_SCOPE_VARIANTS = {v.name: v.proof_note() for v in VARIANTS.values() if v.proof.startswith(OUT_OF_SCOPE)}
# Variants with only a liveness symptom: no safety obligation can fail.
LIVENESS_ONLY = {
    v.name: f"its symptom is {v.expect} ({PROPERTIES[v.expect].kind}, property {PROPERTIES[v.expect].number}); "
    "the inductive proofs cover safety only"
    for v in VARIANTS.values() if v.proof == _LIVENESS
}


# Values of encoded fields that the encoding does not model (spec features newer than it):
# (when refused, the option as the error names it, why, the spec actions only it enables:
# proofs/encode/actions.py encodes those as never enabled).
OUT_OF_SCOPE_VALUES = (
    (lambda c: c.prefetch_stop == "timeout", 'prefetch_stop = "timeout"',
     "the encoding's vote has best_effort and wait_complete only, and no prefetch_timeout step",
     ("prefetch_timeout",)),
)


def options_set(cfg) -> list:
    return changed(cfg, lambda c: not c.proofs)


def refuse_out_of_scope(cfg) -> None:
    opts = options_set(cfg)
    if opts:
        raise UserError(f"the z3 encoding covers the seeds' protocol only; option(s) {', '.join(opts)} are out of scope")
    for refused, option, why, _ in OUT_OF_SCOPE_VALUES:
        if refused(cfg):
            raise UserError(f"the z3 encoding covers the seeds' protocol only; option {option} is out of scope ({why})")
    for v in sorted(cfg.variants):
        if v in OUT_OF_SCOPE_VARIANTS:
            raise UserError(f"variant {v!r} is out of scope for the z3 encoding: {OUT_OF_SCOPE_VARIANTS[v]}")


def check_variant(name: str, unbounded: bool = True) -> None:
    if name not in VARIANTS:
        raise UserError(f"unknown variant {name!r} (known: {', '.join(sorted(VARIANTS))})")
    if name in OUT_OF_SCOPE_VARIANTS:
        raise UserError(f"variant {name!r} is out of scope for the z3 encoding: {OUT_OF_SCOPE_VARIANTS[name]}")
    if VARIANTS[name].proof_unbounded_only and not unbounded:
        raise UserError(f"variant {name!r} changes what only the page-sorted encoding models: run with --unbounded")

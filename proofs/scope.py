"""What the proofs cover: the seeds' protocol with its features, faults and bug variants.

Derived from the spec's records: a Config field whose ``proofs`` metadata is off
(spec/config.py: the options of other HiCache versions, the CP load-back planner) and a
variant whose ``proof`` says it is out of scope (spec/variants.py) are refused with one
line rather than checked against the wrong transition relation.
"""

from __future__ import annotations

from ..errors import UserError
from ..spec.config import CONSTANTS, UNMODELLED, changed
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


def options_set(cfg) -> list:
    return changed(cfg, lambda c: not c.proofs)


def refuse_out_of_scope(cfg) -> None:
    opts = options_set(cfg)
    if opts:
        raise UserError(f"the z3 encoding covers the seeds' protocol only; option(s) {', '.join(opts)} are out of scope")
    for u in UNMODELLED:
        if u.proofs and u.applies(cfg):
            raise UserError(f"the z3 encoding covers the seeds' protocol only; option {u.option} is out of scope ({u.proofs})")
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

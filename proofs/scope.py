"""What the proofs cover: the seeds' protocol with its features, faults and bug variants.

Options that reproduce other HiCache versions (spec/config.py, "Options") and the CP
load-back planner are not encoded; a config or variant that needs them is refused with
one line rather than checked against the wrong transition relation.
"""

from __future__ import annotations

from ..errors import UserError
from ..spec.config import Config

# Variants whose bug lives in code the encoding does not cover, and why.
OUT_OF_SCOPE_VARIANTS = {
    "planner-local-tiebreak": "needs the CP load-back planner (cp_planner), which the proofs do not encode",
}
# Variants with only a liveness symptom: no safety obligation can fail.
LIVENESS_ONLY = {
    "host-starvation": "its symptom is host_channel (progress, property 9); the inductive proofs cover safety only",
}

_DEFAULTS = Config()
OPTIONS = ("backup_chain", "evict_host_shortfall", "backup_path_lock", "storage_per_node",
           "lbp_write_back_only", "settled_duplicates", "wb_drop_unbacked", "load_back_threshold", "cp_planner")


def options_set(cfg) -> list:
    return [o for o in OPTIONS if hasattr(cfg, o) and getattr(cfg, o) != getattr(_DEFAULTS, o)]


def refuse_out_of_scope(cfg) -> None:
    opts = options_set(cfg)
    if opts:
        raise UserError(f"the z3 encoding covers the seeds' protocol only; option(s) {', '.join(opts)} are out of scope")
    for v in sorted(cfg.variants):
        if v in OUT_OF_SCOPE_VARIANTS:
            raise UserError(f"variant {v!r} is out of scope for the z3 encoding: {OUT_OF_SCOPE_VARIANTS[v]}")


def check_variant(name: str) -> None:
    from ..spec.variants import VARIANTS

    if name not in VARIANTS:
        raise UserError(f"unknown variant {name!r} (known: {', '.join(sorted(VARIANTS))})")
    if name in OUT_OF_SCOPE_VARIANTS:
        raise UserError(f"variant {name!r} is out of scope for the z3 encoding: {OUT_OF_SCOPE_VARIANTS[name]}")

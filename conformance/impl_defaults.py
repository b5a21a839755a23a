"""The reference implementation's own defaults against the spec's.

The reference adapter builds every HiCacheConfig from the model (``impl_config``), so no
conformance run sees the implementation's defaults; a caller that builds
``HiCacheConfig()`` does. For the fields that are the protocol's (its features and
constants, which ``impl_config`` takes from the spec), the default must be the spec's
default, which is the seeds': write_through, storage and its features off, the fail-close
threshold and the host free target of the seeds, one CP lane, no bug variant. The other
fields differ by design (pool sizes and layout, the production LRU victim order against
the spec's fixed order, the digest width, seed 004's load_back that evicts by itself,
manual completion, the device) and are not compared.
"""

from __future__ import annotations

from tiercheck.impl.hicache.config import HiCacheConfig
from tiercheck.spec.config import Config

from .reference import impl_config

PROTOCOL_FIELDS = ("policy", "storage", "prefetch", "mirror_release", "duplicate_reclaim", "single_writer",
                   "host_free_target", "fail_close_after", "variants", "cp_planner", "cp_lanes",
                   "durable_capacity", "anti_churn_refresh_rounds", "prefetch_stop_policy", "load_back_threshold")


def problems() -> list:
    """One line per protocol field whose HiCacheConfig() default is not the spec's."""
    want, got = impl_config(Config()), HiCacheConfig()
    return [f"HiCacheConfig().{name} = {getattr(got, name)!r}, the spec's default gives {getattr(want, name)!r}"
            for name in PROTOCOL_FIELDS if getattr(got, name) != getattr(want, name)]

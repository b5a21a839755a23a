"""Context-parallel (CP) owner-lane layout and load-back eviction planner."""

from .layout import (
    LaneStats, OwnerLanes, free_room_deficit, owner_of_page, owners_of_pages,
    page_aligned_room, pages_of_token_locs,
)
from .node import CpNode, DeviceNode
from .planner import (
    PLANNERS, EvictionPlan, FastPlanner, MemoPlanner, NaivePlanner, OwnerLanePlanner, PlanStats,
    make_planner,
)
from .syncs import SyncCounter, default_device
from .tiebreak import (
    KNOWN_VARIANTS, VARIANT_LOCAL_TIEBREAK, local_clock_tiebreak, replicated_tiebreak,
)

__all__ = [
    "CpNode", "DeviceNode", "EvictionPlan", "FastPlanner", "KNOWN_VARIANTS", "LaneStats",
    "MemoPlanner", "NaivePlanner", "OwnerLanePlanner", "PLANNERS", "OwnerLanes", "PlanStats", "SyncCounter",
    "VARIANT_LOCAL_TIEBREAK", "default_device", "free_room_deficit", "local_clock_tiebreak",
    "make_planner", "owner_of_page", "owners_of_pages", "page_aligned_room",
    "pages_of_token_locs", "replicated_tiebreak",
]

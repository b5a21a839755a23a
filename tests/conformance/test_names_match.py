"""The implementation keeps its own names (impl/ never imports spec/): this is the one
test that checks they are the spec's, the bug variants and the driver-facing steps with
their kinds (docs/extending.md)."""

from tiercheck.impl.cp.tiebreak import KNOWN_VARIANTS as PLANNER_VARIANTS
from tiercheck.impl.hicache import VARIANT_NAMES
from tiercheck.impl.hicache.group import ACTIONS as IMPL_ACTIONS
from tiercheck.spec.model import ACTIONS
from tiercheck.spec.variants import VARIANTS


def test_impl_variants_are_the_spec_variants_whose_record_says_impl():
    # the CP load-back planner's variant is defined in tiercheck.impl.cp and bound into
    # load_back by cp_planner
    assert PLANNER_VARIANTS <= VARIANT_NAMES
    assert VARIANT_NAMES == {n for n, v in VARIANTS.items() if v.impl}


def test_impl_steps_are_the_spec_actions_with_the_same_kinds():
    assert {n: kind for n, (kind, _method) in IMPL_ACTIONS.items()} == {a.name: a.kind for a in ACTIONS}

"""tiercheck sglang coverage, its spec half (no SGLang needed): each action's witness is a
shortest spec trace ending in it, and an action no state enables gets its model's reason."""

from tiercheck.conformance.sglang.action_coverage import table, why_not, witnesses
from tiercheck.models import model_file
from tiercheck.spec.model import Model


def test_witnesses_end_in_their_action_and_replay_on_the_spec():
    model = Model(model_file.load("sglang/wt-prefetch-1r").config)
    found = witnesses(model)
    assert {"prefetch_from_storage", "prefetch_io", "check_prefetch_progress", "store_lose"} <= set(found)
    for name, trace in found.items():
        s = model.init_states()[0]
        for a in trace:
            assert a in model.actions(s)
            s = model.next_state(s, a)
        assert trace[-1].name == name


def test_actions_a_model_cannot_take_say_why():
    cfg = model_file.load("sglang/wt-1r").config
    assert "storage = false" in why_not(cfg, "prefetch_io")
    assert "registry_skew" in why_not(cfg, "registry_skew")
    assert why_not(cfg, "insert") == ""
    rows = {"wt-1r": {"insert": {"taken": 1}, "prefetch_io": {"why": why_not(cfg, "prefetch_io")}}}
    out = table(rows, ["insert", "prefetch_io"])
    assert "insert (1)" in out and "prefetch_io: no storage tier" in out

"""Auto mode with a prefetch read still running when check_prefetch_progress comes
(tiercheck.conformance.auto_mode.check_while_reading): the reference agrees with the
spec's unfinished read, and a rank that stops waiting for the read is caught by the
bytes the late read leaves in a reused host slot."""

from __future__ import annotations

from tiercheck.conformance import auto_mode
from tiercheck.impl.hicache.prefetch import Prefetch
from tiercheck.models import model_file


def test_check_with_the_read_running_agrees():
    assert auto_mode.check_while_reading(model_file.load("wt-prefetch-1r").config) == []


def test_a_rank_that_does_not_wait_for_the_read_is_caught(monkeypatch):
    settle = Prefetch._settle

    def no_wait(self, op):
        if self.cfg.manual:
            return settle(self, op)
        op.settled = True  # the bug: the read keeps running into the released slots

    monkeypatch.setattr(Prefetch, "_settle", no_wait)
    problems = auto_mode.check_while_reading(model_file.load("wt-prefetch-1r").config)
    assert any("wrong bytes in the host pool" in p for p in problems), problems

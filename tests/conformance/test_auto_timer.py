"""The auto mode's prefetch timer on a set clock (tiercheck.conformance.auto_timer): the
reference keeps the prefetch going at the limit and terminates it just past it, as the
spec does; a rank whose timer is off by any amount is caught."""

from __future__ import annotations

import pytest

from tiercheck.conformance import auto_timer
from tiercheck.impl.hicache.prefetch import Prefetch
from tiercheck.models import model_file


def _cfg():
    return model_file.load("wt-prefetch-timeout-2r").config


@pytest.mark.parametrize("start,limit", [(0.25, 1.00048828125), (64.0, 0.1), (1e9, 1.0 + 3 * 0.25 / 1024)])
def test_the_instants_straddle_the_limit_as_the_rank_computes_it(start, limit):
    at, past = auto_timer.instants(start, limit)
    assert at - start <= limit < past - start
    assert past > at


def test_the_reference_agrees_at_and_past_the_limit():
    assert auto_timer.timer_while_reading(_cfg()) == []


def test_a_timer_that_fires_early_is_caught(monkeypatch):
    monkeypatch.setattr(Prefetch, "_can_terminate", lambda self, op, finished: True)
    problems = auto_timer.timer_while_reading(_cfg())
    assert problems and "at the prefetch's start" in problems[0]


def test_a_timer_that_never_fires_is_caught(monkeypatch):
    monkeypatch.setattr(Prefetch, "_can_terminate", lambda self, op, finished: finished and not op.terminated)
    problems = auto_timer.timer_while_reading(_cfg())
    assert problems and "past the timer's limit" in problems[0]


def test_the_rank_clock_is_restored():
    from tiercheck.impl.hicache import prefetch

    before = prefetch.time
    auto_timer.timer_while_reading(_cfg())
    assert prefetch.time is before


def test_a_timer_that_fires_at_the_limit_is_caught(monkeypatch):
    from tiercheck.impl.hicache import prefetch

    def at_or_past(self, op, finished):
        limit = self.cfg.prefetch_timeout_base + len(op.pages) * self.cfg.timeout_per_page
        return finished or prefetch.time.monotonic() - op.start >= limit

    monkeypatch.setattr(Prefetch, "_can_terminate", at_or_past)
    problems = auto_timer.timer_while_reading(_cfg())
    assert problems and "at the timer's limit" in problems[0]


def test_manual_mode_ignores_the_clock_and_a_rank_that_reads_it_is_caught(monkeypatch):
    from tiercheck.impl.hicache import prefetch

    assert auto_timer.manual_ignores_clock(_cfg()) == ""

    def wall_timer(self, op, finished):
        limit = self.cfg.prefetch_timeout_base + len(op.pages) * self.cfg.timeout_per_page
        return finished or op.timed_out or prefetch.time.monotonic() - op.start > limit

    monkeypatch.setattr(Prefetch, "_can_terminate", wall_timer)
    assert "state at step" in auto_timer.manual_ignores_clock(_cfg())


def test_the_jump_clock_reads_the_start_once_per_rank():
    clock = auto_timer.JumpClock(0.25, 10.0, 2)
    assert [clock.monotonic() for _ in range(4)] == [0.25, 0.25, 10.25, 10.25]

"""The bounded checks run under z3 resource limits (deterministic), not wall-clock
timeouts, and a check that runs out of its limit is reported inconclusive, never proved."""

from tiercheck.proofs import obligations
from tiercheck.proofs.obligations import check_batch, check_target, setup


def test_a_check_out_of_its_limit_is_inconclusive_and_the_same_check_in_it_proves():
    su = setup("prefetch_revoke", frozenset(), 2, None, "agree")
    starved = check_target(su, "no_use_after_free", "prefetch_revoke", rlimit=1)
    assert starved.status == "inconclusive" and starved.cti is None
    assert check_target(su, "no_use_after_free", "prefetch_revoke").status == "proved"


def test_a_starved_batch_decides_nothing():
    su = setup("prefetch_revoke", frozenset(), 2, None, "agree")
    proved, failed, unknown, _ = check_batch(su, ["no_use_after_free", "slot_conservation"], "prefetch_revoke",
                                             rlimit=1)
    assert (proved, failed, unknown) == ([], [], ["no_use_after_free", "slot_conservation"])


def test_the_bounded_checks_set_no_wall_clock_timeout():
    import inspect

    src = inspect.getsource(obligations)
    assert 'set("timeout", NO_TIMEOUT)' in src and "timeout_ms" not in src


def test_prove_cli_exits_3_and_says_inconclusive_when_out_of_limit(monkeypatch, capsys):
    from tiercheck import exits
    from tiercheck.cli import main

    monkeypatch.setattr(obligations, "TARGET_RLIMIT", 1)
    monkeypatch.setattr(obligations, "BATCH_RLIMIT", 1)
    rc = main(["prove", "--action", "prefetch_revoke", "--workers", "1", "--pages", "1"])
    out = capsys.readouterr().out
    assert rc == exits.INCONCLUSIVE, out
    assert "INCONCLUSIVE " in out and "inconclusive (out of z3's resource limit" in out and "FAILED" not in out

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


# Every check that had a wall-clock timeout now runs under a z3 resource limit
# (proofs/limits.py): starved, each comes back undecided, never proved, never a CTI.

def test_a_starved_page_sorted_check_is_inconclusive_and_the_same_check_in_its_limit_proves():
    from tiercheck.proofs import epr_obligations

    su = epr_obligations.setup("prefetch_revoke")
    status, _, cti = epr_obligations.check(su, "no_ghost", "prefetch_revoke", rlimit=1)
    assert (status, cti) == ("inconclusive", None)
    assert epr_obligations.check(su, "no_ghost", "prefetch_revoke")[0] == "proved"


def test_a_starved_finite_model_search_finds_nothing_and_in_its_limit_finds_the_model():
    import z3

    from tiercheck.proofs.forest import PageSort, finite_model

    # an injective page map with no fixed point: a model of 2 pages, and none of 1
    f = z3.Function("f", PageSort, PageSort)
    x, y = z3.Consts("x y", PageSort)
    formulas = [z3.ForAll([x], f(x) != x), z3.ForAll([x, y], z3.Implies(f(x) == f(y), x == y))]
    assert finite_model(formulas, sizes=range(1, 3), rlimit=1) is None
    model = finite_model(formulas, sizes=range(1, 3))
    assert model is not None


def test_a_starved_theorem_is_undecided_and_the_same_theorem_in_its_limit_is_proved():
    from tiercheck.proofs.consensus import THEOREMS, run_theorem

    th = next(t for t in THEOREMS if t.name == "minmax_digest_range")
    starved = run_theorem(th, rlimit=1)
    assert starved.status == "undecided" and "resource limit" in starved.detail
    assert run_theorem(th).status == "proved"


def test_a_starved_case_vacuity_check_decides_nothing_and_its_limit_is_an_rlimit_not_milliseconds(monkeypatch):
    from tiercheck.proofs import limits
    from tiercheck.proofs.case_vacuity import diverged_excused, vacuous

    assert vacuous("insert", "diverged") and diverged_excused("local_access")
    assert limits.CASE_VACUITY_RLIMIT >= 1_000_000  # 30000 / 60000 (milliseconds) were passed here before
    monkeypatch.setattr(limits, "CASE_VACUITY_RLIMIT", 1)
    assert not vacuous("insert", "diverged") and not diverged_excused("local_access")


def test_no_proof_module_sets_a_wall_clock_timeout():
    import pathlib

    import tiercheck.proofs as proofs

    for path in pathlib.Path(proofs.__path__[0]).rglob("*.py"):
        src = path.read_text()
        assert "timeout_ms" not in src and 'set("timeout", ' not in src.replace('set("timeout", NO_TIMEOUT)', ""), path


def test_prove_cli_exits_3_and_says_undecided_when_a_theorem_is_out_of_its_limit(monkeypatch, capsys):
    from tiercheck import exits
    from tiercheck.cli import main
    from tiercheck.proofs import limits

    monkeypatch.setattr(limits, "THEOREM_RLIMIT", 1)
    rc = main(["prove", "--action", "prefetch_revoke", "--workers", "1", "--pages", "1"])
    out = capsys.readouterr().out
    assert rc == exits.INCONCLUSIVE, out
    assert "undecided" in out and "FAILED" not in out


def test_prove_cli_exits_1_when_a_consensus_theorem_is_refuted(monkeypatch, capsys):
    import z3

    from tiercheck import exits
    from tiercheck.cli import main
    from tiercheck.proofs import audit
    from tiercheck.proofs.consensus import Theorem

    x = z3.BitVec("x", 8)
    false = Theorem("x_below_200", "every 8-bit x is below 200 (false: 255 is not)", "unsat",
                    lambda: ([z3.Not(z3.ULT(x, 200))], None))
    monkeypatch.setattr(audit, "THEOREMS", [false])
    rc = main(["prove", "--action", "prefetch_revoke", "--workers", "1", "--pages", "1"])
    out = capsys.readouterr().out
    assert rc == exits.FOUND, out
    assert "x_below_200" in out and "failed" in out

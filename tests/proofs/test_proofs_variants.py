"""Every safety variant of the registry fails at least one obligation, with a CTI."""

import pytest

from tiercheck.proofs.obligations import prove_action
from tiercheck.spec.variants import OBLIGATION, THEOREM, VARIANTS

from .test_proofs_correct import KNOWN_OPEN

# Where each bug shows first is the action whose effect the variant changes (its record's
# ``action``); the test falls back to every action if that one proves.
BY_OBLIGATION = sorted(n for n, v in VARIANTS.items() if v.proof == OBLIGATION)


def test_every_theorem_variant_names_a_theorem():
    from tiercheck.proofs.consensus import THEOREMS

    names = {t.name for t in THEOREMS}
    for v in VARIANTS.values():
        if v.proof.startswith(THEOREM):
            assert v.proof_note() in names, v.name


def test_overflow_variant_exhibited_by_theorem():
    from tiercheck.proofs.consensus import THEOREMS, run_theorem

    th = next(t for t in THEOREMS if t.name == VARIANTS["negated-pair-overflow"].proof_note())
    r = run_theorem(th)
    assert r.status == "exhibited" and "-9223372036854775808" in r.detail


@pytest.mark.slow
@pytest.mark.parametrize("name", BY_OBLIGATION)
def test_variant_fails_an_obligation_with_cti(name):
    from tiercheck.proofs.obligations import ACTION_NAMES

    if VARIANTS[name].proof_unbounded_only:
        pytest.skip("only the page-sorted encoding models it (the unbounded test below)")
    if VARIANTS[name].proof_pages > 3:
        pytest.skip("4 pages: z3 does not decide it in time; test_proofs_scheduler_evicts.py shows the "
                    "counterexample on the variant model's violating step")

    first = VARIANTS[name].first_failing_action
    order = [first] + [a for a in ACTION_NAMES if a != first]
    for action in order:
        failed = [r for r in prove_action(action, variants=frozenset({name}), k=VARIANTS[name].proof_pages)
                  if r.status == "failed" and (r.target, action) not in KNOWN_OPEN]
        if failed:
            r = failed[0]
            assert r.cti is not None and r.cti["pre"] is not None or action == "init"
            assert r.cti["post"]["ranks"], r
            return
    pytest.fail(f"variant {name}: every obligation proved")


@pytest.mark.slow
@pytest.mark.parametrize("name", BY_OBLIGATION)
def test_variant_fails_the_unbounded_audit_with_cti(name):
    """With --unbounded: the covered obligations for any number of pages, the rest
    bounded at the variant's proof_pages, still one failure with a CTI."""
    from tiercheck.proofs.audit import prove_mixed
    from tiercheck.proofs.obligations import ACTION_NAMES

    if VARIANTS[name].proof_pages > 3:
        pytest.skip("4 pages: see the bounded test above")
    first = VARIANTS[name].first_failing_action
    for action in [first] + [a for a in ACTION_NAMES if a != first]:
        failed = [r for r in prove_mixed(action, (name,), VARIANTS[name].proof_pages)
                  if r.status == "failed" and (r.target, action) not in KNOWN_OPEN]
        if failed:
            assert failed[0].cti is not None and failed[0].cti["post"]["ranks"], failed[0]
            return
    pytest.fail(f"variant {name}: every obligation proved")


@pytest.mark.slow
def test_revoke_frees_in_flight_fails_no_use_after_free_with_a_cti_over_all_targets():
    """Issue 16: every target of prefetch_revoke at 2 pages, batched as the audit does.
    Under the old wall-clock timeouts no_use_after_free came back unknown at load 7
    (61.6 CPU-s in 428 s wall); under z3's resource limits the verdict does not depend
    on the load: a concrete CTI, the read in flight into freed host slots."""
    results = {r.target: r for r in prove_action("prefetch_revoke", variants=frozenset({"revoke-frees-in-flight"}),
                                                 k=2)}
    r = results["no_use_after_free"]
    assert r.status == "failed", r.status
    assert r.cti["pre"] is not None and r.cti["post"]["ranks"]
    assert r.cti["explicit"]["property"]
    assert not [t for t, x in results.items() if x.status == "inconclusive"]

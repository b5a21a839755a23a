"""Conformance failures as trace files, in the same format as the checker's
counterexamples (ITF JSON), so ``tiercheck show`` and ``tiercheck replay`` read both."""

from __future__ import annotations

from tiercheck.models import model_file
from tiercheck.models.trace import write_trace


def write_counterexample(path, model, actions, states, mismatch, impl: str, passes=(), signature=None) -> None:
    """``passes``: the known disagreement signatures the trace passes on its way
    (tiercheck.conformance.distinct; its replay passes them too); ``signature``: the
    disagreement's own."""
    toml = model_file.config_toml(model.cfg, name=f"conformance-{impl}")
    # states[i] is the spec's state after i actions; the failing step's spec state is
    # included, so the file shows what the spec expected there.
    states = list(states[: len(actions) + 1])
    while len(states) < len(actions) + 1:
        states.append(states[-1])
    write_trace(
        path,
        model,
        toml,
        list(actions),
        states,
        prop="conformance",
        message=mismatch.message,
        kind="conformance",
        extra={"impl": impl, "mismatch_kind": mismatch.kind, "failing_step": mismatch.step,
               **({"signature": signature} if signature else {}), **({"passes": list(passes)} if passes else {})},
    )

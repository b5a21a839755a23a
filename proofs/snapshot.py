"""The z3 encodings of the state invariants, evaluated on one concrete spec State.

One definition, three uses: spec/properties.py is the Python predicate, proofs.properties
its z3 encoding (what the inductiveness proofs use), and this module evaluates that same
encoding on an explicit state, e.g. the refinement of an implementation snapshot
(``tiercheck conform --z3``). A disagreement with the Python predicate is a bug in one
of the two definitions (tests/proofs/test_snapshot.py looks for one).
"""

from __future__ import annotations

from typing import List

import z3

from .config import ProofConfig
from .encode.ctx import Ctx
from .formula import value
from .properties import PROPERTIES
from .ranks import ConcreteRanks
from .scope import refuse_out_of_scope
from .translate import to_terms
from .universe import Universe

INVARIANTS = [n for n, p in PROPERTIES.items() if p.kind == "invariant"]


def z3_invariant_check(model, state) -> List[str]:
    """Names of the state invariants whose z3 encoding is false on ``state`` ([] if ok)."""
    refuse_out_of_scope(model.cfg)
    space = ConcreteRanks(model.cfg.ranks)
    ctx = Ctx(ProofConfig.from_spec(model.cfg), Universe.from_pages(model.pages), space)
    s = to_terms(model, state, space)
    out = []
    for name in INVARIANTS:
        ok = value(space, PROPERTIES[name].fn(ctx, s))
        if not ok:
            out.append(name)
    return out

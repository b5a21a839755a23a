"""The spec's actions over z3 terms, one module per spec module (same function names).

Each function takes the encoding context and rank views (proofs.state.RV) where the spec
takes the Model and RankStates, and returns new views; conditions that the spec tests
with ``if`` become ``ite`` over terms. Tree walks are written with page ancestry
(proofs.universe) instead of pointer chasing; on well-formed trees (the ``tree_*``
strengthening invariants) the two are the same, and the agreement tests check it.
"""

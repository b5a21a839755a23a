"""Which of a model's bug variants breaks which property: the model is checked with none of
them, with each alone, and with all of them, on the model file's properties.

A property violated with all of them but by none alone is an interaction, reported as such.
Used on the named configurations of seed code as shipped (spec/shipped.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from tiercheck.spec.model import Model

from .checker import Checker


@dataclass
class Run:
    variants: Tuple[str, ...]
    distinct: int
    violated: Tuple[str, ...]
    complete: bool


@dataclass
class Attribution:
    baseline: Run  # none of the variants
    alone: Dict[str, Run]  # each variant alone
    together: Run  # all of them

    def breaks(self, variant: str) -> Tuple[str, ...]:
        """Properties the variant breaks alone that hold without any."""
        base = set(self.baseline.violated)
        return tuple(p for p in self.alone[variant].violated if p not in base)

    def masked(self) -> Tuple[str, ...]:
        """Broken by some variant alone but holding with all of them (another masks it)."""
        alone = [p for r in self.alone.values() for p in r.violated if p not in self.baseline.violated]
        return tuple(p for p in dict.fromkeys(alone) if p not in self.together.violated)

    def interactions(self) -> Tuple[str, ...]:
        """Violated with all the variants, by none alone, and not without them."""
        single = set(self.baseline.violated).union(*(set(r.violated) for r in self.alone.values()))
        return tuple(p for p in self.together.violated if p not in single)


def _run(mf, variants, max_states: Optional[int], workers: int) -> Run:
    cfg = replace(mf.config, variants=frozenset(variants))
    res = Checker(Model(cfg), list(mf.properties), max_states=max_states, workers=workers).run()
    violated = tuple(p for p in mf.properties if res.verdicts.get(p) == "violated")
    return Run(tuple(sorted(variants)), res.distinct, violated, res.complete)


def attribute(mf, variants: Optional[List[str]] = None, *, max_states: Optional[int] = None,
              workers: int = 1) -> Attribution:
    names = sorted(mf.config.variants if variants is None else variants)
    return Attribution(
        baseline=_run(mf, (), max_states, workers),
        alone={v: _run(mf, (v,), max_states, workers) for v in names},
        together=_run(mf, names, max_states, workers),
    )

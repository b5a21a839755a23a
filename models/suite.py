"""Run every shipped model (or a folder of models) and compare with what each declares.

A correct model passes when every checked property holds; a variant or finding model
passes when its ``expect_violation`` property is violated (and, for a variant model, the
same model with the variant switched off satisfies it: the variant is the cause).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional

from tiercheck.models import model_file
from tiercheck.models.checker import Checker
from tiercheck.spec.model import Model


@dataclass
class Row:
    name: str
    kind: str  # correct | variant | finding
    distinct: int
    seconds: float
    ok: bool
    detail: str


def discover(root: Path) -> List[Path]:
    return sorted(root.rglob("*.toml"))


def run_model(path: Path, root: Path, max_states: Optional[int] = None) -> Row:
    mf = model_file.load(str(path))
    rel = path.relative_to(root).with_suffix("")
    kind = "variant" if mf.config.variants else ("finding" if mf.expect_violation else "correct")
    t0 = time.monotonic()
    if mf.expect_violation:
        res = Checker(Model(mf.config), [mf.expect_violation], max_states=max_states).run()
        ok = res.verdicts[mf.expect_violation] == "violated"
        detail = f"{mf.expect_violation} violated" if ok else f"{mf.expect_violation} NOT violated"
        distinct = res.distinct
        if ok and kind == "variant":
            clean = replace(mf.config, variants=frozenset())
            ctrl = Checker(Model(clean), [mf.expect_violation], max_states=max_states).run()
            distinct += ctrl.distinct
            if ctrl.verdicts[mf.expect_violation] != "holds":
                ok = False
                detail += f"; without the variant: {ctrl.verdicts[mf.expect_violation]}"
            else:
                detail += "; holds without it"
    else:
        res = Checker(Model(mf.config), mf.properties, max_states=max_states).run()
        bad = [p for p, v in res.verdicts.items() if v != "holds"]
        ok = not bad and res.complete
        detail = f"{len(res.verdicts)} properties hold" if ok else "; ".join(f"{p} {res.verdicts[p]}" for p in bad) or res.stop_reason
        distinct = res.distinct
    return Row(str(rel), kind, distinct, time.monotonic() - t0, ok, detail)

"""Stored unsat cores: a page-sorted query decided first from the few formulas that refuted it.

A proof obligation is a set of formulas (the forest axioms, the config, the invariants
and facts of the pre-state, the negated goal) that z3 must show unsatisfiable. Most of
the work goes into instantiating quantified hypotheses the proof never needs: load_back's
lock_accounting with its eviction on takes about 3 million resource units from its 182
formulas, 0.07 million from the 28 of its unsat core. Any subset of an obligation's own
formulas that is unsatisfiable makes the whole set unsatisfiable, so a core is a proof
of the obligation whatever it was computed from; the table only decides which subset to
try first.

The table (proofs/cores.json) is content-addressed: a query's key is a digest of its
formulas' fingerprints (the digest of each formula's s-expression, its numbered names
renumbered, so the key does not depend on what the process built before), and its entry the
positions of the core in the query's sorted fingerprints. A query whose formulas changed
has another key and is decided as before, so a stale table costs time, never a verdict;
a core that z3 does not refute within ``CORE_RLIMIT`` (a z3 that instantiates
differently) falls back to the whole query the same way. Failed queries are never
stored: a counterexample always comes from the whole query.

    python benchmarks/prove_profile.py --write-cores   # regenerate, after changing encodings
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import z3

TABLE = Path(__file__).with_name("cores.json")
# A core's own check: the audit's largest takes about 0.85 million resource units (an
# upper bound: `python benchmarks/rlimit_use.py --stored-cores`; a whole query up to ~10
# million); past this the whole query is decided instead.
CORE_RLIMIT = 4_000_000
# Recording a core: the whole query again with every formula tracked (up to ~2x the
# untracked effort); a query past this is not stored.
TRACK_RLIMIT = 60_000_000
# Set (to a directory) in a recording run's environment: each process adds what it learns.
RECORD_ENV = "TIERCHECK_RECORD_CORES"

_fingerprints: Dict[int, tuple] = {}  # formula id -> (formula, fingerprint); the formula held so its id is not reused
_HELD = 50_000  # past this many the memo starts over (a long test process builds many setups)
_table: Optional[Dict[str, List[int]]] = None
_learned: Dict[str, List[int]] = {}
stats = {"queries": 0, "from_core": 0}


# The encodings number their fresh symbols and bound variables from process-wide counters
# ("host_evict!12", "p113"): the numbers depend on what the process built before. A
# fingerprint renumbers them by first appearance in the formula (alpha-renaming), so the
# same formula built after other work has the same fingerprint.
_NUMBERED = re.compile(r"(?<![\w.#!])([A-Za-z_#][\w.#]*?!?)(\d+)(?![\w.#!])")


def canonical(text: str) -> str:
    """``text`` renumbered, its whitespace collapsed (z3 wraps lines by the names' lengths)."""
    names: Dict[str, int] = {}
    text = _NUMBERED.sub(lambda m: f"{m.group(1)}~{names.setdefault(m.group(0), len(names))}", text)
    return " ".join(text.split())


def fingerprint(f: z3.ExprRef) -> str:
    """The digest of ``f``'s s-expression, its numbered names renumbered (``canonical``)."""
    held = _fingerprints.get(f.get_id())
    if held is None:
        if len(_fingerprints) >= _HELD:
            _fingerprints.clear()
        text = canonical(f.sexpr())
        held = (f, hashlib.blake2b(text.encode(), digest_size=8).hexdigest())
        _fingerprints[f.get_id()] = held
    return held[1]


def _indexed(formulas: Sequence[z3.ExprRef]):
    """(key, the formulas in fingerprint order): the order a core's positions refer to."""
    pairs = sorted(((fingerprint(f), i) for i, f in enumerate(formulas)))
    key = hashlib.blake2b("".join(fp for fp, _ in pairs).encode(), digest_size=12).hexdigest()
    return key, [formulas[i] for _, i in pairs]


def table() -> Dict[str, List[int]]:
    global _table
    if _table is None:
        _table = load(TABLE)
    return _table


def set_table(cores: Optional[Dict[str, List[int]]]) -> None:
    """Use ``cores`` instead of the stored table ({}: decide every query whole; None: the
    stored table again). Forked jobs inherit it."""
    global _table
    _table = cores


def load(path: Path) -> Dict[str, List[int]]:
    """The stored cores; an unreadable or malformed table is an empty one (every query
    is then decided whole: slower, the same verdicts)."""
    try:
        data = json.loads(Path(path).read_text())
        cores = data["cores"]
        if isinstance(cores, dict) and all(isinstance(v, list) and all(type(i) is int for i in v)
                                           for v in cores.values()):
            return cores
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return {}


def refuted(formulas: Sequence[z3.ExprRef], rlimit: int = 0) -> bool:
    """True when a stored core of exactly these formulas is refuted by z3 (then the
    formulas are unsatisfiable) within ``CORE_RLIMIT`` and the caller's ``rlimit`` (0:
    none; a starved query stays starved); False: decide the whole query."""
    stats["queries"] += 1
    if recording():
        return False  # every query decided whole, so that each refuted one is learned
    key, ordered = _indexed(formulas)
    core = table().get(key)
    if not core or max(core) >= len(ordered):
        return False
    sol = z3.Solver()
    sol.set("rlimit", min(CORE_RLIMIT, rlimit) if rlimit else CORE_RLIMIT)
    sol.add(*[ordered[i] for i in core])
    if sol.check() != z3.unsat:
        return False
    stats["from_core"] += 1
    return True


def recording() -> bool:
    return bool(os.environ.get(RECORD_ENV))


def learn(formulas: Sequence[z3.ExprRef]) -> None:
    """In a recording run, after the whole query was refuted: its unsat core, kept when
    the core alone is refuted within ``CORE_RLIMIT`` (so that the audit finds it so)."""
    if not recording():
        return
    key, ordered = _indexed(formulas)
    if key in _learned:
        return
    sol = z3.Solver()
    sol.set("rlimit", TRACK_RLIMIT)
    marks = [z3.Bool(f"core!{i}") for i in range(len(ordered))]
    for b, f in zip(marks, ordered):
        sol.add(z3.Implies(b, f))
    if sol.check(*marks) != z3.unsat:
        return
    core = sorted(int(str(b).split("!")[1]) for b in sol.unsat_core())
    check = z3.Solver()
    check.set("rlimit", CORE_RLIMIT)
    check.add(*[ordered[i] for i in core])
    if check.check() == z3.unsat:
        _learned[key] = core


def take() -> dict:
    """This process's figures (and, recording, its new cores) since the last take."""
    out = {"queries": stats["queries"], "from_core": stats["from_core"], "learned": dict(_learned)}
    stats.update(queries=0, from_core=0)
    _learned.clear()
    return out


def write(cores: Dict[str, List[int]], path: Path = TABLE) -> None:
    body = {"about": "unsat cores of the proof audit's queries (proofs/cores.py); "
                     "regenerate: python benchmarks/prove_profile.py --write-cores",
            "cores": {k: cores[k] for k in sorted(cores)}}
    Path(path).write_text(json.dumps(body, separators=(",", ":")) + "\n")

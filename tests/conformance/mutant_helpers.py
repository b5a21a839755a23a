"""What the tests that kill a mutant share: the mutation suite loaded as a module, and a
function or method recompiled from its own source with the mutant's one edit."""

from __future__ import annotations

import __future__
import importlib.util
import inspect
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_mutation_suite(name: str):
    """benchmarks/mutation_suite.py as a module called ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "mutation_suite.py")
    ms = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ms)
    return ms


def recompiled(obj, old: str, new: str) -> dict:
    """``obj``'s source with ``old`` (once in it) turned into ``new``, compiled in its
    module's namespace: the mutant, as cosmic-ray writes it. -> the names it defines."""
    src = textwrap.dedent(inspect.getsource(obj))
    assert src.count(old) == 1, f"{obj.__qualname__} no longer reads {old!r}"
    code = compile(src.replace(old, new), inspect.getsourcefile(obj), "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    made: dict = {}
    exec(code, inspect.getmodule(obj).__dict__, made)  # noqa: S102 -- the project's own source, one edit
    return made

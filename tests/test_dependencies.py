"""Every third-party module the installed package imports is declared in its metadata.

Walks (ast) every module of the installed package folders: the folders the import system
resolves for each package pyproject lists, so an installed wheel is checked where it lies.
A module only an extra provides must be imported inside a function (the command that needs
it names the extra when it is missing); sglang, which no extra provides (the lane installs
it), only inside functions of the SGLang adapter's own modules.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from importlib.metadata import distribution, packages_distributions
from pathlib import Path

from tiercheck.toml_compat import tomllib

ROOT = Path(__file__).resolve().parents[1]

# Import name -> distribution, for modules whose distribution is named otherwise and may be
# absent here (an extra not installed); installed ones are also looked up in the metadata.
MODULE_DIST = {
    "z3": "z3-solver",
    "itf_py": "itf-py",
    "mooncake": "mooncake-transfer-engine-non-cuda",
    "yaml": "pyyaml",
    "_pytest": "pytest",
    "tomli": "tomli",
    "matplotlib": "matplotlib",
}
# module -> the prefix of the file or folder names (the SGLang adapter, its workload and
# their commands) where it may be imported, and there only inside functions (lane-only code).
LANE_ONLY = {"sglang": "sglang"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> dict:
    """distribution -> None (runtime) or the extra that provides it, from the installed metadata."""
    out: dict = {}
    for req in distribution("tiercheck").requires or ():
        name = norm(re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0])
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if extra is None:
            out[name] = None
        else:
            out.setdefault(name, extra.group(1))
    return out


def installed_modules() -> list:
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    files = []
    for pkg in packages:
        spec = importlib.util.find_spec(pkg)
        assert spec is not None and spec.submodule_search_locations, f"{pkg} is not installed"
        for folder in spec.submodule_search_locations:
            files += sorted(Path(folder).glob("*.py"))
    return files


def imports(path: Path):
    """(top-level module, line, inside a function?) for every absolute import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    in_function = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for n in names:
            yield n.split(".")[0], node.lineno, id(node) in in_function


def dist_of(module: str, installed: dict) -> str:
    provs = installed.get(module)
    return norm(provs[0]) if provs else norm(MODULE_DIST.get(module, module))


def undeclared() -> list:
    decl, installed = declared(), packages_distributions()
    own = {"tiercheck", "__future__"} | set(sys.stdlib_module_names)
    problems = []
    files = installed_modules()
    assert len(files) > 100, f"only {len(files)} modules found: the walk is broken"
    for f in files:
        for mod, line, lazy in imports(f):
            if mod in own:
                continue
            where = f"{f}:{line}"
            if mod in LANE_ONLY:
                prefix = LANE_ONLY[mod]
                if not (lazy and (f.parent.name.startswith(prefix) or f.name.startswith(prefix))):
                    problems.append(f"{mod} imported outside the SGLang adapter's functions at {where}")
                continue
            dist = dist_of(mod, installed)
            if dist not in decl:
                problems.append(f"{mod} (distribution {dist}) imported at {where}, not declared in pyproject.toml")
            elif decl[dist] is not None and not lazy:
                problems.append(f"{mod} comes from the [{decl[dist]}] extra but is imported at module level at {where}")
    return problems


def test_every_third_party_import_is_declared():
    assert undeclared() == []


def test_the_walk_sees_the_known_imports():
    """The check can fail: the packages it must find are found, with their distributions."""
    seen = {mod for f in installed_modules() for mod, _line, _lazy in imports(f)}
    assert {"torch", "z3", "numpy", "scipy", "hypothesis", "mooncake"} <= seen
    decl = declared()
    assert decl["z3-solver"] is None and decl["numpy"] is None and decl["mooncake-transfer-engine-non-cuda"] == "mooncake"
    assert dist_of("z3", {}) == "z3-solver" and dist_of("itf_py", {}) == "itf-py"

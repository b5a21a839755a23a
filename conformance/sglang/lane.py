"""Per-release SGLang lanes: isolated virtualenvs that run tiercheck against one release.

Layout under the lanes directory (``--lanes-dir``, else ``$TIERCHECK_LANES``, else
``$XDG_CACHE_HOME/tiercheck/lanes``, else ``~/.cache/tiercheck/lanes``)::

    base-<key>/venv        torch 2.13.0 (CPU), sglang's common runtime imports, tiercheck's
                           own dependencies (z3, hypothesis, pytest...), a torchvision stand-in
    torchvision-stub/      the stand-in's source (written here, installed into the base)
    sglang-0.5.21/venv     one release: the sglang wheel (--no-deps), the pins its metadata
                           names for LANE_PINNED packages, tiercheck (editable, this checkout);
                           the base's site-packages joined through a .pth file
    sglang-src-<hash>/venv a local checkout installed editable (--source DIR)
    */lane.json            what the lane holds; its presence makes setup a fast no-op

So a lane costs its sglang wheel and a few pins; torch and the rest are shared. The base
key hashes BASE_PACKAGES and the Python version: changing either builds a new base.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tiercheck.errors import UserError

from .versions import parse, parse_spec

ENV_VAR = "TIERCHECK_LANES"
TORCH = "torch==2.13.0"  # the CPU build (pip's find-links / index supply it); never a bare `torch`
# What every release imports at module level (sglang.srt.* for the cache code) plus what
# tiercheck's tests import; installed once, into the base.
BASE_PACKAGES = (
    TORCH, "numpy", "orjson", "psutil", "pybase64", "requests", "packaging", "pillow", "starlette",
    "msgspec", "pydantic", "pyzmq", "tqdm", "IPython", "aiohttp", "apache-tvm-ffi==0.1.11", "dill",
    "sentencepiece==0.2.1", "compressed-tensors", "gguf", "partial_json_parser",
    "hypothesis>=6.100", "pytest>=8", "z3-solver>=4.12", "networkx>=3.0", "itf-py>=0.5", "coverage",
    "setuptools>=68", "wheel", "transformers==5.19.0", "openai==2.8.0",
)
NO_DEPS = ("triton==3.8.0",)  # imported at top level by sglang, never used on CPU; its deps are CUDA's
# Packages a release pins exactly (its Requires-Dist ==) that the lane installs at that pin,
# shadowing the base's copy.
LANE_PINNED = ("transformers", "openai")
# ... and these without their dependencies (imported at module level by some releases'
# function-call parsers; their own requirements would pull a CUDA stack).
LANE_PINNED_NO_DEPS = ("xgrammar",)
MARKER = "lane.json"


def release_extras(version: str) -> tuple[list[str], list[str]]:
    """(packages, import-only stand-ins) a release needs beyond its pins on a CPU lane:
    einops is imported at module level from 0.5.12 to 0.5.19 without being declared;
    before 0.5.16 the host pool imports sgl_kernel (a CUDA build) unconditionally, and only
    calls the transfer functions the CPU patches replace."""
    v = parse(version)
    packages = ["einops"] if parse("0.5.12") <= v < parse("0.5.20") else []
    stubs = ["sgl_kernel"] if v < parse("0.5.16") else []
    return packages, stubs


def lanes_dir(flag: str | None = None) -> Path:
    if flag:
        return Path(flag).expanduser()
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tiercheck" / "lanes"


def base_key(python_version: str | None = None) -> str:
    py = python_version or f"{sys.version_info.major}.{sys.version_info.minor}"
    text = "\n".join((py, *BASE_PACKAGES, *NO_DEPS, STUB_VERSION))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def lane_name(version: str | None = None, source: str | None = None) -> str:
    if source:
        return "sglang-src-" + hashlib.sha256(str(Path(source).resolve()).encode()).hexdigest()[:10]
    parse(version)
    return f"sglang-{version}"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def tiercheck_root() -> Path:
    """Where the running tiercheck comes from: its source checkout (an editable install),
    else the installed package folder (a wheel). Lanes run exactly this tiercheck."""
    root = Path(__file__).resolve().parents[2]
    return root  # a checkout's root, or site-packages/tiercheck


def _install_tiercheck(py: Path, lane: Path, tc_root: Path, log) -> None:
    """A checkout is installed editable. An installed wheel is linked in: a folder holding
    links to the package and its dist-info (so its entry points resolve), on the lane's path."""
    if (tc_root / "pyproject.toml").is_file():
        _pip(py, "--no-deps", "--no-build-isolation", "-e", tc_root, log=log)
        return
    from importlib.metadata import distribution

    dist_info = Path(str(distribution("tiercheck")._path))  # noqa: SLF001 -- the installed record
    links = lane / "tiercheck-installed"
    shutil.rmtree(links, ignore_errors=True)
    links.mkdir()
    (links / "tiercheck").symlink_to(tc_root, target_is_directory=True)
    (links / dist_info.name).symlink_to(dist_info, target_is_directory=True)
    (Path(_site_packages(py)) / "_tiercheck_installed.pth").write_text(str(links) + "\n")


# --- listing and lookup ------------------------------------------------------------------


def read_marker(lane: Path) -> dict | None:
    try:
        return json.loads((lane / MARKER).read_text())
    except (OSError, ValueError):
        return None


def list_lanes(root: Path) -> list[dict]:
    out = []
    if root.is_dir():
        for lane in sorted(root.glob("sglang-*")):
            info = read_marker(lane)
            if info is not None:
                out.append(dict(info, path=str(lane)))
    out.sort(key=lambda i: (parse(i["sglang"]) if not i.get("source") else (9999,), i["path"]))
    return out


def python_of(root: Path, version: str | None = None, source: str | None = None) -> Path:
    lane = root / lane_name(version, source)
    if read_marker(lane) is None or not venv_python(lane / "venv").exists():
        what = f"--source {source}" if source else f"sglang=={version}"
        raise UserError(f"no lane for {what} under {root}: run `tiercheck lane setup {what}`")
    return venv_python(lane / "venv")


# --- building ------------------------------------------------------------------------------


def _run(cmd, log, **kw):
    print("+ " + " ".join(map(str, cmd)), file=log, flush=True)
    proc = subprocess.run([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT, **kw)
    if proc.returncode:
        raise UserError(f"lane setup: `{' '.join(map(str, cmd[:6]))} ...` failed (exit {proc.returncode}); "
                        f"see {log.name}")


def _pip(py: Path, *args, log):
    _run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q", *args], log)


def _site_packages(py: Path) -> str:
    return subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()


def _make_venv(venv: Path, python: str, log) -> Path:
    if not venv_python(venv).exists():
        _run([python, "-m", "venv", venv], log)
    return venv_python(venv)


def ensure_base(root: Path, python: str, log) -> Path:
    base = root / f"base-{base_key()}"
    py = venv_python(base / "venv")
    if read_marker(base) is not None and py.exists():
        return py
    py = _make_venv(base / "venv", python, log)
    _pip(py, TORCH, log=log)  # first and alone: nothing later may pull a CUDA torch
    _pip(py, *BASE_PACKAGES, log=log)
    _pip(py, "--no-deps", *NO_DEPS, log=log)
    _pip(py, "--no-deps", "--no-build-isolation", write_torchvision_stub(root), log=log)
    _run([py, "-c", "import torch; assert torch.version.cuda is None, torch.version.cuda"], log)
    (base / MARKER).write_text(json.dumps({"base": base_key(), "packages": list(BASE_PACKAGES)}, indent=1))
    return py


def _release_pins(py: Path, names) -> list[str]:
    """The exact pins the installed sglang declares for these packages."""
    code = ("import importlib.metadata as m, re, json\n"
            "out = []\n"
            "for r in m.requires('sglang') or []:\n"
            "    if ';' in r and 'extra' in r.split(';', 1)[1]: continue\n"
            "    g = re.match(r'([A-Za-z0-9_.-]+)\\s*==\\s*([^;\\s]+)', r)\n"
            "    if g: out.append([g.group(1).lower(), g.group(2)])\n"
            "print(json.dumps(out))")
    pins = json.loads(subprocess.run([str(py), "-c", code], check=True, capture_output=True, text=True).stdout)
    return [f"{n}=={v}" for n, v in pins if n in names]


def _installed_version(py: Path) -> str:
    return subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
                          check=True, capture_output=True, text=True).stdout.strip()


def _source_package(source: Path) -> Path:
    """The folder holding sglang's pyproject.toml: the checkout itself, or its python/."""
    for d in (source, source / "python"):
        if (d / "pyproject.toml").is_file() and (d / "sglang").is_dir():
            return d
    raise UserError(f"--source {source}: no sglang package here (expected pyproject.toml next to sglang/, "
                    "or under python/)")


def setup(root: Path, version: str | None = None, source: str | None = None,
          python: str | None = None, force: bool = False, out=sys.stdout) -> Path:
    """Build (or find) the lane; returns its interpreter. Idempotent: a lane whose marker
    matches this base and this tiercheck checkout is returned at once."""
    if (version is None) == (source is None):
        raise UserError("tiercheck lane setup: give sglang==X.Y.Z or --source DIR (one of them)")
    if source is not None and not Path(source).is_dir():
        raise UserError(f"--source {source}: not a directory")
    python = python or getattr(sys, "_base_executable", None) or sys.executable
    tc_root = tiercheck_root()
    lane = root / lane_name(version, source)
    want = {"base": base_key(), "tiercheck": str(tc_root)}
    info = read_marker(lane)
    py = venv_python(lane / "venv")
    if not force and info is not None and py.exists() and all(info.get(k) == v for k, v in want.items()) \
            and (source is not None or info.get("sglang") == version):
        return py
    if force and lane.exists():
        shutil.rmtree(lane)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    lane.mkdir(parents=True, exist_ok=True)
    with open(lane / "setup.log", "a") as log:
        base_py = ensure_base(root, python, log)
        py = _make_venv(lane / "venv", python, log)
        (Path(_site_packages(py)) / "_tiercheck_lane_base.pth").write_text(_site_packages(base_py) + "\n")
        if source is not None:
            _pip(py, "--no-deps", "--no-build-isolation", "-e", _source_package(Path(source).resolve()), log=log)
        else:
            _pip(py, "--no-deps", f"sglang=={version}", log=log)
        pins = _release_pins(py, LANE_PINNED)
        if pins:  # with their own dependencies at the versions they need (e.g. tokenizers)
            _pip(py, *pins, log=log)
        bare = _release_pins(py, LANE_PINNED_NO_DEPS)
        if bare:
            _pip(py, "--no-deps", *bare, log=log)
        pins += bare
        if source is None:
            extras, stubs = release_extras(version)
            if extras:
                _pip(py, *extras, log=log)
            for name in stubs:
                _pip(py, "--no-deps", "--no-build-isolation", write_stub(root, name, STUBS[name]), log=log)
            pins += extras + [f"{name} (stand-in)" for name in stubs]
        _install_tiercheck(py, lane, tc_root, log)
        installed = _installed_version(py)
        from .shims import probe_command

        _run([py, "-c", probe_command()], log)  # sglang's cache modules import, the shim fits
    info = dict(want, sglang=installed, source=str(Path(source).resolve()) if source else None,
                pins=pins, seconds=round(time.monotonic() - t0, 1))
    (lane / MARKER).write_text(json.dumps(info, indent=1))
    print(f"lane {lane.name}: sglang {installed}, built in {info['seconds']} s", file=out)
    return py


def lane_spec_args(spec: str | None, source: str | None) -> tuple[str | None, str | None]:
    if source is not None:
        if spec is not None:
            raise UserError("tiercheck lane: give sglang==X.Y.Z or --source DIR, not both")
        return None, source
    if spec is None:
        raise UserError("tiercheck lane: give sglang==X.Y.Z or --source DIR")
    return parse_spec(spec), None


# --- the torchvision stand-in ------------------------------------------------------------

STUB_VERSION = "0.0.0+stub"
_STUB_MODULES = ("", "io", "ops", "ops.boxes", "transforms", "transforms.functional", "transforms.v2",
                 "transforms.v2.functional")
_PLACEHOLDER = '''"""Attributes of the torchvision stand-in: importable, unusable."""


class Placeholder:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"torchvision stand-in: {self._name} is not available in an SGLang CPU lane")


def module_getattr(modname):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Placeholder(f"{modname}.{name}")
    return __getattr__
'''


# Import-only stand-ins a release may need (name -> its submodules), see release_extras.
STUBS = {"sgl_kernel": ("", "kvcacheio")}


def write_torchvision_stub(root: Path) -> Path:
    """sglang (multimodal utils under sglang.srt.configs) and transformers import
    torchvision at module level; the real one drags a CUDA torch in. The KV-cache code
    never uses it, so lanes get an import-only stand-in whose attributes raise on use."""
    return write_stub(root, "torchvision", _STUB_MODULES)


def write_stub(root: Path, name: str, modules) -> Path:
    """An installable package ``name`` whose modules import and whose attributes raise on use."""
    stub = root / f"{name.replace('_', '-')}-stub"
    if stub.exists():
        shutil.rmtree(stub)
    pkg = stub / name
    pkg.mkdir(parents=True)
    (stub / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "{STUB_VERSION}"\n'
        f'description = "Import-only stand-in: SGLang CPU lanes never use {name}"\n'
        f'[tool.setuptools.packages.find]\ninclude = ["{name}*"]\n')
    (pkg / "_placeholder.py").write_text(_PLACEHOLDER.replace("torchvision stand-in", f"{name} stand-in"))
    subpackages = {m.rpartition(".")[0] for m in modules if "." in m}
    for mod in modules:
        dotted = ".".join(filter(None, (name, mod)))
        if mod == "" or mod in subpackages:
            target = pkg.joinpath(*filter(None, mod.split("."))) / "__init__.py"
        else:
            target = pkg.joinpath(*mod.split(".")).with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        body = (f'"""{name} stand-in ({dotted})."""\nfrom {name}._placeholder import module_getattr\n\n'
                f'__getattr__ = module_getattr("{dotted}")\n')
        if mod == "":
            body += f'__version__ = "{STUB_VERSION}"\n'
        target.write_text(body)
    return stub

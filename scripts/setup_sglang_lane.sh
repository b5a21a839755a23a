#!/usr/bin/env bash
# Build a separate venv holding upstream SGLang 0.5.23 on CPU (for the conformance adapter lane).
# Recipe: /work/shared/docs/environment.md, "SGLang 0.5.23 on CPU". Idempotent: a venv that
# already imports sglang 0.5.23 with the CPU torch is left alone (set SGLANG_LANE_FORCE=1 to redo).
set -euo pipefail

VENV="${SGLANG_LANE_VENV:-/work/sglang-lane/venv}"
PY="${SGLANG_LANE_PYTHON:-python3.11}"
START=$(date +%s)

done_msg() {
  local end; end=$(date +%s)
  echo "sglang lane ready: $VENV ($(du -sh "$VENV" | cut -f1)), took $((end - START)) s"
}

check() {
  "$VENV/bin/python" - <<'PY' >/dev/null 2>&1
import importlib.metadata as m, torch
assert m.version("sglang") == "0.5.23", m.version("sglang")
assert torch.__version__.startswith("2.13.0") and torch.version.cuda is None
import sglang.srt.mem_cache.unified_radix_cache  # noqa: F401  (the module the adapter drives)
import tiercheck.conformance.sglang_rank, hypothesis  # noqa: F401,E401  (the adapter itself)
PY
}

if [[ -x "$VENV/bin/python" && "${SGLANG_LANE_FORCE:-0}" != 1 ]] && check; then
  echo "already installed"; done_msg; exit 0
fi

command -v "$PY" >/dev/null || { echo "error: $PY not found (set SGLANG_LANE_PYTHON)" >&2; exit 2; }
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)

# CPU torch from the local wheel; never a bare `torch` (that pulls a CUDA build).
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" --no-deps "sglang==0.5.23"
"${PIP[@]}" --no-deps "triton==3.8.0"   # imported at top level by sglang, never used on CPU
"${PIP[@]}" numpy orjson psutil pybase64 requests packaging pillow starlette msgspec pydantic \
  pyzmq tqdm IPython aiohttp "apache-tvm-ffi==0.1.11" "transformers==5.19.0" dill \
  "sentencepiece==0.2.1" compressed-tensors gguf "openai==2.8.0" partial_json_parser "torch==2.13.0"

# torchvision is imported at module level by sglang (multimodal utils pulled in by sglang.srt.configs)
# and, once present, by transformers; a real install drags a CUDA torch. So the venv gets a tiny
# local stand-in: the submodules those imports name, whose attributes are placeholders that
# raise if anything actually uses them (the KV-cache code never does).
STUB="$(dirname "$VENV")/torchvision_stub"
rm -rf "$STUB"; mkdir -p "$STUB/torchvision"
cat > "$STUB/pyproject.toml" <<'TOML'
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"
[project]
name = "torchvision"
version = "0.0.0+stub"
description = "Import-only stand-in: the sglang CPU lane never uses torchvision"
[tool.setuptools.packages.find]
include = ["torchvision*"]
TOML
cat > "$STUB/torchvision/_placeholder.py" <<'PYS'
"""Attributes of the torchvision stand-in: importable, unusable."""


class Placeholder:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"torchvision stub: {self._name} is not available in the sglang CPU lane")


def module_getattr(modname):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Placeholder(f"{modname}.{name}")
    return __getattr__
PYS
for mod in "" io ops ops/boxes transforms transforms/functional transforms/v2 transforms/v2/functional; do
  if [[ -z "$mod" ]]; then f="$STUB/torchvision/__init__.py"; dotted=torchvision
  elif [[ "$mod" == ops || "$mod" == transforms || "$mod" == transforms/v2 ]]; then
    mkdir -p "$STUB/torchvision/$mod"; f="$STUB/torchvision/$mod/__init__.py"; dotted="torchvision.${mod//\//.}"
  else f="$STUB/torchvision/$mod.py"; dotted="torchvision.${mod//\//.}"; fi
  printf '"""torchvision stand-in (%s)."""\nfrom torchvision._placeholder import module_getattr\n\n__getattr__ = module_getattr("%s")\n' "$dotted" "$dotted" > "$f"
done
echo '__version__ = "0.0.0+stub"' >> "$STUB/torchvision/__init__.py"
"${PIP[@]}" --no-deps --no-build-isolation "$STUB"

# tiercheck itself (editable, this checkout) with what its conformance code imports; z3 is
# left out (only `conform --z3` uses it). coverage measures upstream line coverage.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"${PIP[@]}" "hypothesis>=6.100" "pytest>=8" "networkx>=3.0" "itf-py>=0.5" coverage setuptools
"${PIP[@]}" --no-deps --no-build-isolation -e "$ROOT"

check || { echo "error: sglang lane venv does not import (see $VENV)" >&2; "$VENV/bin/python" -c \
  "import sglang.srt.mem_cache.unified_radix_cache" ; exit 1; }
done_msg

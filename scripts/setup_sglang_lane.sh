#!/usr/bin/env bash
# Retired: lanes are `tiercheck lane setup sglang==X.Y.Z` (docs/sglang.md); this prints the lane's interpreter.
exec "${PYTHON:-python}" -m tiercheck lane setup "sglang==${SGLANG_VERSION:-0.5.23}" "$@"

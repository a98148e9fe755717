#!/bin/sh
# Installs the Debian packages tessera needs, only those that are missing.
set -e
PKGS="build-essential cmake pkg-config clang clang-format libclang-rt-14-dev
      llvm-19-dev libsqlite3-dev libcurl4-openssl-dev libmicrohttpd-dev
      libcmocka-dev libxgboost-dev libcjson-dev libopenblas-dev libdnnl-dev"
missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -z "$missing" ]; then
  exit 0
fi
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

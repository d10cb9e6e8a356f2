#!/usr/bin/env bash
# tools/setup.sh — install what luamx needs on Debian bookworm (apt) and build it.
#   ./tools/setup.sh            apt packages (only the missing ones) + build into build/
#   ./tools/setup.sh --deps     apt packages only
#   ./tools/setup.sh --build    build only
#   ./tools/setup.sh --data     the data sets of mx.gluonts only (tools/gluonts_data.sh)
# Then run from the checkout with
#   LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lib/?.so;;' luajit script.lua
# or install the rock (docs/install.md). Needs root (or sudo) for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-all}
PKGS=(build-essential cmake pkg-config git ca-certificates luajit libluajit-5.1-dev luarocks
  lua-busted lua-check libopenblas-dev libdnnl-dev zlib1g-dev libjpeg62-turbo-dev libpng-dev
  dataset-fashion-mnist rlwrap opencv-doc libjansson-dev libzmq3-dev libopenmpi-dev openmpi-bin
  fortunes python3-statsmodels r-base-core python3-pip unzip lua-cjson)

if [ "$MODE" = all ] || [ "$MODE" = --deps ]; then
  missing=()
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "setup: apt-get install ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q </dev/null >/dev/null
    $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends \
      "${missing[@]}" </dev/null >/dev/null
  fi
fi
if [ "$MODE" = all ] || [ "$MODE" = --deps ] || [ "$MODE" = --data ]; then
  # the real series of mx.gluonts (R's datasets, statsmodels, the pmdarima wheel)
  bash tools/gluonts_data.sh || echo "setup: tools/gluonts_data.sh failed (gluonts data sets)" >&2
fi
if [ "$MODE" = all ] || [ "$MODE" = --build ]; then
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
  fi
  echo "setup: building into build/ ($(nproc) jobs)" >&2
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  if ! cmake --build build -j"$(nproc)" >build/build.log 2>&1; then
    grep -E 'error|Error' build/build.log | head -30 >&2
    echo "setup: build failed (build/build.log)" >&2
    exit 1
  fi
  echo "setup: built $(ls build/lib/mx | tr '\n' ' ')" >&2
fi

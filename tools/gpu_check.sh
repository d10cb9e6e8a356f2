#!/usr/bin/env bash
# tools/gpu_check.sh — the GPU check of luamx: #gpu specs + a small GPU benchmark.
#
# The GPU machine (see bench/GPU.md) has nvcc, cmake and PyTorch but no LuaJIT,
# OpenBLAS or package registries, so the check travels as a carried build dir:
#
#   here:   tools/gpu_check.sh pack      # builds build-gpu/ (libmx + libmx_cuda for
#                                        # sm_90, LuaJIT, busted, runtime .so files)
#   there:  tools/gpu_check.sh           # run through the device tool with
#                                        # carry=["build-gpu"], e.g.
#           run(command="tools/gpu_check.sh", carry=["build-gpu"], timeout_s=420)
#
# Without build-gpu/, the script builds in build-gpu-obj with the machine's own
# cmake/nvcc/luajit/OpenBLAS (when they exist there) and uses that.
# Prints a summary; exits non-zero when a spec failed or no GPU was usable.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PKG=build-gpu
ARCH=${MX_CUDA_ARCH:-90}

pack() {
  local obj=build-gpu-obj
  export PATH=$PATH:/usr/local/cuda/bin
  # -Wno-error=maybe-uninitialized: without oneDNN, gcc's inliner warns (falsely) in
  # kernels/cpu/linalg.c's attention kernels and -Werror would stop the pack
  cmake -S . -B $obj -DCMAKE_BUILD_TYPE=Release -DMX_USE_CUDA=ON -DMX_USE_ONEDNN=OFF \
    -DCMAKE_C_FLAGS="-Wno-error=maybe-uninitialized" \
    -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >/dev/null || exit 1
  if ! cmake --build $obj -j"$(nproc)" >$obj/build.log 2>&1; then
    grep -E 'error' $obj/build.log | head -20; echo "build failed ($obj/build.log)"; exit 1
  fi
  [ -f $obj/lib/mx/libmx_cuda.so ] || { echo "libmx_cuda was not built"; exit 1; }
  rm -rf $PKG && mkdir -p $PKG/lib/mx $PKG/rt/bin $PKG/rt/lib $PKG/rt/share $PKG/rt/clib
  cp $obj/lib/mx/libmx.so $obj/lib/mx/libmx_cuda.so $PKG/lib/mx/
  # libmx_nccl travels without libnccl.so.2 (~200 MB, over the carry limit): the GPU
  # machine's own NCCL is used (nccl_libdir below: PyTorch's nvidia-nccl or the toolkit's)
  [ -f $obj/lib/mx/libmx_nccl.so ] && cp $obj/lib/mx/libmx_nccl.so $PKG/lib/mx/
  cp "$(command -v luajit)" $PKG/rt/bin/luajit
  cp /usr/bin/busted $PKG/rt/bin/busted.lua
  cp -rL /usr/share/lua/5.1/. $PKG/rt/share/
  cp -rL /usr/lib/x86_64-linux-gnu/lua/5.1/. $PKG/rt/clib/ 2>/dev/null || true
  # shared libraries libmx needs that a CUDA image may lack
  for so in $(ldd $PKG/lib/mx/libmx.so | awk '/=> \//{print $3}'); do
    case "$(basename "$so")" in
      libc.so*|libm.so*|libmvec.so*|libgcc_s.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;
      *) cp -L "$so" $PKG/rt/lib/ ;;
    esac
  done
  for so in $PKG/rt/lib/*; do # their own dependencies (libgfortran, libquadmath ...)
    for d in $(ldd "$so" | awk '/=> \//{print $3}'); do
      case "$(basename "$d")" in
        libc.so*|libm.so*|libmvec.so*|libgcc_s.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;
        *) [ -f $PKG/rt/lib/"$(basename "$d")" ] || cp -L "$d" $PKG/rt/lib/ ;;
      esac
    done
  done
  strip --strip-unneeded $PKG/rt/lib/*.so* 2>/dev/null || true
  echo "packed $PKG: $(du -sh $PKG | cut -f1) (limit for the device tool: 64 MiB)"
  echo "run there: tools/gpu_check.sh   (carry: [\"$PKG\"])"
}

if [ "${1:-}" = pack ]; then pack; exit; fi

# The directory of a libnccl.so.2 on this machine (the toolkit's, the system's, or the one
# PyTorch's nvidia-nccl wheel ships), or nothing.
nccl_libdir() {
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/libnccl.so.2" ] && { echo "$d"; return; }
  done
  local py; py=$(command -v python3 || true)
  [ -n "$py" ] && "$py" - <<'PY' 2>/dev/null
import glob, site, sys
dirs = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
for d in dirs:
    for f in glob.glob(d + "/nvidia/nccl/lib/libnccl.so.2"):
        print(f.rsplit("/", 1)[0]); sys.exit(0)
PY
}

# ---- on the GPU machine ------------------------------------------------------
say() { printf '== %s\n' "$*"; }
OUTDIR=${OUT:-/tmp/gpu_check}
mkdir -p "$OUTDIR"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
  | sed 's/^/GPU: /' || say "nvidia-smi not available"

if [ -f $PKG/lib/mx/libmx_cuda.so ] && [ -x $PKG/rt/bin/luajit ]; then
  LUAJIT=$ROOT/$PKG/rt/bin/luajit
  export LD_LIBRARY_PATH=$ROOT/$PKG/rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  LIBDIR=$PKG
  BUSTED=("$LUAJIT" "$ROOT/$PKG/rt/bin/busted.lua" --ignore-lua)
  export PATH=$ROOT/$PKG/rt/bin:$PATH
  export LUA_PATH="$ROOT/lua/?.lua;$ROOT/lua/?/init.lua;$ROOT/spec/?.lua;$ROOT/$PKG/rt/share/?.lua;$ROOT/$PKG/rt/share/?/init.lua;;"
  export LUA_CPATH="$ROOT/$PKG/lib/?.so;$ROOT/$PKG/rt/clib/?.so;;"
  say "using the carried build in $PKG"
else
  say "no carried $PKG: building with this machine's tools"
  export PATH=$PATH:/usr/local/cuda/bin
  command -v luajit >/dev/null || { say "FAILED: no luajit here and no carried $PKG (run 'tools/gpu_check.sh pack' first)"; exit 1; }
  cmake -S . -B build-gpu-obj -DCMAKE_BUILD_TYPE=Release -DMX_USE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >"$OUTDIR/configure.log" 2>&1 &&
    cmake --build build-gpu-obj -j"$(nproc)" >"$OUTDIR/build.log" 2>&1 ||
    { tail -30 "$OUTDIR/build.log" "$OUTDIR/configure.log"; say "FAILED: build"; exit 1; }
  LUAJIT=luajit
  LIBDIR=build-gpu-obj
  BUSTED=(busted --lua=luajit)
  export LUA_PATH="$ROOT/lua/?.lua;$ROOT/lua/?/init.lua;$ROOT/spec/?.lua;;"
  export LUA_CPATH="$ROOT/build-gpu-obj/lib/?.so;;"
fi

NGPU=$("$LUAJIT" -e 'local mx = require("mx"); io.write(mx.num_gpus())' 2>"$OUTDIR/load.err")
STATUS=$("$LUAJIT" -e 'local ffi = require("ffi"); require("mx"); io.write(ffi.string(require("mx.core.lib").C.mx_gpu_status()))' 2>/dev/null)
say "mx.num_gpus() = ${NGPU:-?} ${STATUS:+($STATUS)}"
cat "$OUTDIR/load.err"
[ "${NGPU:-0}" -gt 0 ] 2>/dev/null || { say "FAILED: no usable GPU"; exit 1; }

say "specs: #gpu"
"${BUSTED[@]}" -o TAP --cpath="$LIBDIR/lib/?.so" --tags=gpu --exclude-tags=__none__ \
  spec/gpu_spec.lua >"$OUTDIR/gpu_spec.tap" 2>&1
src=$?
grep -A12 '^not ok' "$OUTDIR/gpu_spec.tap" | head -80
SPECS=$(awk '/^ok .*# SKIP/{s++;next}/^ok /{p++}/^not ok /{f++}END{printf "%d passed, %d failed, %d skipped",p,f,s}' "$OUTDIR/gpu_spec.tap")
say "gpu_spec: $SPECS (busted exit $src)"

say "specs: nccl #gpu (kvstore_nccl_spec: allreduce/broadcast/kvstore over all GPUs)"
NCCLDIR=$(nccl_libdir)
if [ -f $LIBDIR/lib/mx/libmx_nccl.so ] && [ -n "$NCCLDIR" ]; then
  say "libnccl.so.2 from $NCCLDIR"
  LD_LIBRARY_PATH=$NCCLDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "${BUSTED[@]}" -o TAP \
    --cpath="$LIBDIR/lib/?.so" --tags=gpu --exclude-tags=__none__ \
    spec/kvstore_nccl_spec.lua >"$OUTDIR/nccl_spec.tap" 2>&1
  nrc=$?
  grep -A12 '^not ok' "$OUTDIR/nccl_spec.tap" | head -60
  NSPECS=$(awk '/^ok .*# SKIP/{s++;next}/^ok /{p++}/^not ok /{f++}END{printf "%d passed, %d failed, %d skipped",p,f,s}' "$OUTDIR/nccl_spec.tap")
  say "nccl_spec: $NSPECS (busted exit $nrc)"
  [ "$nrc" -eq 0 ] || src=1
else
  say "nccl_spec: not run ($([ -f $LIBDIR/lib/mx/libmx_nccl.so ] && echo 'no libnccl.so.2 on this machine' || echo 'libmx_nccl not built'))"
fi

say "benchmark"
: >"$OUTDIR/gpu_bench.txt"
MX_BUILD=$LIBDIR "$LUAJIT" bench/gpu_bench.lua | tee -a "$OUTDIR/gpu_bench.txt"
PY=$(command -v python3 || true)
if [ -n "$PY" ] && "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  "$PY" bench/gpu_bench.py | tee -a "$OUTDIR/gpu_bench.txt"
else
  say "PyTorch with CUDA not available: no peer numbers"
fi
if [ -n "$PY" ]; then
  "$PY" bench/compare.py "$OUTDIR/gpu_bench.txt" | tee "$OUTDIR/gpu_bench.md"
fi
say "summary: gpu_spec $SPECS; nccl_spec ${NSPECS:-not run}; benchmark table above (also in $OUTDIR)"
[ "$src" -eq 0 ]

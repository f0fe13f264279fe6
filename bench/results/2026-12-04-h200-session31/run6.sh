#!/usr/bin/env bash
# Session 31, run 6: is run 5's warp barrier worth its rule? Same machine:
# "new" the tree (warp barriers between short-stride stages, the best key by
# a maximum), "base" a copy whose stage_barrier() is always __syncthreads()
# (the best key by a maximum too); CUPTI timelines of a sampled 0.5B step,
# alternated, two each.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
base=/tmp/ab-base
rm -rf "$base" && mkdir -p "$base"
tar --exclude=./build-gpu --exclude=./gpu-out --exclude=./.git -cf - . | tar -xf - -C "$base"
python3 - "$base/kernels/sample.cu" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
old = """  if (stride <= 32 && next > 0 && next <= 32) {
    __syncwarp();
  } else {
    __syncthreads();
  }"""
assert old in s
s = s.replace(old, "  __syncthreads();")
open(p, "w").write(s)
PY
export TIMELINE_MODELS="qwen2.5-0.5b:q8_0" TIMELINE_ENVS="MINFER_TIMELINE_TEMP=0.8" BUILD_TARGETS="gpu_decode_timeline minfer"
OUT=$out/new bash tests/gpu/run_on_device.sh build > "$out/new-build.log" 2>&1
OUT=$out/base BUILD_DIR=$base/build bash "$base/tests/gpu/run_on_device.sh" build > "$out/base-build.log" 2>&1
tail -3 "$out/new-build.log" "$out/base-build.log"
for i in 1 2; do
  OUT=$out/n$i bash tests/gpu/run_on_device.sh timeline 2>&1 | grep "^step\|sample_kernel" | sed "s/^/new $i: /"
  OUT=$out/b$i BUILD_DIR=$base/build bash "$base/tests/gpu/run_on_device.sh" timeline 2>&1 | grep "^step\|sample_kernel" | sed "s/^/base $i: /"
done
rm -rf "${out:?}"/*/

#!/usr/bin/env bash
# Session 38, run 2: how much of the pipelined products' share of a decode
# step is their arithmetic. A second build with -DMINFER_PIPE_NO_DOT
# (nodot.patch: Phase::dot folds the staged weight words instead of reading
# the activations and taking the dot products; wrong values, the same copies,
# waits and launches) against the committed kernels: CUPTI shares of a 7B
# Q4_K_M and a 7B Q8_0 decode step from each.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
res=/tmp/run2; rm -rf "$res"; mkdir -p "$res"
for b in tree nodot; do
  extra=""; [ $b = nodot ] && extra="-DCMAKE_CUDA_FLAGS=-DMINFER_PIPE_NO_DOT=1"
  OUT=$res/build-$b BUILD_DIR=$root/build-$b CMAKE_ARGS="$extra" BUILD_TARGETS="minfer gpu_decode_timeline" \
    bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
  echo "== build $b" >> "$res/all.md"; cat "$res/build-$b/summary.md" >> "$res/all.md"
done
for b in tree nodot; do
  OUT=$res/tl-$b BUILD_DIR=$root/build-$b TIMELINE_MODELS="qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0" \
    timeout 240 bash tests/gpu/run_on_device.sh timeline >/dev/null 2>&1
  echo "== timeline $b" >> "$res/all.md"; grep -A14 "decode timeline" "$res/tl-$b/summary.md" | grep -v "^--" >> "$res/all.md"
done
cp "$res/all.md" "$out/run2-summary.md"
cat "$out/run2-summary.md"

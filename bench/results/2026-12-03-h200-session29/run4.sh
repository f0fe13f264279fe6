#!/usr/bin/env bash
# Session 29, run 4: the sampler's cost between a sampled request's decode
# steps, on the GPU. "new" is this tree; "base" a copy with
# engine/sampling/sampler.cpp as committed before the change (carried as
# .carry/base/sampler.cpp). minferd of each serves synth 0.5B Q8_0 (greedy and
# sampled, steps ahead and not: run_on_device.sh serve), two rounds
# alternating new and base. (Run 3 tried this with ab_files.sh, whose base
# copy lacked a file this session added, so base never built.)
set -u
root=$(pwd)
out=${OUT:-$root/gpu-out}
base=/tmp/sampler-base
rm -rf "$base" && mkdir -p "$base"
tar --exclude=./build-gpu --exclude=./gpu-out -cf - . | tar -xf - -C "$base"
cp .carry/base/sampler.cpp "$base/engine/sampling/sampler.cpp"
export BUILD_TARGETS="minfer minferd" SERVE_MODELS="qwen2.5-0.5b:q8_0"
show() { echo "== $1"; grep -E "^serve|^build" "$out/$1/summary.md"; }
OUT=$out/new bash tests/gpu/run_on_device.sh build >/dev/null 2>&1; show new
OUT=$out/base BUILD_DIR=$base/build bash "$base/tests/gpu/run_on_device.sh" build >/dev/null 2>&1; show base
for i in 1 2; do
  OUT=$out/n$i bash tests/gpu/run_on_device.sh serve >/dev/null 2>&1; show "n$i"
  OUT=$out/b$i BUILD_DIR=$base/build bash "$base/tests/gpu/run_on_device.sh" serve >/dev/null 2>&1; show "b$i"
done
rm -rf "${out:?}"/*/

#!/usr/bin/env bash
# Session 31, run 5: the draw's compare-exchange networks with a warp barrier
# between stages of strides up to 32 (a block barrier only where warps meet),
# and each thread's best key by a maximum instead of a sort of its 8. The GPU
# tests, tg128 sampled and penalized 0.5B Q8_0, a CUPTI timeline of a sampled
# 0.5B step, then a build with the phase probes and the draw's phases.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session31-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
bash tests/gpu/run_on_device.sh build test; keep test
BENCH_SAMPLED_MODELS="qwen2.5-0.5b:q8_0" bash tests/gpu/run_on_device.sh bench-sampled; keep sampled
TIMELINE_MODELS="qwen2.5-0.5b:q8_0" TIMELINE_ENVS="MINFER_TIMELINE_TEMP=0.8" bash tests/gpu/run_on_device.sh timeline
keep timeline
[ "$SECONDS" -lt 420 ] && {
  PHASE_PROBES=ON BUILD_DIR=$root/build-probe BUILD_TARGETS="gpu_decode_timeline minfer" TIMELINE_MODELS="qwen2.5-0.5b:q8_0" \
    TIMELINE_ENVS="MINFER_TIMELINE_TEMP=0.8,MINFER_PHASE_PROBE=1" bash tests/gpu/run_on_device.sh build timeline; keep probe; }

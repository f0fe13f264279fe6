#!/usr/bin/env bash
# Session 30, run 3: where the draw's 34 µs go (run 2's CUPTI step of a
# sampled 0.5B Q8_0 token): the phase probes of launch_sample's blocks and of
# its last block, in a build with -DMINFER_PHASE_PROBES=ON.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
PHASE_PROBES=ON BUILD_TARGETS="gpu_decode_timeline minfer" TIMELINE_MODELS="qwen2.5-0.5b:q8_0" \
  TIMELINE_ENVS="MINFER_TIMELINE_TEMP=0.8,MINFER_PHASE_PROBE=1" bash tests/gpu/run_on_device.sh build timeline
cp "$out/summary.md" "$out/all.md"

#!/usr/bin/env bash
# Session 31, run 3: run 2's kernel (one warp sorts the candidates; the last
# block takes the lists as a chunk) with the phase probes built in, a sampled
# 0.5B step's draw phase by phase, as session 30's run 3 measured the kernel
# before.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
PHASE_PROBES=ON BUILD_TARGETS="gpu_decode_timeline minfer" TIMELINE_MODELS="qwen2.5-0.5b:q8_0" \
  TIMELINE_ENVS="MINFER_TIMELINE_TEMP=0.8,MINFER_PHASE_PROBE=1" bash tests/gpu/run_on_device.sh build timeline
cp "$out/summary.md" "$out/all.md"

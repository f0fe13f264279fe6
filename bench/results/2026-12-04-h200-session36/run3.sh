#!/usr/bin/env bash
# Session 36, run 3: where the split decode attention's blocks spend their
# time (phase probe build, -DMINFER_PHASE_PROBES=ON), 4,096 cells deep on
# 0.5B Q8_0 and 7B Q4_K_M, and after a 64-token prompt with the split forced.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session36-keeps3; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
P=$root/build-probe
PHASE_PROBES=ON BUILD_DIR=$P BUILD_TARGETS="minfer gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep build-probe
BUILD_DIR=$P TIMELINE_PROMPT=4096 TIMELINE_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m" \
  TIMELINE_ENVS="MINFER_PHASE_PROBE=1" bash tests/gpu/run_on_device.sh timeline; keep timeline-d4096
BUILD_DIR=$P TIMELINE_PROMPT=64 TIMELINE_MODELS="qwen2.5-7b:q4_k_m" \
  TIMELINE_ENVS="MINFER_PHASE_PROBE=1,MINFER_ATTN_DECODE=split" bash tests/gpu/run_on_device.sh timeline; keep timeline-d64
(cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"

#!/usr/bin/env bash
# Session 52, run 1: the committed split decode attention (less the dead f16
# branch of cell_score) through the GPU suites, then its phase probe 4,096
# cells deep (-DMINFER_PHASE_PROBES=ON) on 7B Q4_K_M and 0.5B Q8_0: where the
# blocks and the last block's combine spend their time since session 51's
# rework (session 51 run 1 probed the kernel before it).
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session52-keeps1; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new P=$root/build-probe
BUILD_DIR=$N bash tests/gpu/run_on_device.sh build; keep 1-build
BUILD_DIR=$N GPU_TEST_TIMEOUT=240 bash tests/gpu/run_on_device.sh test; keep 2-test
PHASE_PROBES=ON BUILD_DIR=$P BUILD_TARGETS="minfer gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep 3-build-probe
BUILD_DIR=$P TIMELINE_PROMPT=4096 TIMELINE_MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0" \
  TIMELINE_ENVS="MINFER_PHASE_PROBE=1,MINFER_ATTN_DECODE=split" bash tests/gpu/run_on_device.sh timeline; keep 4-probe-split
cat "$out/all.md"

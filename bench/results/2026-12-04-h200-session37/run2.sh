#!/usr/bin/env bash
# Session 37, run 2: the kernel tests again after run 1's test fixes (the
# fits check only for launches with the prologue; the plain kernels' missing
# tail for 7B Q8_0 rows with the pipelined kernel off), the engine switch
# test, then where the pipelined q/k/v kernel's blocks spend a 7B step
# (phase probe build, kind 7), with and without 8 stages.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session37-keeps2; rm -rf "$keeps"; mkdir -p "$keeps"
save() { mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
B=$root/build-gpu
P=$root/build-probe
BUILD_DIR=$B BUILD_TARGETS="gpu_kernels_test gpu_engine_test" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
cp "$out/summary.md" "$keeps/build.md"
timeout 120 "$B/tests/gpu/gpu_kernels_test" --gtest_filter='*QkvTail*:*Bridge*' > "$keeps/k.full" 2>&1; echo "gpu_kernels_test rc=$?" >> "$keeps/tests.md"
timeout 120 "$B/tests/gpu/gpu_engine_test" --gtest_filter='CudaQkv*' > "$keeps/e.full" 2>&1; echo "gpu_engine_test rc=$?" >> "$keeps/tests.md"
grep -hE "^\[  (PASSED|FAILED)  \]|Failure|Which is|trace" "$keeps/k.full" "$keeps/e.full" | head -40 >> "$keeps/tests.md"; gzip -f "$keeps"/*.full
save
PHASE_PROBES=ON BUILD_DIR=$P BUILD_TARGETS="minfer gpu_decode_timeline" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
cp "$out/summary.md" "$keeps/build-probe.md"
BUILD_DIR=$P TIMELINE_MODELS="qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0" \
  TIMELINE_ENVS="MINFER_PHASE_PROBE=1 MINFER_PHASE_PROBE=1,MINFER_PIPED_STAGES=8" bash tests/gpu/run_on_device.sh timeline >/dev/null 2>&1
grep -E "^timeline|decode timeline|^step|qkv|norm|gate_up|phase probe|: [0-9]+ blocks" "$out/summary.md" > "$keeps/timeline.md"
save
cat "$keeps"/*.md

#!/usr/bin/env bash
# Session 37, run 3: the pipelined q/k/v kernel with the row's loads issued
# right after the PDL wait, before the stages that go out after it, and the
# biases staged before the wait (run 2's probe: the norm 2.6 µs a block, its
# row queued behind the weights in flight; the tail 1.1). Tests, then tg128
# with MINFER_QKV_EARLY = all (the default) / 0 / 1 / 2 steps before the
# wait against MINFER_QKV_PIPED=0, and CUPTI shares of the arms.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session37-keeps3; rm -rf "$keeps"; mkdir -p "$keeps"
save() { mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_decode_timeline" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
cp "$out/summary.md" "$keeps/build.md"
timeout 120 "$B/tests/gpu/gpu_kernels_test" --gtest_filter='*QkvTail*:*Bridge*' > "$keeps/k.full" 2>&1; echo "gpu_kernels_test rc=$?" >> "$keeps/tests.md"
MINFER_QKV_EARLY=0 timeout 120 "$B/tests/gpu/gpu_engine_test" --gtest_filter='CudaQkv*' > "$keeps/e0.full" 2>&1; echo "gpu_engine_test (MINFER_QKV_EARLY=0) rc=$?" >> "$keeps/tests.md"
timeout 120 "$B/tests/gpu/gpu_engine_test" --gtest_filter='CudaQkv*:CudaSwitches.*' > "$keeps/e.full" 2>&1; echo "gpu_engine_test rc=$?" >> "$keeps/tests.md"
grep -hE "^\[  (PASSED|FAILED)  \]|Failure|Which is|trace" "$keeps/k.full" "$keeps/e0.full" "$keeps/e.full" | head -40 >> "$keeps/tests.md"; gzip -f "$keeps"/*.full
save
models=/tmp/minfer-models; mkdir -p "$models"
tg() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $label | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.0f}\" for r in j['results']) + ' |')"
}
for m in qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for pass in 1 2; do
    tg "$m off (pass $pass)" "$f" MINFER_QKV_PIPED=0 >> "$keeps/tg.md"
    for e in -1 0 1 2; do tg "$m early=$e (pass $pass)" "$f" MINFER_QKV_EARLY=$e >> "$keeps/tg.md"; done
  done
  save
done
BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0" TIMELINE_ENVS="MINFER_QKV_PIPED=0 MINFER_QKV_EARLY=0 MINFER_QKV_EARLY=1" \
  bash tests/gpu/run_on_device.sh timeline >/dev/null 2>&1
grep -E "^timeline|decode timeline|^step|qkv|norm|gate_up|attention|matvec" "$out/summary.md" > "$keeps/timeline.md"
save
cat "$keeps"/*.md

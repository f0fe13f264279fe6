#!/usr/bin/env bash
# Session 37, run 1: q, k and v in one pipelined launch that normalises its
# input itself and ends with the q/k/v tail (kernels/matvec_qkv.cu), so that
# the one-block deferred norm before q/k/v is no launch of its own where the
# row is too wide for the plain kernels' prologue (7B: 3,584). The tests that
# cover it (kernel: the fold cases, bit for bit against the norm launch, the
# product and the tail apart; engine: the switch on a 1.5B Q8_0), then tg128
# with MINFER_QKV_PIPED=0 / 1 alternating, and CUPTI shares of a 7B step.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=$out/keeps; mkdir -p "$keeps"
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_decode_timeline" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
cp "$out/summary.md" "$keeps/build.md"
timeout 150 "$B/tests/gpu/gpu_kernels_test" --gtest_filter='*QkvTail*:*Matvec*:*Deferred*:*Bridge*:*Piped*' > "$keeps/k.full" 2>&1; echo "gpu_kernels_test rc=$?" >> "$keeps/tests.md"
timeout 150 "$B/tests/gpu/gpu_engine_test" --gtest_filter='CudaQkv*:CudaSwitches.*:CudaGraphs.*' > "$keeps/e.full" 2>&1; echo "gpu_engine_test rc=$?" >> "$keeps/tests.md"
grep -hE "^\[  (PASSED|FAILED)  \]|Failure|Expected|Which is|actual|mismatch" "$keeps/k.full" "$keeps/e.full" | head -60 >> "$keeps/tests.md"; gzip -f "$keeps"/*.full
models=/tmp/minfer-models; mkdir -p "$models"
tg() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" "$B/daemon/minfer" bench -m "$f" --backend cuda -p 512 -n 128 -r 2 -o json 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $label | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.0f}\" for r in j['results']) + ' |')"
}
for m in qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0 qwen2.5-1.5b:q8_0; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for pass in 1 2; do
    for on in 0 1; do tg "$m qkv_piped=$on (pass $pass)" "$f" MINFER_QKV_PIPED=$on >> "$keeps/tg.md"; done
  done
done
BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0" TIMELINE_ENVS="- MINFER_QKV_PIPED=0" \
  bash tests/gpu/run_on_device.sh timeline >/dev/null 2>&1
grep -A14 "^timeline\|decode timeline" "$out/summary.md" | grep -v "^--" > "$keeps/timeline.md"
cat "$keeps"/*.md

#!/usr/bin/env bash
# Session 38, run 1: decode attention with the O projection and its residual
# add in its launch (MINFER_FUSE_ATTN_O=1; kernels/attention_decode.cu
# attention_o_tail): block (head, slice of W_o's rows), the head's columns of
# W_o pulled into L2 before the PDL wait, the heads' partial sums added by each
# slice's last block in head order. The tests that cover it (kernel: against
# the attention then the product, 7B's and 0.5B's shapes; engine: the switch
# on a 0.5B, graphs vs eager), then tg128 with the switch 0 / 1 alternating,
# 7B with 2 and 3 slices a head too, 0.5B Q8_0 eager, and CUPTI shares.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=$out/keeps; mkdir -p "$keeps"
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_decode_timeline" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
cp "$out/summary.md" "$keeps/build.md"
timeout 150 "$B/tests/gpu/gpu_kernels_test" --gtest_filter='*Attention*' > "$keeps/k.full" 2>&1; echo "gpu_kernels_test rc=$?" >> "$keeps/tests.md"
timeout 150 "$B/tests/gpu/gpu_engine_test" --gtest_filter='CudaAttentionO.*:CudaQkv*:CudaGraphs.*:CudaParity.*' > "$keeps/e.full" 2>&1; echo "gpu_engine_test rc=$?" >> "$keeps/tests.md"
grep -hE "^\[  (PASSED|FAILED)  \]|Failure|Expected|Which is|actual|mismatch|parity   \]" "$keeps/k.full" "$keeps/e.full" | head -60 >> "$keeps/tests.md"; gzip -f "$keeps"/*.full
models=/tmp/minfer-models; mkdir -p "$models"
tg() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" timeout 60 "$B/daemon/minfer" bench -m "$f" --backend cuda -p 512 -n 128 -r 2 -o json 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $label | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.0f}\" for r in j['results']) + ' |')"
}
for m in qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0 qwen2.5-7b:q8_0 qwen2.5-1.5b:q4_k_m qwen2.5-0.5b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for pass in 1 2; do
    for on in 0 1; do tg "$m fuse_o=$on (pass $pass)" "$f" MINFER_FUSE_ATTN_O=$on >> "$keeps/tg.md"; done
  done
  case $m in
    qwen2.5-7b:q4_k_m) for s in 2 3; do tg "$m fuse_o=1 slices=$s" "$f" MINFER_FUSE_ATTN_O=1 MINFER_ATTN_O_SLICES=$s >> "$keeps/tg.md"; done ;;
    qwen2.5-0.5b:q8_0) for on in 0 1; do tg "$m fuse_o=$on eager" "$f" MINFER_FUSE_ATTN_O=$on MINFER_NO_CUDA_GRAPH=1 >> "$keeps/tg.md"; done
                       for s in 4 9; do tg "$m fuse_o=1 slices=$s" "$f" MINFER_FUSE_ATTN_O=1 MINFER_ATTN_O_SLICES=$s >> "$keeps/tg.md"; done ;;
  esac
done
BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0" TIMELINE_ENVS="- MINFER_FUSE_ATTN_O=1" \
  timeout 200 bash tests/gpu/run_on_device.sh timeline >/dev/null 2>&1
grep -A14 "^timeline\|decode timeline" "$out/summary.md" | grep -v "^--" > "$keeps/timeline.md"
cat "$keeps"/*.md

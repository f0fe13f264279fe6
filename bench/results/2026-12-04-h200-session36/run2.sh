#!/usr/bin/env bash
# Session 36, run 2: the split decode attention in one launch (a block a KV
# head and range of cells, as many ranges as fill the GPU, the last block of
# each KV head combining). Its kernel and engine tests; tg128 deep into the
# context for auto / heads / split; CUPTI shares 4,096 cells deep.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session36-keeps2; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep build
{
  timeout 200 "$B/tests/gpu/gpu_kernels_test" --gtest_filter='*Attention*' 2>&1 | grep -E "^\[ +(FAILED|PASSED|OK) +\]|Failure|error|expected|Which|worst" | grep -v "^\[       OK \]" | head -40
  timeout 200 "$B/tests/gpu/gpu_engine_test" --gtest_filter='CudaSwitches.Attention*:CudaGraphs.*' 2>&1 | grep -E "^\[ +(FAILED|PASSED|OK) +\]|Failure|expected|Which" | head -30
} 2>&1 | tee "$keeps/keep-tests.md"
models=/tmp/minfer-models; mkdir -p "$models"
for m in qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
done
deep() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 2 -d 0 512 1024 4096 8192 -o json 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $label | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.0f}\" for r in j['results']) + ' |')"
}
{
  echo "| arm | tg128 tok/s by depth |"
  echo "|---|---|"
  for m in qwen2.5-0.5b-q8_0 qwen2.5-7b-q4_k_m; do
    for a in auto heads split; do deep "$m $a" "$models/$m.gguf" MINFER_ATTN_DECODE=$a; done
    deep "$m split, twice the splits" "$models/$m.gguf" MINFER_ATTN_DECODE=split MINFER_ATTN_SPLIT_BLOCKS=264
  done
} 2>&1 | tee "$keeps/keep-deep.md"
BUILD_DIR=$B TIMELINE_PROMPT=4096 TIMELINE_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m" bash tests/gpu/run_on_device.sh timeline; keep timeline-d4096
(cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"

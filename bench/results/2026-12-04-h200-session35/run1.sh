#!/usr/bin/env bash
# Session 35, run 1: decode attention and the O projection in one launch
# (kernels/attention_out.cu: a cluster of up to 8 blocks computes the whole
# attention, each head's output sent into every block's shared memory, then
# each block's rows of W_o), against the two launches it replaces
# (MINFER_NO_FUSE_ATTN_OUT=1), same build. The GPU suites; tg128 arms, graphs
# and eager; CUPTI shares of 0.5B Q8_0 and 7B Q4_K_M.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session35-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep build
GPU_TEST_TIMEOUT=240 BUILD_DIR=$B bash tests/gpu/run_on_device.sh test; keep test
grep -E "AttentionOut|NoFuseAttnOut" "$out/gpu_kernels_test.log" "$out/gpu_engine_test.log" | grep -E "OK|FAILED|SKIPPED" | head -20 > "$keeps/keep-test-fused.md"
models=/tmp/minfer-models; mkdir -p "$models"
for m in qwen2.5-0.5b:q8_0 qwen2.5-0.5b:q4_k_m qwen2.5-1.5b:q4_k_m qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
done
tg() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin); r=j['results'][-1]; print(f\"| $label | {r['median_tokens_per_s']:.0f} | {j.get('decode_launches',0)} |\")"
}
{
  echo "| arm / model | tg128 tok/s | launches a step |"
  echo "|---|---:|---:|"
  for pass in 1 2; do
    for m in qwen2.5-0.5b-q8_0 qwen2.5-0.5b-q4_k_m qwen2.5-1.5b-q4_k_m qwen2.5-7b-q4_k_m qwen2.5-7b-q8_0; do
      tg "pass$pass $m graphs fused" "$models/$m.gguf"
      tg "pass$pass $m graphs apart" "$models/$m.gguf" MINFER_NO_FUSE_ATTN_OUT=1
    done
    tg "pass$pass qwen2.5-0.5b-q8_0 eager fused" "$models/qwen2.5-0.5b-q8_0.gguf" MINFER_NO_CUDA_GRAPH=1
    tg "pass$pass qwen2.5-0.5b-q8_0 eager apart" "$models/qwen2.5-0.5b-q8_0.gguf" MINFER_NO_CUDA_GRAPH=1 MINFER_NO_FUSE_ATTN_OUT=1
  done
} 2>&1 | tee "$keeps/keep-tg.md"
BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m" \
  TIMELINE_ENVS="- MINFER_NO_FUSE_ATTN_OUT=1" bash tests/gpu/run_on_device.sh timeline; keep timeline
(cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")

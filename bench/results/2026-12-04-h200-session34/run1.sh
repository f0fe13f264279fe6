#!/usr/bin/env bash
# Session 34, run 1: a layer's later weights (attn_output, gate/up, ffn_down)
# pulled into the L2 from a side stream once the layer's first product is
# launched (MINFER_L2_PULL=1; layers whose later weights pass half the L2 —
# 7B's — are not pulled). On 0.5B a gate/up launch's 9.3 MB load only from
# attn_output's PDL trigger, ~2.3 µs before its wait: does gate/up get
# shorter with its weights in L2? One build; the GPU suites (the new switch
# test, and the engine suite with the pull on); tg128 arms, graphs and eager;
# CUPTI shares of 0.5B Q8_0.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session34-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_decode_timeline" bash tests/gpu/run_on_device.sh build test; keep build-test
{
  echo "engine suite with MINFER_L2_PULL=1:"
  MINFER_L2_PULL=1 timeout 600 "$B/tests/gpu/gpu_engine_test" > "$out/engine-pull.log" 2>&1
  grep -E '^\[  (PASSED|FAILED)  \]' "$out/engine-pull.log" | head -20
} 2>&1 | tee "$keeps/keep-pull-suite.md"
models=/tmp/minfer-models; mkdir -p "$models"
for m in qwen2.5-0.5b:q8_0 qwen2.5-0.5b:q4_k_m qwen2.5-1.5b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
done
tg() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin); r=j['results'][-1]; print(f\"| $label | {r['median_tokens_per_s']:.0f} |\")"
}
{
  echo "| arm / model | tg128 tok/s |"
  echo "|---|---:|"
  for pass in 1 2; do
    for m in qwen2.5-0.5b-q8_0 qwen2.5-0.5b-q4_k_m qwen2.5-1.5b-q4_k_m; do
      tg "pass$pass $m graphs pull 0" "$models/$m.gguf" MINFER_L2_PULL=0
      tg "pass$pass $m graphs pull 1" "$models/$m.gguf" MINFER_L2_PULL=1
    done
    tg "pass$pass qwen2.5-0.5b-q8_0 graphs pull 1 blocks 8" "$models/qwen2.5-0.5b-q8_0.gguf" MINFER_L2_PULL=1 MINFER_L2_PULL_BLOCKS=8
    tg "pass$pass qwen2.5-0.5b-q8_0 graphs pull 1 blocks 132" "$models/qwen2.5-0.5b-q8_0.gguf" MINFER_L2_PULL=1 MINFER_L2_PULL_BLOCKS=132
    tg "pass$pass qwen2.5-0.5b-q8_0 eager pull 0" "$models/qwen2.5-0.5b-q8_0.gguf" MINFER_L2_PULL=0 MINFER_NO_CUDA_GRAPH=1
    tg "pass$pass qwen2.5-0.5b-q8_0 eager pull 1" "$models/qwen2.5-0.5b-q8_0.gguf" MINFER_L2_PULL=1 MINFER_NO_CUDA_GRAPH=1
  done
} 2>&1 | tee "$keeps/keep-tg.md"
BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-1.5b:q4_k_m" \
  TIMELINE_ENVS="- MINFER_L2_PULL=1" bash tests/gpu/run_on_device.sh timeline; keep timeline
(cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")

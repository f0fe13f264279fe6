#!/usr/bin/env bash
# Session 36, run 1: decode deep into the context, as the committed tree does
# it. tg128 after prompts of 0 to 8,192 tokens (decode attention auto, one
# launch, split) on 0.5B Q8_0 and 7B Q4_K_M, and CUPTI shares of a step
# 4,096 tokens deep, to see what deep decode pays over a short one.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session36-keeps1; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep build
models=/tmp/minfer-models; mkdir -p "$models"
for m in qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
done
deep() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 2 -d 0 1024 4096 8192 -o json 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $label | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.0f}\" for r in j['results']) + ' |')"
}
{
  echo "| arm | tg128 tok/s by depth |"
  echo "|---|---|"
  for m in qwen2.5-0.5b-q8_0 qwen2.5-7b-q4_k_m; do
    for a in auto heads split; do deep "$m $a" "$models/$m.gguf" MINFER_ATTN_DECODE=$a; done
  done
} 2>&1 | tee "$keeps/keep-deep.md"
BUILD_DIR=$B TIMELINE_PROMPT=4096 TIMELINE_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m" \
  TIMELINE_ENVS="- MINFER_ATTN_DECODE=heads" bash tests/gpu/run_on_device.sh timeline; keep timeline-d4096
BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-7b:q4_k_m" bash tests/gpu/run_on_device.sh timeline; keep timeline-d0
(cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"

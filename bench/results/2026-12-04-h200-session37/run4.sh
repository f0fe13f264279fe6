#!/usr/bin/env bash
# Session 37, run 4: rows of each pipelined gate/up block pulled into the L2
# from a side stream while the layer's seam (q/k/v, attention, attn_output,
# the norm) leaves DRAM mostly idle (session 34's side-stream pull, which
# only fitted the small models' whole layers, now a window of 7B's gate/up:
# MINFER_L2_PULL=rows, MINFER_L2_PULL_SKIP, MINFER_L2_PULL_AT). The engine
# switch test, then tg128 arms alternating, two passes, and CUPTI shares.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session37-keeps4; rm -rf "$keeps"; mkdir -p "$keeps"
save() { mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_engine_test gpu_decode_timeline" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
cp "$out/summary.md" "$keeps/build.md"
timeout 120 "$B/tests/gpu/gpu_engine_test" --gtest_filter='CudaSwitches.L2Pull*:CudaSwitches.Piped*' > "$keeps/e.full" 2>&1; echo "gpu_engine_test rc=$?" >> "$keeps/tests.md"
grep -hE "^\[  (PASSED|FAILED)  \]|Failure|Which is|trace" "$keeps/e.full" | head -30 >> "$keeps/tests.md"; gzip -f "$keeps"/*.full
save
models=/tmp/minfer-models; mkdir -p "$models"
tg() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $label | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.0f}\" for r in j['results']) + ' |')"
}
arms=("MINFER_L2_PULL=0" "MINFER_L2_PULL=32" "MINFER_L2_PULL=64" "MINFER_L2_PULL=64 MINFER_L2_PULL_SKIP=32"
      "MINFER_L2_PULL=96 MINFER_L2_PULL_SKIP=32" "MINFER_L2_PULL=64 MINFER_L2_PULL_AT=1")
for m in qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for pass in 1 2; do
    for a in "${arms[@]}"; do
      # shellcheck disable=SC2086
      tg "$m $a (pass $pass)" "$f" $a >> "$keeps/tg.md"
    done
  done
  save
done
BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-7b:q4_k_m" TIMELINE_ENVS="- MINFER_L2_PULL=64" \
  bash tests/gpu/run_on_device.sh timeline >/dev/null 2>&1
grep -E "^timeline|decode timeline|^step|\| [a-z_]+(<[^|]*>)? \|" "$out/summary.md" | grep -v "^| kernel" > "$keeps/timeline.md"
save
cat "$keeps"/*.md

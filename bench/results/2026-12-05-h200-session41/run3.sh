#!/usr/bin/env bash
# Session 41, run 3: the tree after the CPU-side work of the session (tool
# call schemas now built with $defs references; minfer bench --logprobs):
# the engine suite again (CudaToolCalls.* compiles forced call schemas), and
# what a request with log-probabilities costs on CUDA (the host picks its
# tokens from logits copied back each step) against the device's pick,
# tg128 greedy and sampled, 0.5B Q8_0 and 7B Q4_K_M, arms alternating.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run3-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
OUT=/tmp/b3 BUILD_DIR=$root/build-gpu BUILD_TARGETS="minfer gpu_engine_test" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b3/summary.md | tail -1) ($(el))"
B=$root/build-gpu
[ -x "$B/tests/gpu/gpu_engine_test" ] || { tail -30 /tmp/b3/build.log >> "$sum"; cat "$sum"; exit 1; }
timeout 200 "$B/tests/gpu/gpu_engine_test" > "$out/gpu_engine_test.log" 2>&1
log "gpu_engine_test rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gpu_engine_test.log" | tr '\n' ' ') ($(el))"
grep -E '^\[  FAILED  \]|Failure' "$out/gpu_engine_test.log" | head -20 >> "$sum"
gzip -f "$out/gpu_engine_test.log"
models=/tmp/minfer-models; mkdir -p "$models"
log ""
log "| file | arm | tg128 tok/s (median of 3) |"
log "|---|---|---:|"
for m in qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"
  [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for pass in 1 2; do
    for arm in "" "--logprobs 5" "--temp 0.8" "--temp 0.8 --logprobs 5"; do
      timeout 120 "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json $arm 2>/dev/null |
        python3 -c "
import json,sys; j=json.load(sys.stdin)
for r in j['results']: print(f\"| $m | {r['test']} (pass $pass) | {r['median_tokens_per_s']:.1f} |\")" | tee -a "$sum"
    done
  done
  log "($(el))"
done
cat "$sum"

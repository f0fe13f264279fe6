#!/usr/bin/env bash
# Session 44, run 2: run 1 showed device scoring in 64-token steps at 14,409
# (0.5B Q8_0) and 2,845 (7B Q4_K_M) tok/s against 81,159 and 16,061 in
# 512-token steps (H100). Now a prefill step of up to --batch-size tokens
# computes its output head and scores it in slices of 64 rows
# (CudaBackend::score_head: one dequantization of the head, per slice a
# GEMM and a kLogprobs launch), so the logits buffer stays at 64 rows. Tests
# again (GpuLogprobs.*, the whole engine suite: CudaLogprobs.ScoredPrompt...
# counts one step), then pp512, pp512@score sliced, in 512-row slices
# (MINFER_SCORE_ROWS=512), on the host (MINFER_NO_LOGPROBS_IN_STEP=1).
#   bash bench/results/2026-12-05-h100-session44/run2.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run2-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=/tmp/b1 BUILD_DIR=$root/build-gpu BUILD_TARGETS="minfer gpu_engine_test gpu_kernels_test" \
  bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1) ($(el))"
B=$root/build-gpu
[ -x "$B/tests/gpu/gpu_engine_test" ] || { tail -40 /tmp/b1/build.log >> "$sum"; cat "$sum"; exit 1; }
for t in gpu_kernels_test gpu_engine_test; do
  filter='*'
  [ "$t" = gpu_kernels_test ] && filter='GpuLogprobs.*:GpuSample.*'
  timeout 300 "$B/tests/gpu/$t" --gtest_filter="$filter" > "$out/$t.log" 2>&1
  log "$t rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$t.log" | tr '\n' ' ') ($(el))"
  grep -E '^\[  FAILED  \]|Failure|GpuLogprobs|CudaLogprobs' "$out/$t.log" | head -30 >> "$sum"
  gzip -f "$out/$t.log"
done
models=/tmp/minfer-models; mkdir -p "$models"
log ""
log "| file | test (arm) | tok/s (median of 3) |"
log "|---|---|---:|"
bench() {  # model, env ("-": none), bench arguments
  local m=$1 envs=$2 args=$3 f="$models/${1%%:*}-${1##*:}.gguf"
  [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  [ "$envs" = "-" ] && envs=""
  env $envs timeout 150 "$B/daemon/minfer" bench -m "$f" --backend cuda -r 3 -o json $args 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
for r in j['results']: print(f\"| $m | {r['test']} ('$envs $args') | {r['median_tokens_per_s']:.1f} |\")" |
    tee -a "$sum"
}
for m in qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m; do
  bench $m - "-p 512 -n 0"
  bench $m - "-p 512 -n 0 --score --logprobs 5"
  bench $m MINFER_SCORE_ROWS=512 "-p 512 -n 0 --score --logprobs 5"
  bench $m MINFER_NO_LOGPROBS_IN_STEP=1 "-p 512 -n 0 --score --logprobs 5"
  log "($(el))"
done
cat "$sum"

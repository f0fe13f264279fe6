#!/usr/bin/env bash
# Session 44, run 1 (done; run2.sh follows it): a scored prompt's rows
# scored on the device
# (Logits::kScore: kernels::launch_logprobs over every row of a prefill
# step, each against the token after it; on by default with
# logprobs_in_step) — the kernel tests (GpuLogprobs.*, the many-row one
# new, and the fixed -inf check of session 43's), the whole engine suite
# (CudaLogprobs.ScoredPromptMatchesTheCpuAndGraphsStillReplay now compares
# the device's scoring with the host's), then pp512@score on the device
# against the host's (MINFER_NO_LOGPROBS_IN_STEP=1), 0.5B Q8_0 and 7B
# Q4_K_M, next to plain pp512, and in steps of 512 rows instead of 64
# (MINFER_SCORE_STEP_TOKENS=512); tg128 with --logprobs 5 (now the default
# path); 0.5B graphs against eager launches (issue 5's ratio). Tests first.
#   bash bench/results/2026-12-05-h100-session44/run1.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run1-summary.md"
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
  bench $m MINFER_NO_LOGPROBS_IN_STEP=1 "-p 512 -n 0 --score --logprobs 5"
  bench $m MINFER_SCORE_STEP_TOKENS=512 "-p 512 -n 0 --score --logprobs 5"
  bench $m - "-p 0 -n 128"
  bench $m - "-p 0 -n 128 --logprobs 5"
  log "($(el))"
done
bench qwen2.5-0.5b:q8_0 MINFER_NO_CUDA_GRAPH=1 "-p 0 -n 128"
bench qwen2.5-0.5b:q8_0 - "-p 0 -n 128"
log "($(el))"
cat "$sum"

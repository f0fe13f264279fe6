#!/usr/bin/env bash
# Session 43, run 1 (prepared; after its first run session 43 got no GPU
# again): log-probabilities computed in the decode step (Op::kLogprobs,
# kernels::launch_logprobs; off by default until this runs) — its kernel
# and engine tests, the sampling kernel tests (sample.cu's draw now calls
# the shared chunk_best: its PTX is unchanged), and tg128 with
# --logprobs 5, in the step (MINFER_LOGPROBS_IN_STEP=1) against the host's
# from copied logits, greedy and sampled, next to plain decode; JSON mode
# (--json-object: the host picks, now with one pass over the vocabulary
# where the best few are refused, against session 42's run 1's 551-628 /
# 292-307); a scored prompt (pp512@score). Tests first, then 0.5B, the
# scoring, 7B, so that a short lease still brings the tests back.
#   bash bench/results/2026-12-05-h200-session43/run1.sh   (carry: .carry/boost_po)
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
# The kernel suite's sampling tests only (sample.cu is the only kernel file
# changed); the whole engine suite.
for t in gpu_kernels_test gpu_engine_test; do
  filter='*'
  [ "$t" = gpu_kernels_test ] && filter='GpuLogprobs.*:GpuSample.*'
  timeout 300 "$B/tests/gpu/$t" --gtest_filter="$filter" > "$out/$t.log" 2>&1
  log "$t rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$t.log" | tr '\n' ' ') ($(el))"
  grep -E '^\[  FAILED  \]|Failure|GpuLogprobs|TheStepsAreTheHosts|GpuSample' "$out/$t.log" | head -30 >> "$sum"
  gzip -f "$out/$t.log"
done
models=/tmp/minfer-models; mkdir -p "$models"
log ""
log "| file | test (arm) | tok/s (median of 3) |"
log "|---|---|---:|"
decode() {
  local m=$1 f="$models/${1%%:*}-${1##*:}.gguf"
  [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for arm in "-|" "MINFER_LOGPROBS_IN_STEP=1|--logprobs 5" "-|--logprobs 5" "-|--temp 0.8" \
             "MINFER_LOGPROBS_IN_STEP=1|--temp 0.8 --logprobs 5" "-|--temp 0.8 --logprobs 5" "-|--json-object"; do
    local envs=${arm%%|*} args=${arm#*|}
    [ "$envs" = "-" ] && envs=""
    env $envs timeout 120 "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json $args 2>/dev/null |
      python3 -c "
import json,sys; j=json.load(sys.stdin)
for r in j['results']: print(f\"| $m | {r['test']} ('$envs $args') | {r['median_tokens_per_s']:.1f} |\")" |
      tee -a "$sum"
  done
  log "($(el))"
}
decode qwen2.5-0.5b:q8_0
# Scoring a prompt (echo with logprobs): each prefill step's rows on the
# host, shared out over the cores (PromptScorer), next to plain prefill.
f="$models/qwen2.5-0.5b-q8_0.gguf"
for args in "" "--score --logprobs 5"; do
  timeout 120 "$B/daemon/minfer" bench -m "$f" --backend cuda -p 512 -n 0 -r 3 -o json $args 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
for r in j['results']: print(f\"| qwen2.5-0.5b:q8_0 | {r['test']} ('$args') | {r['median_tokens_per_s']:.1f} |\")" | tee -a "$sum"
done
log "($(el))"
decode qwen2.5-7b:q4_k_m
cat "$sum"

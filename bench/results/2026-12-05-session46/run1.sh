#!/usr/bin/env bash
# Session 46, run 1: greedy constrained decode from the steps' candidate lists
# (EngineConfig::constrained_candidates): each decode step lists its 20 best
# tokens on the device (Op::kLogprobs) and the host takes the first the
# constraint allows, copying the logits only where it allows none.
#   - the engine suite (CudaConstrained.CheckedArgmaxGivesTheHostsTokens now
#     has the listed arms, with log-probabilities);
#   - tg128 in JSON mode (--json-object: one object of a million strings, so
#     every token is constrained) listed / host-picked
#     (--constrained-candidates false) / checked argmax
#     (--constrained-lookahead true) / with --logprobs 5 both ways, next to
#     plain greedy: 0.5B Q8_0 and 7B Q4_K_M. "fetched" counts the steps whose
#     logits were copied (a random model's lists are refused far more often
#     than a trained one's). Arms alternate, two passes.
#   bash bench/results/2026-12-05-session46/run1.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run1-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=/tmp/b1 BUILD_DIR=$root/build-gpu BUILD_TARGETS="minfer gpu_engine_test" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1) ($(el))"
B=$root/build-gpu
[ -x "$B/tests/gpu/gpu_engine_test" ] || { grep -E "error|FAILED" /tmp/b1/build.log | head -40 >> "$sum"; cat "$sum"; exit 1; }
timeout 300 "$B/tests/gpu/gpu_engine_test" > "$out/run1-gpu_engine_test.log" 2>&1
log "gpu_engine_test rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/run1-gpu_engine_test.log" | tr '\n' ' ') ($(el))"
grep -E '^\[  FAILED  \]|Failure|Expected|Which is|refused \(' "$out/run1-gpu_engine_test.log" | head -30 >> "$sum"
gzip -f "$out/run1-gpu_engine_test.log"
models=/tmp/minfer-models; mkdir -p "$models"
log ""
log "| file | test (arm, pass) | tg128 tok/s (median of 3) | refused | fetched |"
log "|---|---|---:|---:|---:|"
for m in qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"
  [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for pass in 1 2; do
    for arm in "" "--json-object" "--json-object --constrained-candidates false" \
               "--json-object --constrained-lookahead true" "--json-object --logprobs 5" \
               "--json-object --logprobs 5 --constrained-candidates false"; do
      timeout 150 "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json $arm 2>/dev/null |
        python3 -c "
import json,sys; j=json.load(sys.stdin)
for r in j['results']: print(f\"| $m | {r['test']} ('$arm', pass $pass) | {r['median_tokens_per_s']:.1f} | {r.get('repicked', '-')} | {r.get('fetched', '-')} |\")" |
        tee -a "$sum"
    done
  done
  log "($(el))"
done
cat "$sum"

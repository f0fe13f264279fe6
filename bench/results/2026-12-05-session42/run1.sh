#!/usr/bin/env bash
# Session 42, run 1 (prepared; session 42 was lent no GPU): session 41's run 3
# and what session 42 added to the engine, on one machine:
#   - the engine suite (CudaConstrained.CheckedArgmaxGivesTheHostsTokens is
#     new; session 41's shared logprob reference is unrun too);
#   - tg128 with and without --logprobs 5, greedy and --temp 0.8 (what the
#     host's pick costs on CUDA), 0.5B Q8_0 and 7B Q4_K_M;
#   - JSON mode (--json-object) with the host picking every token against
#     --constrained-lookahead true (the step's argmax, checked; steps ahead),
#     with the refusals counted: a random model's argmax is refused far more
#     often than a trained one's, so this is the switch's worst case.
# Arms alternate, two passes. Run from the repository root:
#   bash bench/results/2026-12-05-session42/run1.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run1-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
OUT=/tmp/b1 BUILD_DIR=$root/build-gpu BUILD_TARGETS="minfer gpu_engine_test" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1) ($(el))"
B=$root/build-gpu
[ -x "$B/tests/gpu/gpu_engine_test" ] || { tail -30 /tmp/b1/build.log >> "$sum"; cat "$sum"; exit 1; }
timeout 240 "$B/tests/gpu/gpu_engine_test" > "$out/gpu_engine_test.log" 2>&1
log "gpu_engine_test rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gpu_engine_test.log" | tr '\n' ' ') ($(el))"
grep -E '^\[  FAILED  \]|Failure|argmaxes refused' "$out/gpu_engine_test.log" | head -20 >> "$sum"
gzip -f "$out/gpu_engine_test.log"
models=/tmp/minfer-models; mkdir -p "$models"
log ""
log "| file | test (arm, pass) | tg128 tok/s (median of 3) | refused |"
log "|---|---|---:|---:|"
for m in qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"
  [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for pass in 1 2; do
    for arm in "" "--logprobs 5" "--temp 0.8" "--temp 0.8 --logprobs 5" "--json-object" \
               "--json-object --constrained-lookahead true"; do
      timeout 120 "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json $arm 2>/dev/null |
        python3 -c "
import json,sys; j=json.load(sys.stdin)
for r in j['results']: print(f\"| $m | {r['test']} ('$arm', pass $pass) | {r['median_tokens_per_s']:.1f} | {r.get('repicked', '-')} |\")" |
        tee -a "$sum"
    done
  done
  log "($(el))"
done
cat "$sum"

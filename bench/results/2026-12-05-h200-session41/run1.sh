#!/usr/bin/env bash
# Session 41, run 1 (H200, one call, under 600 s). In order of what matters
# most, the summary written as it goes (a timeout still returns it):
#   1. the tree's GPU suites whole, with session 40's two failing tests fixed
#      (CudaLogprobs without the prefix cache, plus a test of the cached-prefix
#      step's logits; CudaToolCalls' forced call on a prompt it finishes after);
#   2. session 38's Q6_K patch (q6k-staged-places.patch) in a copy of the tree
#      (session 40's copy used git ls-files, and the device's tree has no .git):
#      the tests that cover it, bit for bit against the plain kernels;
#   3. tg128 from the tree and the patched tree, alternating, two passes:
#      7B Q4_K_M (14 ffn_down and the head Q6_K), 1.5B Q4_K_M, 0.5B Q4_K_M;
#   4. 0.5B Q8_0 tg128 with CUDA graphs and eager, alternating (issue 5);
#   5. time left: CUPTI timelines of a 7B Q4_K_M step from both builds.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run1-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
secs() { echo $(( $(date +%s) - t0 )); }
el() { echo "$(secs) s"; }
patched=/tmp/minfer-patched
rm -rf "$patched"; mkdir -p "$patched"
tar -C "$root" --exclude=./build-gpu --exclude=./build-local --exclude=./gpu-out --exclude=./.git -cf - . | tar -C "$patched" -xf -
(cd "$patched" && { patch -p1 -s < bench/results/2026-12-04-h200-session38/q6k-staged-places.patch || git apply bench/results/2026-12-04-h200-session38/q6k-staged-places.patch; }) \
  || log "patch does not apply"
log "copy: $(cd "$patched" && ls | tr '\n' ' ') ($(el))"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$sum"
targets="minfer gpu_kernels_test gpu_engine_test gpu_decode_timeline"
(cd "$root" && OUT=/tmp/b-tree BUILD_DIR=$root/build-gpu BUILD_TARGETS="$targets" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1) &
(cd "$patched" && OUT=/tmp/b-patched BUILD_DIR=$patched/build-gpu BUILD_TARGETS="$targets" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1) &
wait
for b in tree patched; do log "build $b: $(grep -h 'build:' /tmp/b-$b/summary.md 2>/dev/null | tail -1) ($(el))"; done
T=$root/build-gpu; P=$patched/build-gpu
[ -x "$T/tests/gpu/gpu_engine_test" ] || { log "tree build failed"; tail -30 /tmp/b-tree/build.log >> "$sum"; cat "$sum"; exit 1; }
# 1. The tree's suites.
for t in gpu_engine_test gpu_kernels_test; do
  timeout 200 "$T/tests/gpu/$t" > "$out/tree-$t.log" 2>&1; rc=$?
  log "tree $t rc=$rc: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/tree-$t.log" | tr '\n' ' ') ($(el))"
  grep -E '^\[  FAILED  \]|Failure' "$out/tree-$t.log" | head -20 >> "$sum"
done
grep -E "^\[ +(OK|FAILED|SKIPPED) +\] (CudaLogprobs|CudaToolCalls)|^(fresh|cached):" "$out/tree-gpu_engine_test.log" | tee -a "$sum"
gzip -f "$out/tree-gpu_kernels_test.log"
# 2. The patch's tests.
if [ -x "$P/tests/gpu/gpu_kernels_test" ]; then
  timeout 150 "$P/tests/gpu/gpu_kernels_test" > "$out/patched-k.log" 2>&1
  log "patched gpu_kernels_test rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/patched-k.log" | tr '\n' ' ') ($(el))"
  timeout 120 "$P/tests/gpu/gpu_engine_test" > "$out/patched-e.log" 2>&1
  log "patched gpu_engine_test rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/patched-e.log" | tr '\n' ' ') ($(el))"
  grep -hE '^\[  FAILED  \]|Failure' "$out/patched-k.log" "$out/patched-e.log" | head -20 >> "$sum"
  grep -hE '^\[ +(OK|FAILED) +\] StagedActs' "$out/patched-k.log" | tee -a "$sum"
  gzip -f "$out/patched-k.log" "$out/patched-e.log"
else
  log "patched build failed"; grep -E "error" /tmp/b-patched/build.log | head -20 >> "$sum"
fi
# 3. tg128, tree and patched alternating.
models=/tmp/minfer-models; mkdir -p "$models"
tg() {  # label build file [minfer bench options]
  local label=$1 b=$2 f=$3; shift 3
  timeout 90 "$b/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json "$@" 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $label | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.1f}\" for r in j['results']) + ' |')"
}
synth() { local f="$models/${1%%:*}-${1##*:}.gguf"; [ -f "$f" ] || "$T/daemon/minfer" synth --preset "${1%%:*}" --type "${1##*:}" -o "$f" >/dev/null 2>&1; echo "$f"; }
log ""
log "| file, build | tg128 tok/s (median of 3) |"
log "|---|---|"
for m in qwen2.5-7b:q4_k_m qwen2.5-1.5b:q4_k_m qwen2.5-0.5b:q4_k_m; do
  f=$(synth $m)
  for pass in 1 2; do
    tg "$m tree ($pass)" "$T" "$f" | tee -a "$sum"
    [ -x "$P/daemon/minfer" ] && tg "$m patched ($pass)" "$P" "$f" | tee -a "$sum"
  done
  log "($(el))"
done
# 4. Graphs against eager, 0.5B Q8_0, the tree's build.
f=$(synth qwen2.5-0.5b:q8_0)
for pass in 1 2; do
  tg "0.5B q8_0 graphs ($pass)" "$T" "$f" | tee -a "$sum"
  tg "0.5B q8_0 eager ($pass)" "$T" "$f" --cuda-graphs false | tee -a "$sum"
done
log "($(el))"
# 5. Timelines, if time is left.
f="$models/qwen2.5-7b-q4_k_m.gguf"
for b in tree patched; do
  [ "$(secs)" -lt 500 ] || { log "timeline $b: no time left"; continue; }
  B=$T; [ $b = patched ] && B=$P
  [ -x "$B/tests/gpu/gpu_decode_timeline" ] || { log "timeline $b: not built"; continue; }
  log "timeline $b"
  timeout 60 "$B/tests/gpu/gpu_decode_timeline" "$f" 1 128 "$out/timeline-$b.csv" 2>"$out/timeline-$b.log" | tee -a "$sum"
  log "($(el))"
done
cat "$sum"

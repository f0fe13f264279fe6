#!/usr/bin/env bash
# Session 40, run 1 (H200, one call, under 600 s). In order of what matters
# most, the summary written as it goes (a timeout still returns it):
#   1. the tree's GPU suites whole (gpu_engine_test, gpu_kernels_test):
#      the new CudaLogprobs.* (session 39) and CudaToolCalls.* tests with them;
#   2. session 38's prepared Q6_K patch (q6k-staged-places.patch): the tests
#      that cover it, bit for bit against the plain kernels;
#   3. tg128 of 7B Q4_K_M (its ffn_down and head are Q6_K) and 1.5B Q4_K_M from
#      the tree and from the patched tree, alternating, two passes each.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run1-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
patched=/tmp/minfer-patched
rm -rf "$patched"; mkdir -p "$patched"
git ls-files -z | xargs -0 -I{} cp --parents {} "$patched"/ 2>/dev/null
cp -r "$root/.carry" "$patched/"
(cd "$patched" && git init -q && git apply bench/results/2026-12-04-h200-session38/q6k-staged-places.patch) \
  || { log "patch does not apply"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$sum"
targets="minfer gpu_kernels_test gpu_engine_test"
(cd "$root" && OUT=/tmp/b-tree BUILD_DIR=$root/build-gpu BUILD_TARGETS="$targets" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1) &
(cd "$patched" && OUT=/tmp/b-patched BUILD_DIR=$patched/build-gpu BUILD_TARGETS="$targets" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1) &
wait
for b in tree patched; do log "build $b: $(grep -h 'build:' /tmp/b-$b/summary.md 2>/dev/null | tail -1) ($(el))"; done
T=$root/build-gpu; P=$patched/build-gpu
[ -x "$T/tests/gpu/gpu_engine_test" ] || { log "tree build failed"; tail -30 /tmp/b-tree/build.log >> "$sum"; cat "$sum"; exit 1; }
# 1. The tree's suites.
for t in gpu_engine_test gpu_kernels_test; do
  timeout 240 "$T/tests/gpu/$t" > "$out/tree-$t.log" 2>&1; rc=$?
  log "tree $t rc=$rc: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/tree-$t.log" | tr '\n' ' ') ($(el))"
  grep -E '^\[  FAILED  \]|Failure' "$out/tree-$t.log" | head -20 >> "$sum"
done
grep -E "^\[ +(OK|FAILED|SKIPPED) +\] (CudaLogprobs|CudaToolCalls)" "$out/tree-gpu_engine_test.log" | tee -a "$sum"
# 2. The patch's tests.
if [ -x "$P/tests/gpu/gpu_kernels_test" ]; then
  timeout 150 "$P/tests/gpu/gpu_kernels_test" --gtest_filter='GpuPiped.*:StagedActs.*:*Matvec*' > "$out/patched-k.log" 2>&1
  log "patched gpu_kernels_test (piped, staged, matvec) rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/patched-k.log" | tr '\n' ' ') ($(el))"
  timeout 150 "$P/tests/gpu/gpu_engine_test" --gtest_filter='CudaParity.*:CudaGraphs.*:CudaSwitches.*' > "$out/patched-e.log" 2>&1
  log "patched gpu_engine_test (parity, graphs, switches) rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/patched-e.log" | tr '\n' ' ') ($(el))"
  grep -hE '^\[  FAILED  \]|Failure' "$out/patched-k.log" "$out/patched-e.log" | head -20 >> "$sum"
else
  log "patched build failed"; grep -E "error" /tmp/b-patched/build.log | head -20 >> "$sum"
fi
# 3. tg128, tree and patched alternating.
models=/tmp/minfer-models; mkdir -p "$models"
tg() {  # label build file
  "$2/daemon/minfer" bench -m "$3" --backend cuda -p 0 -n 128 -r 3 -o json 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $1 | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.1f}\" for r in j['results']) + ' |')"
}
log ""
log "| file, build | tg128 tok/s (median of 3) |"
log "|---|---|"
for m in qwen2.5-7b:q4_k_m qwen2.5-1.5b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"
  [ -f "$f" ] || "$T/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for pass in 1 2; do
    tg "$m tree ($pass)" "$T" "$f" | tee -a "$sum"
    [ -x "$P/daemon/minfer" ] && tg "$m patched ($pass)" "$P" "$f" | tee -a "$sum"
  done
  log "($(el))"
done
cat "$sum"

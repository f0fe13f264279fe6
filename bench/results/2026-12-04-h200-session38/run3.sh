#!/usr/bin/env bash
# Session 38, run 3 (prepared, not run: no machine was lent after run 1):
# Q6_K's pipelined matvec with its staged activations at their own places
# (q6k-staged-places.patch: dot.cuh summed_chunk / SummedSwizzledActs, the
# scales' d alone as floats), so that a step's shared reads of them take 18
# wavefronts a warp instead of 48. Two builds — the tree and the tree with
# the patch — then the tests that cover it (bit for bit against the plain
# kernels: GpuPiped.*; the host check of the places), tg128 from each build
# alternating, and CUPTI shares of a 7B Q4_K_M step (14 ffn_down and the
# output head are Q6_K) from each.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
res=/tmp/run3; rm -rf "$res"; mkdir -p "$res"
patched=/tmp/minfer-patched
rm -rf "$patched"; cp -r "$root" "$patched"
(cd "$patched" && git apply bench/results/2026-12-04-h200-session38/q6k-staged-places.patch) || { echo "patch does not apply"; exit 1; }
for b in tree patched; do
  src=$root; [ $b = patched ] && src=$patched
  (cd "$src" && OUT=$res/build-$b BUILD_DIR=$src/build-gpu BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_decode_timeline" \
    bash tests/gpu/run_on_device.sh build >/dev/null 2>&1)
  echo "== build $b" >> "$res/all.md"; cat "$res/build-$b/summary.md" >> "$res/all.md"
done
P=$patched/build-gpu
timeout 200 "$P/tests/gpu/gpu_kernels_test" --gtest_filter='GpuPiped.*:StagedActs.*:*Matvec*' > "$res/k.txt" 2>&1; echo "gpu_kernels_test (patched) rc=$?" >> "$res/all.md"
timeout 200 "$P/tests/gpu/gpu_engine_test" --gtest_filter='CudaParity.*:CudaGraphs.*:CudaSwitches.*' > "$res/e.txt" 2>&1; echo "gpu_engine_test (patched) rc=$?" >> "$res/all.md"
grep -hE "^\[  (PASSED|FAILED)  \]|Failure|Expected|Which is" "$res/k.txt" "$res/e.txt" | head -40 >> "$res/all.md"
models=/tmp/minfer-models; mkdir -p "$models"
tg() {  # label build file
  "$2/daemon/minfer" bench -m "$3" --backend cuda -p 512 -n 128 -r 2 -o json 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $1 | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.0f}\" for r in j['results']) + ' |')"
}
for m in qwen2.5-7b:q4_k_m qwen2.5-0.5b:q4_k_m qwen2.5-1.5b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$root/build-gpu/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for pass in 1 2; do
    tg "$m tree (pass $pass)" "$root/build-gpu" "$f" >> "$res/all.md"
    tg "$m patched (pass $pass)" "$P" "$f" >> "$res/all.md"
  done
done
for b in tree patched; do
  src=$root; [ $b = patched ] && src=$patched
  (cd "$src" && OUT=$res/tl-$b BUILD_DIR=$src/build-gpu TIMELINE_MODELS="qwen2.5-7b:q4_k_m" \
    timeout 200 bash tests/gpu/run_on_device.sh timeline >/dev/null 2>&1)
  echo "== timeline $b" >> "$res/all.md"; grep -A14 "decode timeline" "$res/tl-$b/summary.md" | grep -v "^--" >> "$res/all.md"
  cp "$res/tl-$b/logs.tgz" "$out/timeline-$b.tgz" 2>/dev/null
done
cp "$res/all.md" "$out/run3-summary.md"
cat "$out/run3-summary.md"

#!/usr/bin/env bash
# Session 52, run 5: run 4 cut to the device time left (a start that got no
# machine took 211 s): build, the decode attention tests of gpu_kernels_test
# and all of gpu_engine_test, then tg128 deep into the context, split forced,
# clusters (auto size) against none (MINFER_ATTN_SPLIT_CLUSTER=0), same build.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
N=$root/build-new M=/tmp/minfer-models
f7=$M/qwen2.5-7b-q4_k_m.gguf f05=$M/qwen2.5-0.5b-q8_0.gguf
s=$out/run5.md; : > "$s"
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
tail -2 "$out/summary.md" >> "$s"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader >> "$s"
timeout 100 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='*AttentionDecode*' > "$out/k.log" 2>&1
echo "gpu_kernels_test *AttentionDecode*: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/k.log" | head -1) $(grep -c '^\[  FAILED  \]' "$out/k.log") failed lines" >> "$s"
grep -E "Failure|Which is|FAILED  \]" "$out/k.log" | head -20 >> "$s"
timeout 100 "$N/tests/gpu/gpu_engine_test" > "$out/e.log" 2>&1
echo "gpu_engine_test: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/e.log" | head -1) $(grep -c '^\[  FAILED  \]' "$out/e.log") failed lines" >> "$s"
mkdir -p $M
for f in "$f05" "$f7"; do
  p=$(basename "$f" .gguf); p=${p%-q*}
  t=q8_0; case "$f" in *q4_k_m*) t=q4_k_m;; esac
  [ -f "$f" ] || "$N/daemon/minfer" synth --preset "$p" --type "$t" -o "$f" >/dev/null 2>&1
  for arm in "cluster:MINFER_ATTN_DECODE=split" "none:MINFER_ATTN_DECODE=split,MINFER_ATTN_SPLIT_CLUSTER=0"; do
    IFS=: read -r label e <<<"$arm"
    echo "== tg128 deep $label $(basename "$f")" >> "$s"
    env ${e//,/ } "$N/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 1 -d 4096 8192 2>>"$out/bench.log" \
      | grep -E "tg128" | sed -E 's/^\|[^|]*\|[^|]*\|[^|]*\|[^|]*\|/|/' >> "$s"
  done
done
cat "$s"

#!/usr/bin/env bash
# Session 52, run 6: run 5 cut further (two starts that got no machine took
# 300 s of the device time): build, gpu_kernels_test's decode attention tests,
# tg128 deep into the context with the split kernel in clusters (auto size)
# and without (MINFER_ATTN_SPLIT_CLUSTER=0), same build: 0.5B Q8_0, then 7B
# Q4_K_M while the time lasts; gpu_engine_test last.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
N=$root/build-new M=/tmp/minfer-models
s=$out/run6.md; : > "$s"
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
tail -1 "$out/summary.md" >> "$s"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader >> "$s"
timeout 60 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='*AttentionDecode*' > "$out/k.log" 2>&1
echo "gpu_kernels_test *AttentionDecode*: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/k.log" | head -1) $(grep -c '^\[  FAILED  \]' "$out/k.log") failed lines" >> "$s"
grep -E "Failure|Which is|FAILED  \]" "$out/k.log" | head -20 >> "$s"
mkdir -p $M
for pt in "qwen2.5-0.5b q8_0" "qwen2.5-7b q4_k_m"; do
  read -r p t <<<"$pt"; f=$M/$p-$t.gguf
  [ -f "$f" ] || "$N/daemon/minfer" synth --preset "$p" --type "$t" -o "$f" >/dev/null 2>&1
  for arm in "cluster:MINFER_ATTN_DECODE=split" "none:MINFER_ATTN_DECODE=split,MINFER_ATTN_SPLIT_CLUSTER=0"; do
    IFS=: read -r label e <<<"$arm"
    echo "== tg128 deep $label $p $t" >> "$s"
    env ${e//,/ } "$N/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 1 -d 4096 8192 2>>"$out/bench.log" \
      | grep -E "tg128" | sed -E 's/^\|[^|]*\|[^|]*\|[^|]*\|[^|]*\|/|/' >> "$s"
  done
done
cat "$s"

#!/usr/bin/env bash
# Session 36, run 5 (the committed form): the split kernel's rows may take the
# device's shared memory (run 4's chunked-combine test asked for more than the
# 112 KiB it had), and auto switches to it at 8 MiB of K/V a layer. The
# attention tests of both suites (run 4 ran both in full), then tg128 deep
# into the context with the default choice.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=$out/keeps; mkdir -p "$keeps"
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
cp "$out/summary.md" "$keeps/build.md"
timeout 120 "$B/tests/gpu/gpu_kernels_test" --gtest_filter='*Attention*' > "$keeps/k.full" 2>&1; echo "gpu_kernels_test *Attention* rc=$?" >> "$keeps/tests.md"
timeout 120 "$B/tests/gpu/gpu_engine_test" --gtest_filter='CudaSwitches.Attention*:CudaGraphs.*' > "$keeps/e.full" 2>&1; echo "gpu_engine_test rc=$?" >> "$keeps/tests.md"
grep -hE "^\[  (PASSED|FAILED)  \]|Failure|Chunks" "$keeps/k.full" "$keeps/e.full" >> "$keeps/tests.md"; rm -f "$keeps"/*.full
models=/tmp/minfer-models; mkdir -p "$models"
for m in qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 2 -d 0 1024 4096 8192 -o json 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| ${m} auto | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.0f}\" for r in j['results']) + ' |')" >> "$keeps/deep.md"
done
cat "$keeps"/*.md

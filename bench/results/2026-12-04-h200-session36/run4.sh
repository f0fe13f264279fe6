#!/usr/bin/env bash
# Session 36, run 4: the split decode attention's combine reading every
# split's partial into shared memory in one round trip (cp.async), instead of
# a thread's loads 8 splits at a time. Both GPU suites in full, then tg128
# deep into the context for auto / heads / split. Results are kept as they
# come (the call's time is short).
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=$out/keeps; mkdir -p "$keeps"
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
cp "$out/summary.md" "$keeps/build.md"
for t in gpu_kernels_test gpu_engine_test; do
  timeout 200 "$B/tests/gpu/$t" > "$keeps/$t.full" 2>&1; echo "$t rc=$?" >> "$keeps/tests.md"
  grep -E "^\[  (PASSED|FAILED)  \]|^\[  SKIPPED \]|tests ran|Failure" "$keeps/$t.full" | head -20 >> "$keeps/tests.md"
  grep -E "^\[ +OK +\].*(Split|Attention)" "$keeps/$t.full" >> "$keeps/tests.md"
  rm -f "$keeps/$t.full"
done
models=/tmp/minfer-models; mkdir -p "$models"
for m in qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
done
deep() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 2 -d 0 1024 4096 8192 -o json 2>/dev/null |
    python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $label | ' + ' | '.join(f\"{r['test']}: {r['median_tokens_per_s']:.0f}\" for r in j['results']) + ' |')"
}
echo "| arm | tg128 tok/s by depth |" > "$keeps/deep.md"; echo "|---|---|" >> "$keeps/deep.md"
for m in qwen2.5-7b-q4_k_m qwen2.5-0.5b-q8_0; do
  for a in split heads; do deep "$m $a" "$models/$m.gguf" MINFER_ATTN_DECODE=$a >> "$keeps/deep.md"; done
done
cat "$keeps"/*.md

#!/usr/bin/env bash
# Session 33, run 5: pipelined launches on fewer blocks than SMs
# (MINFER_PIPED_SPARE_SMS=N: a grid of SMs - N). A pipelined block needs a whole
# SM (all 65,536 registers), and the one-block deferred norm before gate/up
# (and the final norm before the output head) holds an SM when gate/up is
# launched: if gate/up has a block for every SM, one of them starts only when
# the norm ends, ~5 µs after the rest — and may set gate/up's end. One build,
# the arms by environment: tg128 twice over, CUPTI shares of 7B Q4_K_M.
# Patch: run5-tree.patch.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session33-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep build
models=/tmp/minfer-models; mkdir -p "$models"
for m in qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0 qwen2.5-1.5b:q4_k_m qwen2.5-0.5b:q8_0; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
done
tg() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin); r=j['results'][-1]; print(f\"| $label | {r['median_tokens_per_s']:.0f} |\")"
}
{
  echo "| arm / model | tg128 tok/s |"
  for pass in 1 2; do
    for n in 0 1 2; do
      for m in qwen2.5-7b-q4_k_m qwen2.5-7b-q8_0 qwen2.5-1.5b-q4_k_m qwen2.5-0.5b-q8_0; do
        tg "pass$pass $m spare $n" "$models/$m.gguf" MINFER_PIPED_SPARE_SMS=$n
      done
    done
  done
} 2>&1 | tee "$keeps/keep-tg.md"
BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0" \
  TIMELINE_ENVS="- MINFER_PIPED_SPARE_SMS=1" bash tests/gpu/run_on_device.sh timeline; keep timeline
(cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")

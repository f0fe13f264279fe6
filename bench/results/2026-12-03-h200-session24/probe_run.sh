#!/usr/bin/env bash
# Run 1 of this folder: where the K-quant products' and decode attention's
# instructions go — the pipelined kernels' SASS, decode attention's SASS,
# Nsight Compute stall reasons and issue of the 7B ffn_down Q6_K and gate/up
# Q4_K products alone (kernel bench) and of attention and the deferred norm
# inside 7B Q4_K_M decode.
set -u
s() { bash tests/gpu/run_on_device.sh "$@"; }
OUT=$OUT/build BUILD_TARGETS="minfer gpu_matvec_bench" \
  SASS_FILTER="matvec_piped_kernelILi14ELb0|matvec_piped_kernelILi12ELb0|gate_up_piped_kernelILi12ELb1" \
  s build sass >"$OUT/build.log" 2>&1
sed -n '/== summary ==/,$p' "$OUT/build.log"
obj=$(find build-gpu -name "attention_decode.cu.o" | head -1)
command -v cuobjdump >/dev/null && cuobjdump -sass "$obj" | gzip >"$OUT/attention_decode.sass.gz"
for c in "7b down q6_k" "7b gate_up q4_k" "7b down q4_k"; do
  d=$OUT/ncu-$(echo "$c" | tr ' ' '-')
  OUT=$d NCU_VARIANTS=auto NCU_CASE="$c" s ncu-stream >"$d.log" 2>&1
  echo "== $c"; sed -n '/== summary ==/,$p' "$d.log" | grep -v "^== summary\|^$"
done
OUT=$OUT/ncu-detail NCU_KERNELS="attention_heads_kernel deferred_norm_kernel" s ncu-detail >"$OUT/ncu-detail.log" 2>&1
sed -n '/== summary ==/,$p' "$OUT/ncu-detail.log"

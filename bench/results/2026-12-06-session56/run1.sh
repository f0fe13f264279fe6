#!/usr/bin/env bash
# Session 56, run 1 (from the working tree; .carry/base/gemm_fused.cu is
# c53d8f0's kernel, before session 55's interleaved k-steps). Session 55's
# committed kernel never went through the engine suite or the end-to-end
# prefill benches (its run 2 was cut): here the build of HEAD runs every GPU
# suite, then prefill of 8-64 tokens new / base / new, then Nsight Compute on
# the fused product alone at 32 and 64 tokens (what bounds it: stall
# reasons, L1 wavefronts of the tokens' loads, pipes). And a variant
# (.carry/var/gemm_fused.cu): steps of 33-64 tokens in blocks of 8 token
# tiles (two chunks a warp's group) instead of two blocks of 4 tiles, each
# unpacking the whole weight.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session56-keeps1; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
B=/tmp/base; rm -rf "$B"; mkdir -p "$B"; tar -cf - --exclude=./gpu-out . | tar -xf - -C "$B"
cp "$root/.carry/base/gemm_fused.cu" "$B/kernels/gemm_fused.cu"
V=/tmp/var; rm -rf "$V"; mkdir -p "$V"; tar -cf - --exclude=./gpu-out . | tar -xf - -C "$V"
cp "$root/.carry/var/gemm_fused.cu" "$V/kernels/gemm_fused.cu"
N=$root/build-gpu
(BUILD_DIR=$B/build BUILD_TARGETS="minfer" bash "$B/tests/gpu/run_on_device.sh" build > /tmp/base-build.log 2>&1) &
(BUILD_DIR=$V/build BUILD_TARGETS="minfer gpu_kernels_test gpu_matvec_bench" bash "$V/tests/gpu/run_on_device.sh" build > /tmp/var-build.log 2>&1) &
BUILD_DIR=$N bash tests/gpu/run_on_device.sh build; wait; keep 1-build
tail -3 /tmp/base-build.log /tmp/var-build.log > "$out/summary.md"; keep 1b-base-var-build
GPU_TEST_TIMEOUT=200 BUILD_DIR=$N bash tests/gpu/run_on_device.sh test; keep 2-test
i=3
for arm in new base; do
  b=$N; [ $arm = base ] && b=$B/build; [ $arm = var ] && b=$V/build
  BUILD_DIR=$b BENCH_PREFILL_ARMS="$arm:MINFER_FUSED_GEMM_ROWS=64" BENCH_PREFILL_ARGS="-p 8 16 32 48 64 -n 0" \
    bash tests/gpu/run_on_device.sh bench-prefill; keep $i-prefill-$arm; i=$((i + 1))
done
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
: > "$out/summary.md"
for c in "7b gate_up q4_k@gemm:32" "7b down q6_k@gemm:32"; do
  tag=$(echo "$c" | tr -c 'a-z0-9\n' _)
  MATVEC_BENCH_CASE="${c%@*}" timeout 120 "$ncu" --set full --clock-control none -k regex:gemm_fused_kernel --launch-skip 3 --launch-count 1 \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__data_pipe_lsu_wavefronts.sum,smsp__inst_executed.sum" \
    "$N/tests/gpu/gpu_matvec_bench" "${c#*@}" > "$out/ncu-$tag.txt" 2>&1
  { echo "### ncu $c"
    grep -E "^    [a-z0-9_]+__" "$out/ncu-$tag.txt" | awk '{v=$NF; if (v != "0" && v != "0.00" && v != "0,00") print}' | head -60
    grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issued Warp Per|No Eligible|L1/TEX Hit|L1/TEX Cache Throughput|L2 Hit|Mem Busy|Max Bandwidth|DRAM Throughput|Compute \(SM\) Throughput|Executed Ipc A|Local Memory|bytes transmitted per sector|stalled" "$out/ncu-$tag.txt" | head -40
  } >> "$out/summary.md"
done
keep 7-ncu
mkdir -p "$out/ncu" && cp "$out"/ncu-*.txt "$out/ncu/" 2>/dev/null
(cd "$out" && tar czf /tmp/ncu.tgz ncu && rm -rf ncu ncu-*.txt && mv /tmp/ncu.tgz ncu.tgz)
timeout 120 "$V/build/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/var-gemm-tests.log" 2>&1
{ echo "var gemm-tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/var-gemm-tests.log" | head -1)"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is' "$out/var-gemm-tests.log" | head -12
  for c in "7b gate_up q4_k" "7b down q6_k" "0.5b gate_up q8_0"; do for b in "$N" "$V/build"; do echo "$b:"
    MATVEC_BENCH_CASE="$c" timeout 30 "$b/tests/gpu/gpu_matvec_bench" gemm:32 gemm:48 gemm:64 2>&1 | grep -E "^\| [0-9]" ; done; done; } > "$out/summary.md"
keep 7b-var
BUILD_DIR=$V/build BENCH_PREFILL_ARMS="var:MINFER_FUSED_GEMM_ROWS=64" BENCH_PREFILL_ARGS="-p 8 16 32 48 64 -n 0" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 8-prefill-var
cat "$out/all.md"

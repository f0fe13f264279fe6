// Device helpers shared by the kernels: conversions, warp and block
// reductions, the Q8 activation format, SiLU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace minfer::kernels {

constexpr int kWarp = 32;

// Programmatic dependent launch (Hopper): kernels are launched with
// programmatic stream serialization (launch.cuh), so the next kernel's launch
// and block scheduling overlap this one's run. Every kernel calls pdl_wait()
// before it reads anything a predecessor wrote (it returns once the previous
// kernel has completed and its writes are visible), then pdl_trigger() to let
// its successor start launching. Both are no-ops before sm_90 and when the
// kernel was launched without the attribute. The cheapest seam measured: a
// flag or a count in global memory polled by the next kernel costs more (H200,
// 2026-12-03: 2.97 and 2.26 µs a kernel of 132 blocks against 1.92;
// bench/results/2026-12-03-h200-session26/seam_bench.cu).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_trigger();
}

// The phase probes (kernels.h set_phase_probe) are compiled in only with
// -DMINFER_PHASE_PROBES=ON; otherwise every probe branch folds away.
#ifdef MINFER_PHASE_PROBES
constexpr bool kPhaseProbes = true;
#else
constexpr bool kPhaseProbes = false;
#endif

// A phase probe's record (kernels.h set_phase_probe): one more block, and
// the cycles between consecutive clock64() stamps t[0..N).
template <int N>
__device__ __forceinline__ void phase_probe_add(unsigned long long* fields, const long long (&t)[N]) {
  atomicAdd(fields, 1ull);
#pragma unroll
  for (int i = 1; i < N; ++i) atomicAdd(fields + i, static_cast<unsigned long long>(t[i] - t[i - 1]));
}

// The 128-byte line at p into this SM's L1 (no register, nothing waits).
__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf2f(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// Two warp sums at once, each the same bits as warp_sum's: the first
// round's shuffle carries a's value from the high half and b's from the low
// half, so that lanes 0-15 go on with a's sum and lanes 16-31 with b's (a +
// a' in one half is a' + a in the other: the same float); the rounds within
// a half are warp_sum's; a last shuffle gives every lane the other half's.
// 6 shuffles and 5 adds instead of 10 and 10.
__device__ __forceinline__ float2 warp_sum_pair(float a, float b, int lane) {
  const bool low = lane < 16;
  float v = (low ? a : b) + __shfl_xor_sync(0xffffffffu, low ? b : a, 16);
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const float other = __shfl_xor_sync(0xffffffffu, v, 16);
  return low ? make_float2(v, other) : make_float2(other, v);
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A reduction over the block: each warp reduces its lanes, then every thread
// folds the warps' results in warp order. `scratch` holds at least
// blockDim.x / 32 floats. All threads receive the result.
template <class Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch, float init, Op op) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int n_warps = (blockDim.x + kWarp - 1) / kWarp;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = init;
  // Unrolled, in warp order: the loads go out together instead of a chain
  // of 16 shared-memory round trips for a 16-warp block. (Decode attention's
  // max and sum of exp, 0.32 and 0.36 µs of a 7B block by the phase probe,
  // did not move with it — 0.33 and 0.35, H200, 2026-12-02: their barriers,
  // not the fold, are what they wait for. Kept: the same bits, no cost.)
#pragma unroll 8
  for (int w = 0; w < n_warps; ++w) r = op(r, scratch[w]);
  return r;
}

// Sum over the block in a fixed order (warp sums, then the warps' sums in
// warp order), so that every kernel that normalises a row gets the same bits.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, 0.0f, [](float a, float b) { return a + b; });
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, -INFINITY, [](float a, float b) { return fmaxf(a, b); });
}

// Σ x[i]² of one row in an order that does not depend on the block's size,
// so that every kernel that RMS-normalises a row (the norm kernel, the
// norm-fused matvec prologue) gets the same bits: the row is cut into
// 32-element blocks; block b's sum is a warp tree over its lanes
// (sq_block_sum); the block sums are added in passes of kSumPass blocks, each
// pass by warp 0 with lane l taking blocks l, l + 32, ... in order, then a
// warp tree (sum_block_sums).
constexpr int kSumPass = 256;

// The square explicitly rounded: never contracted into an FMA with the
// butterfly's first add, whichever kernel inlines it (norm_quad_sum below
// must reproduce the same tree).
__device__ __forceinline__ float sq_block_sum(float v) { return warp_sum(__fmul_rn(v, v)); }

// sq_block_sum of one 32-element block computed by a quad of lanes (lanes
// 4i..4i+3 of a warp; t = lane % 4) whose lane t holds elements t, t + 4, ...,
// t + 28 in v[0..7]: warp_sum's butterfly adds elements 16 apart first, then
// 8, 4 (here inside the thread), then 2 and 1 (here across the quad). Float
// addition is commutative, so each add has the butterfly's operands and the
// result has its bits. Every lane of the warp must call it.
__device__ __forceinline__ float norm_quad_sum(const float (&v)[8]) {
  float a[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) a[j] = __fadd_rn(__fmul_rn(v[j], v[j]), __fmul_rn(v[j + 4], v[j + 4]));
  float s = __fadd_rn(__fadd_rn(a[0], a[2]), __fadd_rn(a[1], a[3]));
  s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, 2));
  return __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, 1));
}

// Warp 0: the pass's `count` block sums in `scratch`, reduced (every lane gets it).
__device__ __forceinline__ float sum_block_sums(const float* scratch, int count, int lane) {
  float t = 0.0f;
#pragma unroll 4  // the loads together, the adds in order
  for (int b = lane; b < count; b += kWarp) t += scratch[b];
  return warp_sum(t);
}

// The whole block calls it; every thread receives Σ x[i]². `scratch` holds
// kSumPass + 1 floats of shared memory. Each warp loads 8 blocks at once.
__device__ __forceinline__ float row_sum_squares(const float* x, int n, float* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, n_warps = blockDim.x / kWarp;
  const int nb = (n + kWarp - 1) / kWarp;
  float total = 0.0f;  // warp 0's
  for (int p0 = 0; p0 < nb; p0 += kSumPass) {
    const int pe = min(nb, p0 + kSumPass);
    for (int b0 = p0 + warp; b0 < pe; b0 += 8 * n_warps) {
      float v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int b = b0 + j * n_warps, i = b * kWarp + lane;
        v[j] = b < pe && i < n ? x[i] : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int b = b0 + j * n_warps;
        const float s = sq_block_sum(v[j]);
        if (lane == 0 && b < pe) scratch[b - p0] = s;
      }
    }
    __syncthreads();
    if (warp == 0) total += sum_block_sums(scratch, pe - p0, lane);
    __syncthreads();
  }
  if (threadIdx.x == 0) scratch[kSumPass] = total;
  __syncthreads();
  return scratch[kSumPass];
}

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

// Activations in the dot-product format of the quantized matvecs: per 32
// elements, int8 values q and ds = {d, d * Σq} with x ≈ d * q (d = max|x| / 127).
// Both sums the weight formats need (Σ w·x and Σ x) come out of one dp4a pass.
struct Q8Act {
  int8_t* q;    // [k]
  float2* ds;   // [k / 32]
};

// Quantizes 32 values held one per lane into block `b` of `out`.
__device__ __forceinline__ void quantize_block_q8(float v, int lane, int b, int8_t* q, float2* ds) {
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.0f;
  const int qi = amax == 0.0f ? 0 : __float2int_rn(v / d);
  q[b * 32 + lane] = static_cast<int8_t>(qi);
  const int sum = warp_sum_int(qi);
  if (lane == 0) ds[b] = make_float2(d, d * static_cast<float>(sum));
}

}  // namespace minfer::kernels

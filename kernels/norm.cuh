// One row's RMS norm with every lane of a block at work: the decode norm
// kernel (norm.cu) and the norm prologue of the matvecs (matvec_kernels.cuh) run it,
// so they give the same bits — and the same bits as row_sum_squares's order
// (common.cuh), which the other norm paths use.
//
// A quad of lanes (lanes 4i..4i+3 of a warp) takes each 32-element block of
// the row, lane t of the quad elements t, t + 4, ..., t + 28: the block's sum
// of squares is norm_quad_sum (sq_block_sum's tree), its Q8 quantization
// quantize_block_q8's arithmetic with the max and the sum over the quad. The
// one-warp-a-block order took the warps' shuffles one block after another
// (a 4-warp matvec block normalising a 0.5B row did 7 blocks a warp).
#pragma once

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace minfer::kernels {

// Blocks of the row a quad loads at once (loads in flight).
constexpr int kNormQuadBlocks = 2;

// Before the row is ready (e.g. before the PDL wait): the norm weights, which
// are constant, into L1. Any thread layout; all threads may call it.
__device__ __forceinline__ void norm_quads_prefetch_weights(const float* w, int n) {
  for (int i = static_cast<int>(threadIdx.x) * 32; i < n; i += static_cast<int>(blockDim.x) * 32) prefetch_l1(w + i);
}

// Where quantized values go: value i to q[i], block b's scale and sum to
// ds[b]. (matvec_bridge.cu stores into its swizzled shared memory instead.)
struct Q8Store {
  int8_t* q;
  float2* ds;
  __device__ void value(int i, int8_t v) const { q[i] = v; }
  __device__ void scales(int b, float2 v) const { ds[b] = v; }
};

// Q8 block b of 32 values held by a quad (lane t: elements t, t + 4, ...,
// t + 28 in v; amax: the lane's max |v|), quantize_block_q8's arithmetic with
// the max and the sum taken across the quad. Every lane of the warp calls it.
template <class Store>
__device__ __forceinline__ void quantize_quad_q8(const float (&v)[8], float amax, bool here, int b, int t, const Store& out) {
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  const float d = amax / 127.0f;
  int sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int qi = amax == 0.0f ? 0 : __float2int_rn(v[j] / d);
    sum += qi;
    if (here) out.value(b * 32 + t + 4 * j, static_cast<int8_t>(qi));
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  if (here && t == 0) out.scales(b, make_float2(d, d * static_cast<float>(sum)));
}
__device__ __forceinline__ void quantize_quad_q8(const float (&v)[8], float amax, bool here, int b, int t, int8_t* q,
                                                 float2* ds) {
  quantize_quad_q8(v, amax, here, b, t, Q8Store{q, ds});
}

// The row's scale 1 / sqrt(mean(x²) + eps) from its 32-element block sums of
// squares (sums, n / 32 of them, norm_quad_sum's bits): every warp adds them
// itself, in row_sum_squares's passes. Every lane of the warp gets it.
__device__ __forceinline__ float norm_scale(const float* sums, int n, float eps, int lane) {
  const int nb = n / 32;
  float total = 0.0f;
  for (int p0 = 0; p0 < nb; p0 += kSumPass) total += sum_block_sums(sums + p0, min(kSumPass, nb - p0), lane);
  return rsqrtf(total / static_cast<float>(n) + eps);
}

// y = x / sqrt(mean(x²) + eps) * w for one row of n elements (n % 32 == 0),
// written as f32 (y32), f16 (y16, in X16Order::kLanes when y16_lanes: n % 128
// == 0) and Q8 blocks (q, ds), each optional.
// sums: n / 32 floats of shared memory. All threads of the block call it
// (blockDim.x a multiple of 32); it ends with a barrier, so the outputs may be
// shared memory that the block reads next. x is read twice (the second time
// from L1); kL2 reads it from L2 instead, for a row other blocks of the same
// kernel wrote (this SM's L1 may hold stale lines of it).
template <bool kL2 = false>
__device__ __forceinline__ void rms_norm_quads(const float* x, const float* w, int n, float eps, float* sums, float* y32,
                                               __half* y16, int8_t* q, float2* ds, bool y16_lanes = false) {
  auto ld = [x](int i) { return kL2 ? __ldcg(x + i) : x[i]; };
  const int nb = n / 32, lane = threadIdx.x % kWarp, t = lane % 4;
  const int quads = static_cast<int>(blockDim.x) / 4, first = static_cast<int>(threadIdx.x) / 4;
  const int warp_first = static_cast<int>(threadIdx.x) / kWarp * (kWarp / 4);
  // The loops run while the warp's first quad has a block: uniform within a
  // warp (the shuffles need every lane); quads past the row hold zeros.
  for (int b0 = 0; warp_first + b0 < nb; b0 += kNormQuadBlocks * quads) {
    float v[kNormQuadBlocks][8];
#pragma unroll
    for (int u = 0; u < kNormQuadBlocks; ++u) {
      const int b = first + b0 + u * quads;
#pragma unroll
      for (int j = 0; j < 8; ++j) v[u][j] = b < nb ? ld(b * 32 + t + 4 * j) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kNormQuadBlocks; ++u) {
      const int b = first + b0 + u * quads;
      const float s = norm_quad_sum(v[u]);
      if (t == 0 && b < nb) sums[b] = s;
    }
  }
  __syncthreads();
  const float scale = norm_scale(sums, n, eps, lane);
  for (int b0 = 0; warp_first + b0 < nb; b0 += quads) {
    const int b = first + b0;
    const bool here = b < nb;
    float v[8], amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int i = b * 32 + t + 4 * j;
      v[j] = here ? ld(i) * scale * w[i] : 0.0f;
      amax = fmaxf(amax, fabsf(v[j]));
    }
    if (here) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int i = b * 32 + t + 4 * j;
        if (y32 != nullptr) y32[i] = v[j];
        if (y16 != nullptr) y16[y16_lanes ? x16_index(i, X16Order::kLanes) : i] = __float2half_rn(v[j]);
      }
    }
    if (q != nullptr) quantize_quad_q8(v, amax, here, b, t, q, ds);  // q: uniform (the shuffles)
  }
  __syncthreads();
}

// ---- The deferred-scale norm (decode, for products of quantized weights) ----
//
// RMSNorm scales the whole row by one number, s = 1 / sqrt(mean(x²) + eps),
// and a product is linear in its input: W · (s · x ⊙ w) = s · (W · (x ⊙ w)).
// So the norm can hand its consumer Q8 blocks of x ⊙ w, unscaled, and s; the
// consumer multiplies each row value by s last. Each 32-element block of the
// Q8 output needs only its own 32 inputs: in a matvec's prologue the norm is
// one pass and one barrier (not rms_norm_quads's two), and s, which needs the
// whole row, is only wanted at the end. Not the bits of rms_norm_quads then
// Q8 (the values are rounded to Q8 before the scale, not after), but the same
// bits on every path that defers; s has norm_scale's bits on all of them.

// Block b of a deferred norm by a quad (lane t = lane % 4 holds elements t,
// t + 4, ..., t + 28 of x and of the norm weights w): its Q8 values and
// scales of x ⊙ w (to `out`, a Q8Store or the like), and its sum of squares
// of x into sums[b]. Every lane of the warp calls it; lanes whose quad has
// no block pass here = false (and zeros).
template <class Store>
__device__ __forceinline__ void deferred_norm_quad(const float (&x)[8], const float (&w)[8], bool here, int b, int t,
                                                   const Store& out, float* sums) {
  const float s = norm_quad_sum(x);
  float v[8], amax = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    v[j] = __fmul_rn(x[j], w[j]);
    amax = fmaxf(amax, fabsf(v[j]));
  }
  quantize_quad_q8(v, amax, here, b, t, out);
  if (here && t == 0) sums[b] = s;
}

// The deferred form of one row by a whole block: Q8 of x ⊙ w to `out`, the
// block sums of squares into sums (shared memory, n / 32 floats; then
// norm_scale gives s). A quad a 32-element block, one pass over x. All
// threads of the block call it (blockDim.x a multiple of 32); it ends with a
// barrier. kL2: x read from L2, for a row other blocks of the same kernel
// wrote (this SM's L1 may hold stale lines of it).
template <bool kL2, class Store>
__device__ __forceinline__ void deferred_norm_quads(const float* x, const float* w, int n, const Store& out, float* sums) {
  auto ld = [x](int i) { return kL2 ? __ldcg(x + i) : x[i]; };
  const int nb = n / 32, t = static_cast<int>(threadIdx.x) % 4;
  const int quads = static_cast<int>(blockDim.x) / 4, first = static_cast<int>(threadIdx.x) / 4;
  const int warp_first = static_cast<int>(threadIdx.x) / kWarp * (kWarp / 4);
  // Uniform within a warp (the shuffles need every lane); quads past the
  // row hold zeros.
  for (int b0 = 0; warp_first + b0 < nb; b0 += quads) {
    const int b = first + b0;
    const bool here = b < nb;
    float xv[8], wv[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      xv[j] = here ? ld(b * 32 + t + 4 * j) : 0.0f;
      wv[j] = here ? w[b * 32 + t + 4 * j] : 0.0f;
    }
    deferred_norm_quad(xv, wv, here, b, t, out, sums);
  }
  __syncthreads();
}
__device__ __forceinline__ void deferred_norm_quads(const float* x, const float* w, int n, int8_t* q, float2* ds, float* sums) {
  deferred_norm_quads<false>(x, w, n, Q8Store{q, ds}, sums);
}

}  // namespace minfer::kernels

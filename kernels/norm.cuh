// One row's RMS norm with every lane of a block at work: the decode norm
// kernel (norm.cu) and the norm prologue of the matvecs (matvec.cu) run it,
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

namespace minfer::kernels {

// Blocks of the row a quad loads at once (loads in flight).
constexpr int kNormQuadBlocks = 2;

// The 128-byte line at p into this SM's L1 (no register, nothing waits).
__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

// Before the row is ready (e.g. before the PDL wait): the norm weights, which
// are constant, into L1. Any thread layout; all threads may call it.
__device__ __forceinline__ void norm_quads_prefetch_weights(const float* w, int n) {
  for (int i = static_cast<int>(threadIdx.x) * 32; i < n; i += static_cast<int>(blockDim.x) * 32) prefetch_l1(w + i);
}

// y = x / sqrt(mean(x²) + eps) * w for one row of n elements (n % 32 == 0),
// written as f32 (y32), f16 (y16) and Q8 blocks (q, ds), each optional.
// sums: n / 32 floats of shared memory. All threads of the block call it
// (blockDim.x a multiple of 32); it ends with a barrier, so the outputs may be
// shared memory that the block reads next. x is read twice (the second time
// from L1); kL2 reads it from L2 instead, for a row other blocks of the same
// kernel wrote (this SM's L1 may hold stale lines of it).
template <bool kL2 = false>
__device__ __forceinline__ void rms_norm_quads(const float* x, const float* w, int n, float eps, float* sums, float* y32,
                                               __half* y16, int8_t* q, float2* ds) {
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
  // Every warp adds the block sums itself, in row_sum_squares's passes.
  float total = 0.0f;
  for (int p0 = 0; p0 < nb; p0 += kSumPass) total += sum_block_sums(sums + p0, min(kSumPass, nb - p0), lane);
  const float scale = rsqrtf(total / static_cast<float>(n) + eps);
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
        if (y16 != nullptr) y16[i] = __float2half_rn(v[j]);
      }
    }
    if (q == nullptr) continue;  // uniform: no lane shuffles
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    const float d = amax / 127.0f;
    int sum = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int qi = amax == 0.0f ? 0 : __float2int_rn(v[j] / d);
      sum += qi;
      if (here) q[b * 32 + t + 4 * j] = static_cast<int8_t>(qi);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if (here && t == 0) ds[b] = make_float2(d, d * static_cast<float>(sum));
  }
  __syncthreads();
}

}  // namespace minfer::kernels

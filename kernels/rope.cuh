// RoPE and the K/V store as device functions: the q/k/v tail kernels
// (qkv_tail.cu) and the tail folded into the q/k/v product
// (matvec_kernels.cuh) run them, so the two give the same bits.
//
// The rotation is written with explicitly rounded operations (__fmul_rn,
// __fadd_rn: never contracted into FMAs), so that kernels which inline it
// into different code give the same bits; left to the compiler, a * c - b *
// s becomes an FMA in one kernel and not in another (seen on the H200 when
// this code was inlined into the decode attention, 2026-11-30).
#pragma once

#include <cuda_fp16.h>

#include "kernels/kernels.h"

namespace minfer::kernels {

// Pair t's rotation at `pos`: its cosine and sine (x, y). Angles in double:
// at position 32k a float angle is off by ~2e-3 rad. Zeros for t past the
// rotated pairs.
__device__ __forceinline__ float2 rope_cos_sin(int t, int pos, const RopeArgs& r) {
  if (t >= r.n_rot / 2) return make_float2(0.0f, 0.0f);
  const double inv = r.inv_freq != nullptr ? r.inv_freq[t] : pow(static_cast<double>(r.base), -2.0 * t / r.n_rot);
  double theta = static_cast<double>(pos) * r.scale * inv;
  if (r.freq_factors != nullptr) theta /= r.freq_factors[t];
  double sn, cs;
  sincos(theta, &sn, &cs);
  return make_float2(static_cast<float>(cs), static_cast<float>(sn));
}

// A pair (a, b) rotated by `cs` (rope_cos_sin): a is the pair's first
// element (index t in NeoX order, 2t in the normal one), b its second.
__device__ __forceinline__ float rope_first(float a, float b, float2 cs) {
  return __fsub_rn(__fmul_rn(a, cs.x), __fmul_rn(b, cs.y));
}
__device__ __forceinline__ float rope_second(float a, float b, float2 cs) {
  return __fadd_rn(__fmul_rn(a, cs.y), __fmul_rn(b, cs.x));
}

__device__ __forceinline__ void store_cache(void* cache, bool f16, size_t offset, float v) {
  if (f16) static_cast<__half*>(cache)[offset] = __float2half_rn(v);
  else static_cast<float*>(cache)[offset] = v;
}

}  // namespace minfer::kernels

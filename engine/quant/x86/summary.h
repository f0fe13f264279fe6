// x86: per-column summaries of an activation row, computed once per gemm call
// and shared by every weight row: for each scale block (32 elements, 16 for
// Q6_K) the activation scale, the min-term multiplier and the integer
// correction that undoes the weight code offset:
//
//   dot(w, x) over a block = d * dx * (sum_i u_i q_i + corr) + m * sx
//   corr = -offset * sum_i q_i,   sx = dx * sum_i q_i  (Q8_1: its stored s)
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "engine/quant/blocks.h"
#include "engine/quant/x86/unpack.h"

namespace minfer::quant::x86 {
namespace {

struct Summary {
  float dx, sx;
  int32_t corr, pad;
};

// Geometry of the activation blocks a weight format F is dotted with.
template <class F>
struct ActGeometry {
  static constexpr int kScaleElems = F::kTwoScales ? 16 : 32;  // elements per scale block
  static constexpr int kBlockBytes = F::kAct == Act::kQ8_0 ? 34 : F::kAct == Act::kQ8_1 ? 36 : 292;
  static constexpr int kQsOffset = F::kAct == Act::kQ8_0 ? 2 : 4;
  static constexpr int kPerBlock = (F::kAct == Act::kQ8_K ? 256 : 32) / kScaleElems;
  // Byte offset of the codes of scale block b within an activation row.
  static int64_t offset(int64_t b) {
    return (b / kPerBlock) * kBlockBytes + kQsOffset + (b % kPerBlock) * kScaleElems;
  }
};

inline int32_t sum_i8x32(const int8_t* q) {
  // sad against 0 sums unsigned bytes, so shift the codes by 128 first.
  const __m256i u = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)),
                                     _mm256_set1_epi8(static_cast<char>(0x80)));
  const __m256i s = _mm256_sad_epu8(u, _mm256_setzero_si256());
  const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  return static_cast<int32_t>(_mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1)) - 32 * 128;
}

// Summaries of one activation row of k elements (k / kScaleElems entries).
template <class F>
void summarize(const uint8_t* x, int64_t k, Summary* out) {
  using G = ActGeometry<F>;
  const int64_t nsb = k / G::kScaleElems;
  for (int64_t b = 0; b < nsb; ++b) {
    Summary s{0.f, 0.f, 0, 0};
    if constexpr (F::kAct == Act::kQ8_0) {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(x)[b];
      s.dx = _cvtsh_ss(blk.d);
      if constexpr (F::kOffset != 0) s.corr = -F::kOffset * sum_i8x32(blk.qs);
    } else if constexpr (F::kAct == Act::kQ8_1) {
      const auto& blk = reinterpret_cast<const BlockQ8_1*>(x)[b];
      s.dx = _cvtsh_ss(blk.d);
      s.sx = _cvtsh_ss(blk.s);
    } else {
      const auto& blk = reinterpret_cast<const BlockQ8_K*>(x)[b / G::kPerBlock];
      const int sub = static_cast<int>(b % G::kPerBlock);
      s.dx = blk.d;
      const int32_t sum = G::kScaleElems == 16 ? blk.bsums[sub] : blk.bsums[2 * sub] + blk.bsums[2 * sub + 1];
      s.sx = blk.d * static_cast<float>(sum);
      s.corr = -F::kOffset * sum;
    }
    out[b] = s;
  }
}

}  // namespace
}  // namespace minfer::quant::x86

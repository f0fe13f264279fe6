// x86: the n_cols == 1 path (decode, and vec_dot): weight rows streamed once,
// four at a time so that the activation block and its summary are loaded once
// for four rows and four independent accumulator chains hide the latencies.
// Memory bound on large matrices; no repacking (it would cost more than the
// single pass it serves).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "engine/quant/x86/summary.h"
#include "engine/quant/x86/unpack.h"

namespace minfer::quant::x86 {
namespace {

inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class F>
constexpr bool is_signed_format() {
  if constexpr (requires { F::kSigned; }) {
    return F::kSigned;
  } else {
    return false;
  }
}

// One scale block pair: integer dot of 32 codes with 32 activations, the
// offset correction placed in the lane(s) of its half.
template <class V, class F>
inline __m256i block_dot(__m256i u, __m256i xq, const Summary* s) {
  __m256i init = _mm256_setzero_si256();
  if constexpr (F::kOffset != 0) {
    if constexpr (F::kTwoScales) {
      init = _mm256_set_m128i(_mm_cvtsi32_si128(s[1].corr), _mm_cvtsi32_si128(s[0].corr));
    } else {
      init = _mm256_castsi128_si256(_mm_cvtsi32_si128(s[0].corr));
    }
  }
  if constexpr (is_signed_format<F>()) {
    return V::dot256_signed(init, u, xq);
  } else {
    return V::dot256(init, u, xq);
  }
}

template <class V, class F, int R>
void gemv_rows(const uint8_t* w, size_t w_stride, const uint8_t* x, const Summary* sums, int64_t k, float* y) {
  using G = ActGeometry<F>;
  constexpr int kSbPerBlock = F::kTwoScales ? 2 : 1;  // scale blocks per 32 elements
  __m256 acc[R];
  float macc[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    macc[r] = 0.f;
  }
  for (int64_t j = 0; j < k / 32; ++j) {
    const Summary* s = sums + j * kSbPerBlock;
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + G::offset(j * kSbPerBlock)));
    for (int r = 0; r < R; ++r) {
      const Unpacked b = F::unpack(w + r * w_stride, j);
      const __m256i dot = block_dot<V, F>(b.u, xq, s);
      __m256 scale;
      if constexpr (F::kTwoScales) {
        scale = _mm256_set_m128(_mm_set1_ps(b.d_hi * s[1].dx), _mm_set1_ps(b.d * s[0].dx));
      } else {
        scale = _mm256_set1_ps(b.d * s[0].dx);
      }
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[r]);
      if constexpr (F::kHasMin) macc[r] += b.m * s[0].sx;
    }
  }
  for (int r = 0; r < R; ++r) y[r] = hsum_ps(acc[r]) + macc[r];
}

template <class V, class F>
void gemv(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, const Summary* sums, int64_t k,
          float* y) {
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) gemv_rows<V, F, 4>(w + r * w_stride, w_stride, x, sums, k, y + r);
  for (; r < n_rows; ++r) gemv_rows<V, F, 1>(w + r * w_stride, w_stride, x, sums, k, y + r);
}

}  // namespace
}  // namespace minfer::quant::x86

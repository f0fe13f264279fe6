// x86: f32 activation rows to Q8_0 / Q8_1 / Q8_K, bit-identical to the
// reference (ref::quantize_row): the same scalar scale arithmetic, IEEE
// vector multiplies, and the reference's rounding (Q8_0/Q8_1: roundf, half
// away from zero, done as trunc + compare; Q8_K: nearest_int, half to even,
// which is what cvtps2dq does under the default MXCSR).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include <cstring>
#include "engine/quant/blocks.h"
#include "engine/quant/quantize_act_rows.h"

namespace minfer::quant::x86 {
namespace {

// F16C conversion, round to nearest even: the same bits as minfer::f32_to_f16
// (tests/unit checks that function against this instruction). half.h itself
// is not used in ISA files; see blocks.h for why.
inline uint16_t to_f16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

inline float hmax_ps(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// roundf(v) for |v| < 2^23: truncate, add 1 when the dropped fraction >= 0.5,
// put the sign back (roundf(-0.3) is -0.0, which converts to 0 like 0.0).
inline __m256i round_half_away(__m256 v) {
  const __m256 a = abs_ps(v);
  const __m256 t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(a, t), _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                  _mm256_set1_ps(1.0f));
  const __m256 r = _mm256_or_ps(_mm256_add_ps(t, up), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  return _mm256_cvttps_epi32(r);
}

// Four vectors of 8 int32 (elements 0..31 in order) to 32 int8, saturating
// (values are already within [-127, 127]).
inline __m256i pack_i32x32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);  // lanes interleave in 128-bit halves
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// One 32-element Q8_0/Q8_1 block: returns d, writes codes, sets their sum.
inline float quantize_block_q8(const float* x, int8_t* qs, int32_t* sum) {
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(amax, abs_ps(v[i]));
  }
  const float d = hmax_ps(amax) / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const __m256 idv = _mm256_set1_ps(id);
  __m256i q[4];
  for (int i = 0; i < 4; ++i) q[i] = round_half_away(_mm256_mul_ps(v[i], idv));
  *sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack_i32x32_to_i8(q[0], q[1], q[2], q[3]));
  return d;
}

constexpr auto quantize_q8_0 = quantize_rows_q8_0<quantize_block_q8, to_f16>;
constexpr auto quantize_q8_1 = quantize_rows_q8_1<quantize_block_q8, to_f16>;

void quantize_q8_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    __m256 amaxv = _mm256_setzero_ps();
    for (int j = 0; j < kQK_K; j += 8) amaxv = _mm256_max_ps(amaxv, abs_ps(_mm256_loadu_ps(x + j)));
    const float amax = hmax_ps(amaxv);
    if (!amax) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    // The reference keeps the sign of the first element of largest magnitude.
    float max = 0.f;
    for (int j = 0; j < kQK_K; j += 8) {
      const int mask = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + j)), _mm256_set1_ps(amax),
                                                        _CMP_EQ_OQ));
      if (mask) {
        max = x[j + __builtin_ctz(static_cast<unsigned>(mask))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 is = _mm256_set1_ps(iscale);
    const __m256i hi = _mm256_set1_epi32(127);
    for (int j = 0; j < kQK_K; j += 32) {
      __m256i q[4];
      for (int t = 0; t < 4; ++t) {
        q[t] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * t), is)), hi);
      }
      y[i].bsums[j / 16] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
      y[i].bsums[j / 16 + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + j), pack_i32x32_to_i8(q[0], q[1], q[2], q[3]));
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace
}  // namespace minfer::quant::x86

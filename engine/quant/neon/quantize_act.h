// NEON: f32 activation rows to Q8_0 / Q8_1 / Q8_K, bit-identical to the
// reference: FCVTAS rounds half away from zero (= roundf, Q8_0/Q8_1), FCVTNS
// half to even (= ggml's nearest_int, Q8_K); scales are computed with the
// reference's scalar arithmetic.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "engine/quant/blocks.h"
#include "engine/quant/quantize_act_rows.h"

namespace minfer::quant::neon {
namespace {

// f32 -> f16, round to nearest even (FCVTN under the default FPCR): the same
// bits as minfer::f32_to_f16, subnormals included.
inline uint16_t to_f16(float f) { return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0); }

// 16 int32 (elements in order) to 16 int8; values are within [-127, 127].
inline int8x16_t narrow16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  return vcombine_s8(vqmovn_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b))),
                     vqmovn_s16(vcombine_s16(vqmovn_s32(c), vqmovn_s32(d))));
}

inline float quantize_block_q8(const float* x, int8_t* qs, int32_t* sum) {
  float32x4_t v[8];
  float32x4_t amax = vdupq_n_f32(0.f);
  for (int i = 0; i < 8; ++i) {
    v[i] = vld1q_f32(x + 4 * i);
    amax = vmaxq_f32(amax, vabsq_f32(v[i]));
  }
  const float d = vmaxvq_f32(amax) / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int32x4_t q[8];
  int32x4_t s = vdupq_n_s32(0);
  for (int i = 0; i < 8; ++i) {
    q[i] = vcvtaq_s32_f32(vmulq_n_f32(v[i], id));
    s = vaddq_s32(s, q[i]);
  }
  *sum = vaddvq_s32(s);
  vst1q_s8(qs, narrow16(q[0], q[1], q[2], q[3]));
  vst1q_s8(qs + 16, narrow16(q[4], q[5], q[6], q[7]));
  return d;
}

constexpr auto quantize_q8_0 = quantize_rows_q8_0<quantize_block_q8, to_f16>;
constexpr auto quantize_q8_1 = quantize_rows_q8_1<quantize_block_q8, to_f16>;

void quantize_q8_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float32x4_t amaxv = vdupq_n_f32(0.f);
    for (int j = 0; j < kQK_K; j += 4) amaxv = vmaxq_f32(amaxv, vabsq_f32(vld1q_f32(x + j)));
    const float amax = vmaxvq_f32(amaxv);
    if (!amax) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    float max = 0.f;  // first element of largest magnitude, as the reference
    for (int j = 0; j < kQK_K; ++j) {
      if (x[j] == amax || x[j] == -amax) {
        max = x[j];
        break;
      }
    }
    const float iscale = -127.f / max;
    const int32x4_t hi = vdupq_n_s32(127);
    for (int j = 0; j < kQK_K; j += 16) {
      int32x4_t q[4];
      for (int t = 0; t < 4; ++t) q[t] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * t), iscale)), hi);
      y[i].bsums[j / 16] = static_cast<int16_t>(vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3]))));
      vst1q_s8(y[i].qs + j, narrow16(q[0], q[1], q[2], q[3]));
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace
}  // namespace minfer::quant::neon

// NEON: gemm for F32 / F16 / BF16 weights against F32 activations, tiles of
// 4 rows x 4 columns of float32x4 accumulators (FCVTL widens f16, a 16-bit
// shift widens bf16), with a scalar tail for rows not a multiple of 4.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace minfer::quant::neon {
namespace {

struct WeightF32 {
  static constexpr int kBytes = 4;
  static float32x4_t load(const uint8_t* p) { return vld1q_f32(reinterpret_cast<const float*>(p)); }
  static float scalar(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
};
struct WeightF16 {
  static constexpr int kBytes = 2;
  static float32x4_t load(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)))); }
  static float scalar(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(v))), 0);
  }
};
struct WeightBF16 {
  static constexpr int kBytes = 2;
  static float32x4_t load(const uint8_t* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)), 16));
  }
  static float scalar(const uint8_t* p) {
    uint32_t v = 0;
    std::memcpy(reinterpret_cast<uint8_t*>(&v) + 2, p, 2);
    float f;
    std::memcpy(&f, &v, 4);
    return f;
  }
};

template <class W, int kR, int kC>
void float_tile(const uint8_t* w, size_t w_stride, const float* x, size_t xs, int64_t k, float* y, int64_t ldy) {
  float32x4_t acc[kR][kC];
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kC; ++c) acc[r][c] = vdupq_n_f32(0.f);
  }
  int64_t i = 0;
  for (; i + 4 <= k; i += 4) {
    float32x4_t xv[kC];
    for (int c = 0; c < kC; ++c) xv[c] = vld1q_f32(x + c * xs + i);
    for (int r = 0; r < kR; ++r) {
      const float32x4_t wv = W::load(w + r * w_stride + i * W::kBytes);
      for (int c = 0; c < kC; ++c) acc[r][c] = vfmaq_f32(acc[r][c], wv, xv[c]);
    }
  }
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kC; ++c) {
      float s = vaddvq_f32(acc[r][c]);
      for (int64_t t = i; t < k; ++t) s += W::scalar(w + r * w_stride + t * W::kBytes) * x[c * xs + t];
      y[c * ldy + r] = s;
    }
  }
}

template <class W>
void gemm_float(const void* w_, size_t w_stride, int64_t n_rows, const void* x_, size_t x_stride, int64_t n_cols,
                int64_t k, float* y, int64_t ldy) {
  constexpr int kR = 4, kC = 4;
  const auto* w = static_cast<const uint8_t*>(w_);
  const auto* x = static_cast<const float*>(x_);
  const size_t xs = x_stride / sizeof(float);
  int64_t c = 0;
  for (; c + kC <= n_cols; c += kC) {
    int64_t r = 0;
    for (; r + kR <= n_rows; r += kR) float_tile<W, kR, kC>(w + r * w_stride, w_stride, x + c * xs, xs, k, y + c * ldy + r, ldy);
    for (; r < n_rows; ++r) float_tile<W, 1, kC>(w + r * w_stride, w_stride, x + c * xs, xs, k, y + c * ldy + r, ldy);
  }
  for (; c < n_cols; ++c) {
    int64_t r = 0;
    for (; r + kR <= n_rows; r += kR) float_tile<W, kR, 1>(w + r * w_stride, w_stride, x + c * xs, xs, k, y + c * ldy + r, ldy);
    for (; r < n_rows; ++r) float_tile<W, 1, 1>(w + r * w_stride, w_stride, x + c * xs, xs, k, y + c * ldy + r, ldy);
  }
}

}  // namespace
}  // namespace minfer::quant::neon

// NEON: gemm for the quantized formats. Activation columns are summarised
// once per call (scale per block, and d * sum for the min term), then tiles
// of kR weight rows x kC columns: each unpacked weight block feeds kC dot
// products and each activation block kR, two sdot (16 bytes each) per pair.
// A78 issues two 128-bit sdot per cycle; 4 x 4 tiles keep 16 int32x4 and 16
// float32x4 accumulators in the 32 vector registers (less under pressure).
// n_cols == 1 is the same code with kC = 1 (decode, memory bound).
//
// Not repacked like the x86 panels: without a broadcast-from-memory
// multiply-add the interleaved layout would need a lane-indexed sdot per
// 4 bytes, which is a later optimisation (TODO: measure on Orin first).
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "engine/quant/blocks.h"
#include "engine/quant/kernels.h"
#include "engine/quant/neon/unpack.h"

namespace minfer::quant::neon {
namespace {

struct Summary {
  float dx, dx_hi, sx, pad;  // per 32 elements; dx_hi: Q8_K scale of 16..31 (same d)
};

template <class F>
struct ActGeometry {
  static constexpr int kBlockBytes = F::kAct == Act::kQ8_0 ? 34 : F::kAct == Act::kQ8_1 ? 36 : 292;
  static constexpr int kQsOffset = F::kAct == Act::kQ8_0 ? 2 : 4;
  static constexpr int kPerBlock = F::kAct == Act::kQ8_K ? 8 : 1;  // 32-element blocks per activation block
  static int64_t offset(int64_t j) { return (j / kPerBlock) * kBlockBytes + kQsOffset + (j % kPerBlock) * 32; }
};

template <class F>
void summarize(const uint8_t* x, int64_t k, Summary* out) {
  for (int64_t j = 0; j < k / 32; ++j) {
    Summary s{0.f, 0.f, 0.f, 0.f};
    if constexpr (F::kAct == Act::kQ8_0) {
      s.dx = s.dx_hi = load_f16(reinterpret_cast<const BlockQ8_0*>(x)[j].d);
    } else if constexpr (F::kAct == Act::kQ8_1) {
      const auto& b = reinterpret_cast<const BlockQ8_1*>(x)[j];
      s.dx = s.dx_hi = load_f16(b.d);
      s.sx = load_f16(b.s);
    } else {
      const auto& b = reinterpret_cast<const BlockQ8_K*>(x)[j / 8];
      const int sub = static_cast<int>(j % 8);
      s.dx = s.dx_hi = b.d;
      s.sx = b.d * static_cast<float>(b.bsums[2 * sub] + b.bsums[2 * sub + 1]);
    }
    out[j] = s;
  }
}

inline int32x4_t dot32(int32x4_t acc, const Unpacked& w, int8x16_t x_lo, int8x16_t x_hi) {
  return vdotq_s32(vdotq_s32(acc, w.lo, x_lo), w.hi, x_hi);
}

template <class F, int kR, int kC>
void tile(const uint8_t* w, size_t w_stride, const uint8_t* const* xs, const Summary* const* ss, int64_t k, float* y,
          int64_t ldy) {
  using G = ActGeometry<F>;
  float32x4_t acc[kR][kC];
  float macc[kR][kC];
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kC; ++c) {
      acc[r][c] = vdupq_n_f32(0.f);
      macc[r][c] = 0.f;
    }
  }
  const int32x4_t zero = vdupq_n_s32(0);
  for (int64_t j = 0; j < k / 32; ++j) {
    Unpacked u[kR];
    for (int r = 0; r < kR; ++r) u[r] = F::unpack(w + r * w_stride, j);
    const int64_t xoff = G::offset(j);
    for (int c = 0; c < kC; ++c) {
      const int8x16_t x_lo = vld1q_s8(reinterpret_cast<const int8_t*>(xs[c] + xoff));
      const int8x16_t x_hi = vld1q_s8(reinterpret_cast<const int8_t*>(xs[c] + xoff + 16));
      const Summary& s = ss[c][j];
      for (int r = 0; r < kR; ++r) {
        if constexpr (F::kTwoScales) {
          const float32x4_t lo = vcvtq_f32_s32(vdotq_s32(zero, u[r].lo, x_lo));
          const float32x4_t hi = vcvtq_f32_s32(vdotq_s32(zero, u[r].hi, x_hi));
          acc[r][c] = vfmaq_n_f32(acc[r][c], lo, u[r].d * s.dx);
          acc[r][c] = vfmaq_n_f32(acc[r][c], hi, u[r].d_hi * s.dx_hi);
        } else {
          acc[r][c] = vfmaq_n_f32(acc[r][c], vcvtq_f32_s32(dot32(zero, u[r], x_lo, x_hi)), u[r].d * s.dx);
        }
        if constexpr (F::kHasMin) macc[r][c] += u[r].m * s.sx;
      }
    }
  }
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kC; ++c) y[c * ldy + r] = vaddvq_f32(acc[r][c]) + macc[r][c];
  }
}

template <class F>
void gemm_quant(const void* w_, size_t w_stride, int64_t n_rows, const void* x_, size_t x_stride, int64_t n_cols,
                int64_t k, float* y, int64_t ldy) {
  constexpr int kR = 4, kC = 4;
  const auto* w = static_cast<const uint8_t*>(w_);
  const auto* x = static_cast<const uint8_t*>(x_);
  const int64_t nb = k / 32;
  auto* sums = static_cast<Summary*>(scratch(kScratchActivations, sizeof(Summary) * n_cols * nb));
  for (int64_t c = 0; c < n_cols; ++c) summarize<F>(x + c * x_stride, k, sums + c * nb);
  const uint8_t* xs[kC];
  const Summary* ss[kC];
  int64_t c = 0;
  for (; c < n_cols; c += kC) {
    const int64_t nc = n_cols - c < kC ? n_cols - c : kC;
    for (int64_t i = 0; i < nc; ++i) {
      xs[i] = x + (c + i) * x_stride;
      ss[i] = sums + (c + i) * nb;
    }
    for (int64_t r = 0; r < n_rows;) {
      const uint8_t* wr = w + r * w_stride;
      float* yr = y + c * ldy + r;
      if (n_rows - r >= kR) {
        if (nc == kC) tile<F, kR, kC>(wr, w_stride, xs, ss, k, yr, ldy);
        else for (int64_t i = 0; i < nc; ++i) tile<F, kR, 1>(wr, w_stride, xs + i, ss + i, k, yr + i * ldy, ldy);
        r += kR;
      } else {
        if (nc == kC) tile<F, 1, kC>(wr, w_stride, xs, ss, k, yr, ldy);
        else for (int64_t i = 0; i < nc; ++i) tile<F, 1, 1>(wr, w_stride, xs + i, ss + i, k, yr + i * ldy, ldy);
        r += 1;
      }
    }
  }
}

}  // namespace
}  // namespace minfer::quant::neon

// x86: gemm for F32, F16 and BF16 weights against F32 activations. Tiles of
// kR rows x kC columns keep kR * kC accumulators in registers, so each weight
// vector (converted once) feeds kC FMAs and each activation vector kR; rows
// are taken in L2-sized chunks so that the weights are re-read from L2, not
// memory, for every column tile.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>


namespace minfer::quant::x86 {
namespace {

struct WeightF32 {
  static constexpr int kBytes = 4;
  static float scalar(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
};
struct WeightF16 {
  static constexpr int kBytes = 2;
  static float scalar(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return _cvtsh_ss(v);
  }
};
struct WeightBF16 {
  static constexpr int kBytes = 2;
  static float scalar(const uint8_t* p) {
    uint32_t v = 0;
    std::memcpy(reinterpret_cast<uint8_t*>(&v) + 2, p, 2);  // bf16 is the high half of an f32
    float f;
    std::memcpy(&f, &v, 4);
    return f;
  }
};

template <class V, class W, int kR, int kC>
void float_tile(const uint8_t* w, size_t w_stride, const float* x, size_t x_stride_f, int64_t k, float* y,
                int64_t ldy) {
  typename V::F acc[kR][kC];
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kC; ++c) acc[r][c] = V::zerof();
  }
  constexpr int kL = V::kLanes;
  int64_t i = 0;
  for (; i + kL <= k; i += kL) {
    typename V::F xv[kC];
    for (int c = 0; c < kC; ++c) xv[c] = V::loadf(x + c * x_stride_f + i);
    for (int r = 0; r < kR; ++r) {
      const typename V::F wv = V::template load_weights<W>(w + r * w_stride + i * W::kBytes);
      for (int c = 0; c < kC; ++c) acc[r][c] = V::fma(wv, xv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kC; ++c) {
      float s = V::hsum(acc[r][c]);
      for (int64_t t = i; t < k; ++t) s += W::scalar(w + r * w_stride + t * W::kBytes) * x[c * x_stride_f + t];
      y[c * ldy + r] = s;
    }
  }
}

template <class V, class W>
void gemm_float(const void* w_, size_t w_stride, int64_t n_rows, const void* x_, size_t x_stride, int64_t n_cols,
                int64_t k, float* y, int64_t ldy) {
  constexpr int kR = V::kFloatRows, kC = V::kFloatCols;
  const auto* w = static_cast<const uint8_t*>(w_);
  const auto* x = static_cast<const float*>(x_);
  const size_t xs = x_stride / sizeof(float);
  const int64_t row_bytes = k * W::kBytes > 1 ? k * W::kBytes : 1;
  int64_t chunk = (256 * 1024) / row_bytes / kR * kR;
  if (chunk < kR) chunk = kR;
  for (int64_t r0 = 0; r0 < n_rows; r0 += chunk) {
    const int64_t r1 = n_rows - r0 < chunk ? n_rows : r0 + chunk;
    int64_t c = 0;
    for (; c + kC <= n_cols; c += kC) {
      int64_t r = r0;
      for (; r + kR <= r1; r += kR) {
        float_tile<V, W, kR, kC>(w + r * w_stride, w_stride, x + c * xs, xs, k, y + c * ldy + r, ldy);
      }
      for (; r < r1; ++r) float_tile<V, W, 1, kC>(w + r * w_stride, w_stride, x + c * xs, xs, k, y + c * ldy + r, ldy);
    }
    for (; c < n_cols; ++c) {
      int64_t r = r0;
      for (; r + kR <= r1; r += kR) {
        float_tile<V, W, kR, 1>(w + r * w_stride, w_stride, x + c * xs, xs, k, y + c * ldy + r, ldy);
      }
      for (; r < r1; ++r) float_tile<V, W, 1, 1>(w + r * w_stride, w_stride, x + c * xs, xs, k, y + c * ldy + r, ldy);
    }
  }
}

}  // namespace
}  // namespace minfer::quant::x86

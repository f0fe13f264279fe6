// Element-wise dequantization of the plane layout: value of element i of row
// r. Used where a whole row or matrix is expanded (embedding rows, the f16
// operand of prefill GEMMs); the decode dot products use dot.cuh instead.
#pragma once

#include "kernels/common.cuh"
#include "kernels/dot.cuh"
#include "kernels/weight_layout.h"

namespace minfer::kernels {

__device__ __forceinline__ float dequant_element(const DeviceWeight& w, int r, int i) {
  const size_t row = static_cast<size_t>(r);
  switch (w.type) {
    case WType::kF32: return static_cast<const float*>(w.q)[row * w.k + i];
    case WType::kF16: return h2f(static_cast<const uint16_t*>(w.q)[row * w.k + i]);
    case WType::kBF16: return bf2f(static_cast<const uint16_t*>(w.q)[row * w.k + i]);
    case WType::kQ8_0: {
      const float d = h2f(static_cast<const uint16_t*>(w.meta)[row * (w.k / 32) + i / 32]);
      const uint32_t at = split_offset(static_cast<uint32_t>(i / 32), static_cast<uint32_t>(i % 32), static_cast<uint32_t>(w.k / 32));
      return d * static_cast<float>(static_cast<const int8_t*>(w.q)[row * w.k + at]);
    }
    case WType::kQ4_0:
    case WType::kQ4_1:
    case WType::kQ5_0:
    case WType::kQ5_1: {
      const int b = i / 32, j = i % 32;
      const uint8_t byte = static_cast<const uint8_t*>(w.q)[row * (w.k / 2) + b * 16 + (j % 16)];
      int v = j < 16 ? (byte & 0xF) : (byte >> 4);
      const size_t blk = row * (w.k / 32) + b;
      if (w.type == WType::kQ5_0 || w.type == WType::kQ5_1) {
        const uint32_t qh = static_cast<const uint32_t*>(w.qh)[blk];
        v |= ((qh >> j) & 1u) << 4;
      }
      if (w.type == WType::kQ4_0) return h2f(static_cast<const uint16_t*>(w.meta)[blk]) * static_cast<float>(v - 8);
      if (w.type == WType::kQ5_0) return h2f(static_cast<const uint16_t*>(w.meta)[blk]) * static_cast<float>(v - 16);
      const uint32_t dm = static_cast<const uint32_t*>(w.meta)[blk];
      return h2f(dm & 0xFFFF) * static_cast<float>(v) + h2f(dm >> 16);
    }
    case WType::kQ4_K:
    case WType::kQ5_K: {
      const int sb = i / 256, e = i % 256, p = e / 64, l = e % 32, high = (e % 64) / 32;
      const uint8_t* meta = static_cast<const uint8_t*>(w.meta) + (row * (w.k / 256) + sb) * 16;
      const float d = h2f(*reinterpret_cast<const uint16_t*>(meta));
      const float dmin = h2f(*reinterpret_cast<const uint16_t*>(meta + 2));
      int sc, m;
      scale_min_k4(2 * p + high, meta + 4, &sc, &m);
      const uint32_t at = split_offset(static_cast<uint32_t>(4 * sb + p), static_cast<uint32_t>(l), static_cast<uint32_t>(w.k / 64));
      const uint8_t byte = static_cast<const uint8_t*>(w.q)[row * (w.k / 2) + at];
      int v = high ? (byte >> 4) : (byte & 0xF);
      if (w.type == WType::kQ5_K) {
        const uint8_t h = static_cast<const uint8_t*>(w.qh)[row * (w.k / 8) + sb * 32 + l];
        v |= ((h >> (2 * p + high)) & 1) << 4;
      }
      return d * static_cast<float>(sc) * static_cast<float>(v) - dmin * static_cast<float>(m);
    }
    case WType::kQ6_K: {
      const int sb = i / 256, e = i % 256, n = e / 128, g = (e % 128) / 32, l = e % 32;
      const uint8_t* ql = static_cast<const uint8_t*>(w.q) + row * (w.k / 2) + sb * 128 + n * 64;
      const uint8_t* qh = static_cast<const uint8_t*>(w.qh) + row * (w.k / 4) + sb * 64 + n * 32;
      const int8_t* sc = reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(w.meta) + (row * (w.k / 256) + sb) * 16) + 8 * n;
      const float d = h2f(static_cast<const uint16_t*>(w.d)[row * (w.k / 256) + sb]);
      const uint8_t lo = (g == 0 || g == 2) ? ql[l] : ql[l + 32];
      const int nib = g < 2 ? (lo & 0xF) : (lo >> 4);
      const int q = (nib | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;
      return d * static_cast<float>(sc[l / 16 + 2 * g]) * static_cast<float>(q);
    }
  }
  return 0.0f;
}

// Elements i0 .. i0 + 7 of row r (i0 % 8 == 0: one quantization block, and
// for split halves one half of one unit, so their bytes are consecutive).
// The same values as dequant_element; the split types find their bytes once.
__device__ __forceinline__ void dequant8(const DeviceWeight& w, int r, int i0, float (&v)[8]) {
  const size_t row = static_cast<size_t>(r);
  if (w.type == WType::kQ8_0) {
    const unsigned u = static_cast<unsigned>(i0) / 32;
    const float d = h2f(static_cast<const uint16_t*>(w.meta)[row * (w.k / 32) + u]);
    const int8_t* q = static_cast<const int8_t*>(w.q) + row * w.k + split_offset(u, static_cast<unsigned>(i0) % 32, w.k / 32);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = d * static_cast<float>(q[j]);
    return;
  }
  if (w.type == WType::kQ4_K || w.type == WType::kQ5_K) {
    const int sb = i0 / 256, e = i0 % 256, p = e / 64, l = e % 32, high = (e % 64) / 32;
    const uint8_t* meta = static_cast<const uint8_t*>(w.meta) + (row * (w.k / 256) + sb) * 16;
    const float d = h2f(*reinterpret_cast<const uint16_t*>(meta));
    const float dmin = h2f(*reinterpret_cast<const uint16_t*>(meta + 2));
    int sc, m;
    scale_min_k4(2 * p + high, meta + 4, &sc, &m);
    const uint8_t* q = static_cast<const uint8_t*>(w.q) + row * (w.k / 2) + split_offset(4 * sb + p, l, w.k / 64);
    const uint8_t* qh = w.type == WType::kQ5_K ? static_cast<const uint8_t*>(w.qh) + row * (w.k / 8) + sb * 32 + l : nullptr;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      int x = high ? (q[j] >> 4) : (q[j] & 0xF);
      if (qh != nullptr) x |= ((qh[j] >> (2 * p + high)) & 1) << 4;
      v[j] = d * static_cast<float>(sc) * static_cast<float>(x) - dmin * static_cast<float>(m);
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = dequant_element(w, r, i0 + j);
}

}  // namespace minfer::kernels

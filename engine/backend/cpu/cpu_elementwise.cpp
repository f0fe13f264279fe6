// Row-wise ops of the CPU backend. Per row they call the scalar references
// (these ops are a few percent of a step); the pool splits the rows.
#include <cmath>

#include "engine/backend/cpu/cpu_kernels.h"

namespace minfer::cpu {

void RopeTable::build(const ref::RopeParams& p, const int32_t* positions, int n_tokens) {
  half = p.n_rot / 2;
  cos.resize(static_cast<size_t>(n_tokens) * half);
  sin.resize(static_cast<size_t>(n_tokens) * half);
  for (int t = 0; t < n_tokens; ++t) {
    for (int i = 0; i < half; ++i) {
      // Same expression as ref::rope_ref, so the two agree to the last bit of
      // the angle.
      double theta = static_cast<double>(positions[t]) * p.scale *
                     std::pow(static_cast<double>(p.base), -2.0 * i / p.n_rot);
      if (p.freq_factors != nullptr) theta /= p.freq_factors[i];
      cos[static_cast<size_t>(t) * half + i] = static_cast<float>(std::cos(theta));
      sin[static_cast<size_t>(t) * half + i] = static_cast<float>(std::sin(theta));
    }
  }
}

void rope(ThreadPool& pool, float* x, int64_t stride, int n_rows, int n_heads, const ref::RopeParams& p,
          const RopeTable& table) {
  const int half = table.half;
  pool.run(n_rows, [&](int64_t t, int) {
    const float* c = table.cos.data() + t * half;
    const float* s = table.sin.data() + t * half;
    for (int h = 0; h < n_heads; ++h) {
      float* head = x + t * stride + static_cast<int64_t>(h) * p.head_dim;
      for (int i = 0; i < half; ++i) {
        const int i0 = p.type == RopeType::kNorm ? 2 * i : i;
        const int i1 = p.type == RopeType::kNorm ? 2 * i + 1 : i + half;
        const float a = head[i0];
        const float b = head[i1];
        head[i0] = a * c[i] - b * s[i];
        head[i1] = a * s[i] + b * c[i];
      }
    }
  });
}

void rms_norm(ThreadPool& pool, const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride,
              int n_rows, int n, float eps) {
  pool.run(n_rows, [&](int64_t r, int) { ref::rms_norm_ref(x + r * x_stride, w, y + r * y_stride, n, eps); });
}

void swiglu(ThreadPool& pool, float* g, const float* u, int64_t stride, int n_rows, int n) {
  pool.run(n_rows, [&](int64_t r, int) {
    float* gr = g + r * stride;
    const float* ur = u + r * stride;
    for (int i = 0; i < n; ++i) gr[i] = gr[i] / (1.0f + std::exp(-gr[i])) * ur[i];
  });
}

void add(ThreadPool& pool, float* y, const float* x, int64_t stride, int n_rows, int n) {
  pool.run(n_rows, [&](int64_t r, int) {
    float* yr = y + r * stride;
    const float* xr = x + r * stride;
    for (int i = 0; i < n; ++i) yr[i] += xr[i];
  });
}

}  // namespace minfer::cpu

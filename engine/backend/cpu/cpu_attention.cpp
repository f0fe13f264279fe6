// Attention on the CPU: one task per (token, KV head). The task loads each
// cached K and V row once, converts it to f32, and uses it for every query
// head of the group (GQA), which cuts cache traffic by the group size.
// Scores are kept for the whole history (two passes: softmax, then the V sum).
//
// The three inner loops (f16→f32 row, dot, axpy) have AVX2/F16C versions
// chosen at run time on x86-64 and NEON versions on aarch64.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/backend/cpu/cpu_kernels.h"
#include "engine/common/half.h"
#include "engine/quant/quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace minfer::cpu {
namespace {

struct RowOps {
  void (*f16_to_f32)(const uint16_t* src, float* dst, int n);
  float (*dot)(const float* a, const float* b, int n);
  void (*axpy)(float a, const float* x, float* y, int n);
};

void f16_to_f32_scalar(const uint16_t* src, float* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}
float dot_scalar(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
void axpy_scalar(float a, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c"))) void f16_to_f32_avx2(const uint16_t* src, float* dst, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}
__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int n) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  acc0 = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float r = _mm_cvtss_f32(s);
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}
__attribute__((target("avx2,fma"))) void axpy_avx2(float a, const float* x, float* y, int n) {
  const __m256 va = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}
#elif defined(__aarch64__)
void f16_to_f32_neon(const uint16_t* src, float* dst, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}
float dot_neon(const float* a, const float* b, int n) {
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    acc0 = vfmaq_f32(acc0, vld1q_f32(a + i), vld1q_f32(b + i));
    acc1 = vfmaq_f32(acc1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
  }
  float r = vaddvq_f32(vaddq_f32(acc0, acc1));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}
void axpy_neon(float a, const float* x, float* y, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
  for (; i < n; ++i) y[i] += a * x[i];
}
#endif

RowOps select_row_ops() {
#if defined(__x86_64__)
  // A non-scalar active ISA on x86 is avx2 or avx512, each detected only with
  // AVX2 + FMA + F16C (quant/isa.cpp), what these row ops need.
  if (quant::active_isa() != quant::Isa::kScalar) {
    return {f16_to_f32_avx2, dot_avx2, axpy_avx2};
  }
#elif defined(__aarch64__)
  if (quant::active_isa() != quant::Isa::kScalar) return {f16_to_f32_neon, dot_neon, axpy_neon};
#endif
  return {f16_to_f32_scalar, dot_scalar, axpy_scalar};
}

}  // namespace

void attention(ThreadPool& pool, const AttentionArgs& a, std::vector<std::vector<float>>& scratch) {
  const RowOps ops = select_row_ops();
  const ref::AttentionShape& s = a.shape;
  const int hd = s.head_dim;
  const int group = s.n_heads / s.n_kv_heads;
  const int q_dim = s.n_heads * hd;
  const int kv_dim = s.n_kv_heads * hd;
  const size_t elem = s.kv_type == DType::kF16 ? 2 : 4;
  const size_t row_bytes = static_cast<size_t>(kv_dim) * elem;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int n_cells = a.n_seq_cells;
  // Per thread: scores [group][n_cells], one converted row [hd].
  const size_t need = static_cast<size_t>(group) * n_cells + hd;
  if (scratch.size() < static_cast<size_t>(pool.size())) scratch.resize(static_cast<size_t>(pool.size()));
  for (auto& v : scratch) {
    if (v.size() < need) v.resize(need);
  }

  pool.run(static_cast<int64_t>(a.n_tokens) * s.n_kv_heads, [&](int64_t task, int thread) {
    const int t = static_cast<int>(task / s.n_kv_heads);
    const int g = static_cast<int>(task % s.n_kv_heads);
    const int32_t qpos = a.q_pos[t];
    float* scores = scratch[static_cast<size_t>(thread)].data();
    float* row = scores + static_cast<size_t>(group) * n_cells;
    const float* q = a.q + static_cast<size_t>(t) * q_dim + static_cast<size_t>(g) * group * hd;
    float* out = a.out + static_cast<size_t>(t) * q_dim + static_cast<size_t>(g) * group * hd;

    auto load_row = [&](const uint8_t* cache, int32_t cell) -> const float* {
      const uint8_t* p = cache + static_cast<size_t>(cell) * row_bytes + static_cast<size_t>(g) * hd * elem;
      if (s.kv_type == DType::kF16) {
        ops.f16_to_f32(reinterpret_cast<const uint16_t*>(p), row, hd);
        return row;
      }
      return reinterpret_cast<const float*>(p);
    };

    // Pass 1: scores, masked by position.
    std::vector<float> max_score(static_cast<size_t>(group), -std::numeric_limits<float>::infinity());
    for (int j = 0; j < n_cells; ++j) {
      const int32_t cell = a.seq_cells[j];
      if (a.cell_pos[cell] > qpos) {
        for (int h = 0; h < group; ++h) scores[static_cast<size_t>(h) * n_cells + j] = -std::numeric_limits<float>::infinity();
        continue;
      }
      const float* k = load_row(a.k_cache, cell);
      for (int h = 0; h < group; ++h) {
        const float v = ops.dot(q + static_cast<size_t>(h) * hd, k, hd) * scale;
        scores[static_cast<size_t>(h) * n_cells + j] = v;
        max_score[static_cast<size_t>(h)] = std::max(max_score[static_cast<size_t>(h)], v);
      }
    }
    // Softmax weights (unnormalised) and their sums.
    std::vector<float> denom(static_cast<size_t>(group), 0.0f);
    for (int h = 0; h < group; ++h) {
      float* sc = scores + static_cast<size_t>(h) * n_cells;
      const float m = max_score[static_cast<size_t>(h)];
      float sum = 0.0f;
      for (int j = 0; j < n_cells; ++j) {
        sc[j] = std::isinf(sc[j]) ? 0.0f : std::exp(sc[j] - m);
        sum += sc[j];
      }
      denom[static_cast<size_t>(h)] = sum;
      std::memset(out + static_cast<size_t>(h) * hd, 0, sizeof(float) * hd);
    }
    // Pass 2: weighted sum of V rows.
    for (int j = 0; j < n_cells; ++j) {
      const int32_t cell = a.seq_cells[j];
      if (a.cell_pos[cell] > qpos) continue;
      const float* v = load_row(a.v_cache, cell);
      for (int h = 0; h < group; ++h) {
        ops.axpy(scores[static_cast<size_t>(h) * n_cells + j], v, out + static_cast<size_t>(h) * hd, hd);
      }
    }
    for (int h = 0; h < group; ++h) {
      const float d = denom[static_cast<size_t>(h)];
      const float inv = d > 0.0f ? 1.0f / d : 0.0f;
      float* o = out + static_cast<size_t>(h) * hd;
      for (int i = 0; i < hd; ++i) o[i] *= inv;
    }
  });
}

}  // namespace minfer::cpu

// Attention on the CPU: one task per (token, KV head). The task loads each
// cached K row once, converts it to f32, and scores it against every query
// head of the group (GQA), which cuts cache traffic by the group size.
// Scores are kept for the cells the query sees; then each head's softmax
// weights and its weighted sum of the V rows, with 32 of the sums in
// registers across the cells (until 2026-12-06 each cell's V row was added
// to every head's output row in memory: an axpy call a cell and head, 21% of
// a 2,048-token prefill of qwen2.5-0.5b on the 2-core machine).
//
// The inner loops (f16→f32 row, dot, weighted rows) have AVX2/F16C versions
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

// The V rows weighted for one query head: out[i] = Σ_k w[keep[k]] · row_k[i],
// row_k the cache row of cell cells[keep[k]] (base: the KV head's first
// element of cell 0; rows row_bytes apart), added in k order by one fused
// multiply-add each — axpy's arithmetic, element for element. The vector
// forms keep 32 of the row's sums in registers across the cells instead of
// loading and storing them at every cell.
struct WeightedRows {
  const float* w;
  const int32_t* keep;
  int n;
  const int32_t* cells;
  const uint8_t* base;
  size_t row_bytes;
  int hd;
};

struct RowOps {
  void (*f16_to_f32)(const uint16_t* src, float* dst, int n);
  // out[h] = dot(q + h * hd, k) for the group's n_heads query heads: one
  // call a K row, the dot inlined (one indirect call a cell and head was 15%
  // of the attention's time).
  void (*dots)(const float* q, int n_heads, int hd, const float* k, float* out);
  void (*wsum_f16)(const WeightedRows& r, float* out);
  void (*wsum_f32)(const WeightedRows& r, float* out);
};

void f16_to_f32_scalar(const uint16_t* src, float* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}
float dot_scalar(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
void dots_scalar(const float* q, int n_heads, int hd, const float* k, float* out) {
  for (int h = 0; h < n_heads; ++h) out[h] = dot_scalar(q + static_cast<size_t>(h) * hd, k, hd);
}
template <bool kF16>
float row_value(const uint8_t* row, int i) {
  if constexpr (kF16) return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  return reinterpret_cast<const float*>(row)[i];
}
const uint8_t* weighted_row(const WeightedRows& r, int k) {
  return r.base + static_cast<size_t>(r.cells[r.keep[k]]) * r.row_bytes;
}
// Dimensions [d0, hd) one at a time (the scalar form, and the vector forms' tails).
template <bool kF16>
void wsum_scalar_from(const WeightedRows& r, int d0, float* out) {
  for (int d = d0; d < r.hd; ++d) out[d] = 0.0f;
  for (int k = 0; k < r.n; ++k) {
    const float w = r.w[r.keep[k]];
    const uint8_t* row = weighted_row(r, k);
    for (int d = d0; d < r.hd; ++d) out[d] += w * row_value<kF16>(row, d);
  }
}
template <bool kF16>
void wsum_scalar(const WeightedRows& r, float* out) {
  wsum_scalar_from<kF16>(r, 0, out);
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
__attribute__((target("avx2,fma"))) void dots_avx2(const float* q, int n_heads, int hd, const float* k, float* out) {
  for (int h = 0; h < n_heads; ++h) out[h] = dot_avx2(q + static_cast<size_t>(h) * hd, k, hd);
}
template <bool kF16>
__attribute__((target("avx2,fma,f16c"))) __m256 load8_avx2(const uint8_t* row, int d) {
  if constexpr (kF16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d)));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
}
// Dimensions [d0, d0 + 8 kC) of the weighted rows with their kC sums in
// registers: a cell's kC FMAs do not wait on each other, only on the last
// cell's (four cycles), so the widest pass the row allows goes first.
template <bool kF16, int kC>
__attribute__((target("avx2,fma,f16c"))) void wsum_avx2_pass(const WeightedRows& r, int d0, float* out) {
  __m256 s[kC];
  for (auto& v : s) v = _mm256_setzero_ps();
  for (int k = 0; k < r.n; ++k) {
    const __m256 w = _mm256_set1_ps(r.w[r.keep[k]]);
    const uint8_t* row = weighted_row(r, k);
#pragma GCC unroll 8
    for (int c = 0; c < kC; ++c) s[c] = _mm256_fmadd_ps(w, load8_avx2<kF16>(row, d0 + 8 * c), s[c]);
  }
#pragma GCC unroll 8
  for (int c = 0; c < kC; ++c) _mm256_storeu_ps(out + d0 + 8 * c, s[c]);
}
template <bool kF16>
__attribute__((target("avx2,fma,f16c"))) void wsum_avx2(const WeightedRows& r, float* out) {
  int d0 = 0;
  for (; d0 + 64 <= r.hd; d0 += 64) wsum_avx2_pass<kF16, 8>(r, d0, out);
  for (; d0 + 32 <= r.hd; d0 += 32) wsum_avx2_pass<kF16, 4>(r, d0, out);
  for (; d0 + 8 <= r.hd; d0 += 8) wsum_avx2_pass<kF16, 1>(r, d0, out);
  if (d0 < r.hd) wsum_scalar_from<kF16>(r, d0, out);
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
void dots_neon(const float* q, int n_heads, int hd, const float* k, float* out) {
  for (int h = 0; h < n_heads; ++h) out[h] = dot_neon(q + static_cast<size_t>(h) * hd, k, hd);
}
template <bool kF16>
float32x4_t load4_neon(const uint8_t* row, int d) {
  if constexpr (kF16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + d)));
  return vld1q_f32(reinterpret_cast<const float*>(row) + d);
}
// The same with 4-wide sums (wsum_avx2_pass).
template <bool kF16, int kC>
void wsum_neon_pass(const WeightedRows& r, int d0, float* out) {
  float32x4_t s[kC];
  for (auto& v : s) v = vdupq_n_f32(0.0f);
  for (int k = 0; k < r.n; ++k) {
    const float w = r.w[r.keep[k]];
    const uint8_t* row = weighted_row(r, k);
#pragma GCC unroll 4
    for (int c = 0; c < kC; ++c) s[c] = vfmaq_n_f32(s[c], load4_neon<kF16>(row, d0 + 4 * c), w);
  }
#pragma GCC unroll 4
  for (int c = 0; c < kC; ++c) vst1q_f32(out + d0 + 4 * c, s[c]);
}
template <bool kF16>
void wsum_neon(const WeightedRows& r, float* out) {
  int d0 = 0;
  for (; d0 + 16 <= r.hd; d0 += 16) wsum_neon_pass<kF16, 4>(r, d0, out);
  for (; d0 + 4 <= r.hd; d0 += 4) wsum_neon_pass<kF16, 1>(r, d0, out);
  if (d0 < r.hd) wsum_scalar_from<kF16>(r, d0, out);
}
#endif

RowOps select_row_ops() {
#if defined(__x86_64__)
  // A non-scalar active ISA on x86 is avx2 or avx512, each detected only with
  // AVX2 + FMA + F16C (quant/isa.cpp), what these row ops need.
  if (quant::active_isa() != quant::Isa::kScalar) {
    return {f16_to_f32_avx2, dots_avx2, wsum_avx2<true>, wsum_avx2<false>};
  }
#elif defined(__aarch64__)
  if (quant::active_isa() != quant::Isa::kScalar) return {f16_to_f32_neon, dots_neon, wsum_neon<true>, wsum_neon<false>};
#endif
  return {f16_to_f32_scalar, dots_scalar, wsum_scalar<true>, wsum_scalar<false>};
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
  // Per thread: scores [group][n_cells], one converted row [hd], a row's dot
  // products [group].
  const size_t need = static_cast<size_t>(group) * n_cells + hd + group;
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

    // Pass 1: scores of the cells the query sees (keep, in sequence order).
    thread_local std::vector<int32_t> keep;
    keep.clear();
    std::vector<float> max_score(static_cast<size_t>(group), -std::numeric_limits<float>::infinity());
    for (int j = 0; j < n_cells; ++j) {
      const int32_t cell = a.seq_cells[j];
      if (a.cell_pos[cell] > qpos) continue;
      keep.push_back(j);
      float* dot = row + hd;
      ops.dots(q, group, hd, load_row(a.k_cache, cell), dot);
      for (int h = 0; h < group; ++h) {
        const float v = dot[h] * scale;
        scores[static_cast<size_t>(h) * n_cells + j] = v;
        max_score[static_cast<size_t>(h)] = std::max(max_score[static_cast<size_t>(h)], v);
      }
    }
    const int n_keep = static_cast<int>(keep.size());
    // Each head's softmax weights (unnormalised), their sum, and its V rows
    // weighted by them.
    const uint8_t* v_base = a.v_cache + static_cast<size_t>(g) * hd * elem;
    for (int h = 0; h < group; ++h) {
      float* sc = scores + static_cast<size_t>(h) * n_cells;
      const float m = max_score[static_cast<size_t>(h)];
      float sum = 0.0f;
      for (int k = 0; k < n_keep; ++k) {
        float& e = sc[keep[static_cast<size_t>(k)]];
        e = std::isinf(e) ? 0.0f : std::exp(e - m);
        sum += e;
      }
      float* o = out + static_cast<size_t>(h) * hd;
      const WeightedRows rows{sc, keep.data(), n_keep, a.seq_cells, v_base, row_bytes, hd};
      if (s.kv_type == DType::kF16) {
        ops.wsum_f16(rows, o);
      } else {
        ops.wsum_f32(rows, o);
      }
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      for (int i = 0; i < hd; ++i) o[i] *= inv;
    }
  });
}

}  // namespace minfer::cpu

// Attention on the CPU: one task per (token, KV head). The task loads each
// cached K row once, converting it to f32 as it goes, and scores it against
// every query head of the group (GQA), which cuts cache traffic by the group
// size.
// Scores are kept for the cells the query sees; then each head's softmax
// weights and its weighted sum of the V rows, with 32 of the sums in
// registers across the cells (until 2026-12-06 each cell's V row was added
// to every head's output row in memory: an axpy call a cell and head, 21% of
// a 2,048-token prefill of qwen2.5-0.5b on the 2-core machine).
//
// The inner loops (a K row's dots, weighted rows) have AVX2/F16C versions
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
  // out[h] = dot(q + h * hd, k) for the group's n_heads query heads, k a
  // cache row (f16 or f32): one call a K row, the row read once for up to
  // 8 heads and converted as it is read (one indirect call a cell and head
  // was 15% of the attention's time; until 2026-12-06 the row was converted
  // into a buffer first, and each head's sum was added across its lanes on
  // its own, 20% of a 2,048-token prefill together).
  void (*dots_f16)(const float* q, int n_heads, int hd, const uint8_t* k, float* out);
  void (*dots_f32)(const float* q, int n_heads, int hd, const uint8_t* k, float* out);
  void (*wsum_f16)(const WeightedRows& r, float* out);
  void (*wsum_f32)(const WeightedRows& r, float* out);
};

template <bool kF16>
float row_value(const uint8_t* row, int i) {
  if constexpr (kF16) return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  return reinterpret_cast<const float*>(row)[i];
}
// Dimensions [d0, hd) of the dots, one at a time, added to out (the scalar
// form, and the vector forms' tails).
template <bool kF16>
void dots_scalar_from(const float* q, int n_heads, int hd, const uint8_t* k, int d0, float* out) {
  for (int h = 0; h < n_heads; ++h) {
    float s = out[h];
    for (int d = d0; d < hd; ++d) s += q[static_cast<size_t>(h) * hd + d] * row_value<kF16>(k, d);
    out[h] = s;
  }
}
template <bool kF16>
void dots_scalar(const float* q, int n_heads, int hd, const uint8_t* k, float* out) {
  for (int h = 0; h < n_heads; ++h) out[h] = 0.0f;
  dots_scalar_from<kF16>(q, n_heads, hd, k, 0, out);
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
template <bool kF16>
__attribute__((target("avx2,fma,f16c"))) __m256 load8_avx2(const uint8_t* row, int d) {
  if constexpr (kF16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d)));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
}
// Up to 8 heads' dots with one K row: a head's sum in a register across the
// row, the row loaded (and converted) once for all of them, and the 8 sums
// added across their lanes together (two rounds of pairwise adds).
template <bool kF16>
__attribute__((target("avx2,fma,f16c"))) void dots_avx2(const float* q, int n_heads, int hd, const uint8_t* k, float* out) {
  const int d_end = hd / 8 * 8;
  for (int h0 = 0; h0 < n_heads; h0 += 8) {
    const int nh = std::min(8, n_heads - h0);
    const float* qh = q + static_cast<size_t>(h0) * hd;
    __m256 acc[8];
    for (auto& v : acc) v = _mm256_setzero_ps();
    for (int d = 0; d < d_end; d += 8) {
      const __m256 kv = load8_avx2<kF16>(k, d);
#pragma GCC unroll 8
      for (int h = 0; h < 8; ++h) {
        if (h < nh) acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(qh + static_cast<size_t>(h) * hd + d), kv, acc[h]);
      }
    }
    // hadd(a, b) = [a0+a1, a2+a3, b0+b1, b2+b3 | the same of lanes 4-7]: two
    // rounds leave heads 0-3 (u0) and 4-7 (u1) a lane each in both halves.
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));
    alignas(32) float sums[8];
    _mm256_store_ps(sums, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31)));
    for (int h = 0; h < nh; ++h) out[h0 + h] = sums[h];
    if (d_end < hd) dots_scalar_from<kF16>(qh, nh, hd, k, d_end, out + h0);
  }
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
template <bool kF16>
float32x4_t load4_neon(const uint8_t* row, int d) {
  if constexpr (kF16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + d)));
  return vld1q_f32(reinterpret_cast<const float*>(row) + d);
}
// The same as dots_avx2 with 4-wide sums (heads 0-3 and 4-7 added across
// their lanes by pairs).
template <bool kF16>
void dots_neon(const float* q, int n_heads, int hd, const uint8_t* k, float* out) {
  const int d_end = hd / 4 * 4;
  for (int h0 = 0; h0 < n_heads; h0 += 8) {
    const int nh = std::min(8, n_heads - h0);
    const float* qh = q + static_cast<size_t>(h0) * hd;
    float32x4_t acc[8];
    for (auto& v : acc) v = vdupq_n_f32(0.0f);
    for (int d = 0; d < d_end; d += 4) {
      const float32x4_t kv = load4_neon<kF16>(k, d);
#pragma GCC unroll 8
      for (int h = 0; h < 8; ++h) {
        if (h < nh) acc[h] = vfmaq_f32(acc[h], vld1q_f32(qh + static_cast<size_t>(h) * hd + d), kv);
      }
    }
    float sums[8];
    vst1q_f32(sums, vpaddq_f32(vpaddq_f32(acc[0], acc[1]), vpaddq_f32(acc[2], acc[3])));
    vst1q_f32(sums + 4, vpaddq_f32(vpaddq_f32(acc[4], acc[5]), vpaddq_f32(acc[6], acc[7])));
    for (int h = 0; h < nh; ++h) out[h0 + h] = sums[h];
    if (d_end < hd) dots_scalar_from<kF16>(qh, nh, hd, k, d_end, out + h0);
  }
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
    return {dots_avx2<true>, dots_avx2<false>, wsum_avx2<true>, wsum_avx2<false>};
  }
#elif defined(__aarch64__)
  if (quant::active_isa() != quant::Isa::kScalar) return {dots_neon<true>, dots_neon<false>, wsum_neon<true>, wsum_neon<false>};
#endif
  return {dots_scalar<true>, dots_scalar<false>, wsum_scalar<true>, wsum_scalar<false>};
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
  // Per thread: scores [group][n_cells], a row's dot products [group].
  const size_t need = static_cast<size_t>(group) * n_cells + group;
  if (scratch.size() < static_cast<size_t>(pool.size())) scratch.resize(static_cast<size_t>(pool.size()));
  for (auto& v : scratch) {
    if (v.size() < need) v.resize(need);
  }

  pool.run(static_cast<int64_t>(a.n_tokens) * s.n_kv_heads, [&](int64_t task, int thread) {
    const int t = static_cast<int>(task / s.n_kv_heads);
    const int g = static_cast<int>(task % s.n_kv_heads);
    const int32_t qpos = a.q_pos[t];
    float* scores = scratch[static_cast<size_t>(thread)].data();
    float* dot = scores + static_cast<size_t>(group) * n_cells;
    const float* q = a.q + static_cast<size_t>(t) * q_dim + static_cast<size_t>(g) * group * hd;
    float* out = a.out + static_cast<size_t>(t) * q_dim + static_cast<size_t>(g) * group * hd;

    const auto dots = s.kv_type == DType::kF16 ? ops.dots_f16 : ops.dots_f32;
    const uint8_t* k_base = a.k_cache + static_cast<size_t>(g) * hd * elem;

    // Pass 1: scores of the cells the query sees (keep, in sequence order).
    thread_local std::vector<int32_t> keep;
    keep.clear();
    std::vector<float> max_score(static_cast<size_t>(group), -std::numeric_limits<float>::infinity());
    for (int j = 0; j < n_cells; ++j) {
      const int32_t cell = a.seq_cells[j];
      if (a.cell_pos[cell] > qpos) continue;
      keep.push_back(j);
      dots(q, group, hd, k_base + static_cast<size_t>(cell) * row_bytes, dot);
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

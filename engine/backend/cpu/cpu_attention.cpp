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
// The inner loops (a K row's dots, the softmax weights, weighted rows) have
// AVX2/F16C versions chosen at run time on x86-64 and NEON versions on
// aarch64. The softmax's e^x is a polynomial of our own, the same bits in
// every form (until 2026-12-06 std::exp a weight, 8% of a 2,048-token
// prefill of qwen2.5-0.5b on the 2-core machine).
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
  // softmax_weights (cpu_kernels.h).
  float (*weights)(float* w, const int32_t* keep, int n, float m);
  void (*wsum_f16)(const WeightedRows& r, float* out);
  void (*wsum_f32)(const WeightedRows& r, float* out);
};

// e^x = 2^n · e^r with n = round(x · log2 e) and r = x − n · ln 2 (ln 2 in two
// parts, |r| ≤ ln 2 / 2), e^r = 1 + r + r² p(r) with Cephes expf's degree-5
// p; 2^n built in the exponent bits (n ≥ -126 above kExpLo). The vector
// forms take each lane through the same fused multiply-adds and rounding.
constexpr float kExpLo = -87.33654f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kExpP0 = 1.9875691500e-4f, kExpP1 = 1.3981999507e-3f, kExpP2 = 8.3334519073e-3f, kExpP3 = 4.1665795894e-2f,
                kExpP4 = 1.6666665459e-1f, kExpP5 = 5.0000001201e-1f;
float weights_scalar(float* w, const int32_t* keep, int n, float m) {
  float sum = 0.0f;
  for (int k = 0; k < n; ++k) {
    float& e = w[keep[k]];
    e = std::isinf(e) ? 0.0f : softmax_exp(e - m);  // ±inf scores weigh nothing
    sum += e;
  }
  return sum;
}
// The vector forms' chunks of `width` weights: straight from w where keep
// runs without gaps (a causal prefill's), else gathered and scattered; the
// last chunk filled with -inf (weight 0).
template <int width, class Chunk>
void weights_by_chunks(float* w, const int32_t* keep, int n, Chunk&& chunk) {
  if (n == 0) return;
  const bool runs = keep[n - 1] - keep[0] == n - 1;
  float buf[width];
  for (int k0 = 0; k0 < n; k0 += width) {
    const int c = std::min(width, n - k0);
    if (runs && c == width) {
      chunk(w + keep[k0]);
      continue;
    }
    for (int i = 0; i < width; ++i) buf[i] = i < c ? w[keep[k0 + i]] : -std::numeric_limits<float>::infinity();
    chunk(buf);
    for (int i = 0; i < c; ++i) w[keep[k0 + i]] = buf[i];
  }
}

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
// Eight weights at once, softmax_exp's steps in each lane.
__attribute__((target("avx2,fma"))) __m256 exp_avx2(__m256 x) {
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP5));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  // Lanes below kExpLo (and NaN) are zeroed, whatever their n made of the exponent.
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 ok = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_GE_OQ);
  return _mm256_and_ps(ok, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}
__attribute__((target("avx2,fma"))) float weights_avx2(float* w, const int32_t* keep, int n, float m) {
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 mv = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  weights_by_chunks<8>(w, keep, n, [&](float* p) __attribute__((target("avx2,fma"))) {
    const __m256 score = _mm256_loadu_ps(p);
    const __m256 finite = _mm256_cmp_ps(_mm256_and_ps(score, abs_mask), inf, _CMP_NEQ_UQ);
    const __m256 e = _mm256_and_ps(finite, exp_avx2(_mm256_sub_ps(score, mv)));
    sum = _mm256_add_ps(sum, e);
    _mm256_storeu_ps(p, e);
  });
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
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
// Four weights at once, as exp_avx2 and weights_avx2.
float32x4_t exp_neon(float32x4_t x) {
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, kLog2e));
  float32x4_t r = vfmaq_n_f32(x, n, -kLn2Hi);
  r = vfmaq_n_f32(r, n, -kLn2Lo);
  float32x4_t p = vdupq_n_f32(kExpP0);
  p = vfmaq_f32(vdupq_n_f32(kExpP1), p, r);
  p = vfmaq_f32(vdupq_n_f32(kExpP2), p, r);
  p = vfmaq_f32(vdupq_n_f32(kExpP3), p, r);
  p = vfmaq_f32(vdupq_n_f32(kExpP4), p, r);
  p = vfmaq_f32(vdupq_n_f32(kExpP5), p, r);
  const float32x4_t y = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.0f));
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const uint32x4_t ok = vcgeq_f32(x, vdupq_n_f32(kExpLo));
  return vreinterpretq_f32_u32(vandq_u32(ok, vreinterpretq_u32_f32(vmulq_f32(y, vreinterpretq_f32_s32(e)))));
}
float weights_neon(float* w, const int32_t* keep, int n, float m) {
  float32x4_t sum = vdupq_n_f32(0.0f);
  weights_by_chunks<4>(w, keep, n, [&](float* p) {
    const float32x4_t score = vld1q_f32(p);
    const uint32x4_t finite = vcltq_f32(vabsq_f32(score), vdupq_n_f32(std::numeric_limits<float>::infinity()));
    const float32x4_t e = vreinterpretq_f32_u32(vandq_u32(finite, vreinterpretq_u32_f32(exp_neon(vsubq_f32(score, vdupq_n_f32(m))))));
    sum = vaddq_f32(sum, e);
    vst1q_f32(p, e);
  });
  return vaddvq_f32(sum);
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
    return {dots_avx2<true>, dots_avx2<false>, weights_avx2, wsum_avx2<true>, wsum_avx2<false>};
  }
#elif defined(__aarch64__)
  if (quant::active_isa() != quant::Isa::kScalar) {
    return {dots_neon<true>, dots_neon<false>, weights_neon, wsum_neon<true>, wsum_neon<false>};
  }
#endif
  return {dots_scalar<true>, dots_scalar<false>, weights_scalar, wsum_scalar<true>, wsum_scalar<false>};
}

}  // namespace

float softmax_exp(float x) {
  if (!(x >= kExpLo)) return 0.0f;  // (NaN too)
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kExpP0;
  p = std::fma(p, r, kExpP1);
  p = std::fma(p, r, kExpP2);
  p = std::fma(p, r, kExpP3);
  p = std::fma(p, r, kExpP4);
  p = std::fma(p, r, kExpP5);
  const float y = std::fma(p, r * r, r) + 1.0f;
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return y * two_n;
}

float softmax_weights(float* w, const int32_t* keep, int n, float m) { return select_row_ops().weights(w, keep, n, m); }

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
      const float sum = ops.weights(sc, keep.data(), n_keep, max_score[static_cast<size_t>(h)]);
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

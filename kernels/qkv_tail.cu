// The q/k/v tail of an attention block: biases (qwen2), per-head RMS norms
// (qwen3), RoPE on q and k, and the K/V store into the cache — one launch
// (launch_qkv_tail) or the unfused chain (launch_qkv_tail_unfused). Both run
// the same device functions with the same thread mapping, so they agree to
// the bit (ARCHITECTURE.md rule 6). Positions and cells are read from device
// memory: a captured decode graph stays valid as the sequence grows.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/rope.cuh"

namespace minfer::kernels {
namespace {

// Thread t of a head's block holds elements t and t + head_dim/2.
constexpr int kMaxHeadDim = 256;

// The norm's arithmetic is explicitly rounded, as rope.cuh's rotation is.
// Threads t >= half hold zeros and leave with their values untouched.
__device__ __forceinline__ void head_norm_pair(float& a, float& b, const float* w, int t, int half, float eps,
                                               float* scratch) {
  const float total = block_sum(__fadd_rn(__fmul_rn(a, a), __fmul_rn(b, b)), scratch);
  if (t >= half) return;
  const float scale = rsqrtf(__fadd_rn(__fdiv_rn(total, static_cast<float>(2 * half)), eps));
  a = __fmul_rn(__fmul_rn(a, scale), w[t]);
  b = __fmul_rn(__fmul_rn(b, scale), w[t + half]);
}

int threads_for(int head_dim) { return (head_dim / 2 + kWarp - 1) / kWarp * kWarp; }

// Rotates the head held in `s` (shared, head_dim floats) by pair t's
// rotation `cs` (rope_cos_sin); thread t rotates pair t.
__device__ __forceinline__ void rope_pair(float* s, int t, float2 cs, const RopeArgs& r) {
  const int half_rot = r.n_rot / 2;
  if (t >= half_rot) return;
  const int i0 = r.neox ? t : 2 * t;
  const int i1 = r.neox ? t + half_rot : 2 * t + 1;
  const float a = s[i0], b = s[i1];
  s[i0] = rope_first(a, b, cs);
  s[i1] = rope_second(a, b, cs);
}

// Block (slot, token): slots [0, n_heads) are q heads, then n_kv_heads k
// heads, then n_kv_heads v heads. blockDim.x = threads_for(head_dim): whole
// warps (the reductions shuffle across full warps); threads t >= head_dim/2
// only take part in the reductions and barriers.
//
// Before the PDL wait, what does not come from the q/k/v product: the
// position and cell (uploaded by the host before the step), the pair's
// rotation (a double-precision sincos) and the biases (constants). After it
// only the product's values remain to be read. On the H200 (CUPTI timeline,
// 2026-12-01, against the run before) the tail's share of a layer went
// 1.99 → 0.83 µs on 7B Q8_0 and 1.85 → 0.97 on 0.5B Q8_0, the attention
// after it growing by part of that: tg128 0.5B Q8_0 1,844 → 1,892 tok/s,
// 7B Q4_K_M 486 → 494, 7B Q8_0 408 → 407.
__global__ void qkv_tail_kernel(QkvTailArgs a) {
  __shared__ float s[kMaxHeadDim];
  __shared__ float scratch[kMaxHeadDim / 2 / kWarp + 1];
  const int slot = blockIdx.x, tok = blockIdx.y, t = threadIdx.x;
  const int hd = a.rope.head_dim, half = hd / 2;
  const int kv_dim = a.n_kv_heads * hd;
  const int pos = a.positions[tok];
  const int cell = a.kv_cells[tok];
  const bool active = t < half;
  const bool rotated = slot < a.n_heads + a.n_kv_heads;
  const bool is_q = slot < a.n_heads;
  const int h = is_q ? slot : rotated ? slot - a.n_heads : slot - a.n_heads - a.n_kv_heads;
  const float* bias = is_q ? a.bq : rotated ? a.bk : a.bv;
  float b0 = 0.0f, b1 = 0.0f;
  if (bias != nullptr && active) {
    b0 = bias[h * hd + t];
    b1 = bias[h * hd + t + half];
  }
  const float2 cs = rotated ? rope_cos_sin(t, pos, a.rope) : make_float2(0.0f, 0.0f);
  pdl_begin();
  if (rotated) {
    float* x = is_q ? a.q + static_cast<size_t>(tok) * a.n_heads * hd + h * hd : a.k + static_cast<size_t>(tok) * kv_dim + h * hd;
    const float* norm = is_q ? a.q_norm : a.k_norm;
    float v0 = active ? x[t] : 0.0f, v1 = active ? x[t + half] : 0.0f;
    if (bias != nullptr && active) {
      v0 += b0;
      v1 += b1;
    }
    if (norm != nullptr) head_norm_pair(v0, v1, norm, t, half, a.eps, scratch);
    if (active) {
      s[t] = v0;
      s[t + half] = v1;
    }
    __syncthreads();
    if (active) rope_pair(s, t, cs, a.rope);
    __syncthreads();
    if (!active) return;
    x[t] = s[t];
    x[t + half] = s[t + half];
    if (!is_q) {
      const size_t base = static_cast<size_t>(cell) * kv_dim + h * hd;
      store_cache(a.k_cache, a.cache_f16, base + t, s[t]);
      store_cache(a.k_cache, a.cache_f16, base + t + half, s[t + half]);
      if (h == 0 && t == 0) a.cell_pos[cell] = pos;
    }
  } else {
    if (!active) return;
    const float* x = a.v + static_cast<size_t>(tok) * kv_dim + h * hd;
    float v0 = x[t], v1 = x[t + half];
    if (bias != nullptr) {
      v0 += b0;
      v1 += b1;
    }
    const size_t base = static_cast<size_t>(cell) * kv_dim + h * hd;
    store_cache(a.v_cache, a.cache_f16, base + t, v0);
    store_cache(a.v_cache, a.cache_f16, base + t + half, v1);
  }
}

// ---- the unfused chain (same device functions, same mapping) -------------

__global__ void head_norm_kernel(float* x, int n_heads, int hd, const float* w, float eps) {
  pdl_begin();
  __shared__ float scratch[kMaxHeadDim / 2 / kWarp + 1];
  const int h = blockIdx.x, tok = blockIdx.y, t = threadIdx.x, half = hd / 2;
  float* row = x + (static_cast<size_t>(tok) * n_heads + h) * hd;
  const bool active = t < half;
  float v0 = active ? row[t] : 0.0f, v1 = active ? row[t + half] : 0.0f;
  head_norm_pair(v0, v1, w, t, half, eps, scratch);
  if (!active) return;
  row[t] = v0;
  row[t + half] = v1;
}

__global__ void rope_kernel(float* x, int n_heads, RopeArgs r, const int32_t* positions) {
  pdl_begin();
  __shared__ float s[kMaxHeadDim];
  const int h = blockIdx.x, tok = blockIdx.y, t = threadIdx.x, half = r.head_dim / 2;
  float* row = x + (static_cast<size_t>(tok) * n_heads + h) * r.head_dim;
  // blockDim.x == half here: no reductions, so no whole-warp padding.
  s[t] = row[t];
  s[t + half] = row[t + half];
  __syncthreads();
  rope_pair(s, t, rope_cos_sin(t, positions[tok], r), r);
  __syncthreads();
  row[t] = s[t];
  row[t + half] = s[t + half];
}

__global__ void kv_store_kernel(QkvTailArgs a) {
  pdl_begin();
  const int h = blockIdx.x, tok = blockIdx.y, t = threadIdx.x;
  const int hd = a.rope.head_dim, half = hd / 2, kv_dim = a.n_kv_heads * hd;
  if (t >= half) return;
  const int cell = a.kv_cells[tok];
  const float* k = a.k + static_cast<size_t>(tok) * kv_dim + h * hd;
  const float* v = a.v + static_cast<size_t>(tok) * kv_dim + h * hd;
  const size_t base = static_cast<size_t>(cell) * kv_dim + h * hd;
  store_cache(a.k_cache, a.cache_f16, base + t, k[t]);
  store_cache(a.k_cache, a.cache_f16, base + t + half, k[t + half]);
  store_cache(a.v_cache, a.cache_f16, base + t, v[t]);
  store_cache(a.v_cache, a.cache_f16, base + t + half, v[t + half]);
  if (h == 0 && t == 0) a.cell_pos[cell] = a.positions[tok];
}

bool valid(const QkvTailArgs& a) {
  const int hd = a.rope.head_dim;
  return hd >= 2 && hd % 2 == 0 && hd <= kMaxHeadDim && a.rope.n_rot <= hd && a.rope.n_rot % 2 == 0 && a.n_tokens > 0;
}

}  // namespace

cudaError_t launch_qkv_tail(const QkvTailArgs& a, cudaStream_t stream) {
  if (!valid(a)) return cudaErrorInvalidValue;
  dim3 grid(a.n_heads + 2 * a.n_kv_heads, a.n_tokens);
  return launch_kernel(qkv_tail_kernel, grid, dim3(threads_for(a.rope.head_dim)), 0, stream, a);
}

cudaError_t launch_head_norm(float* x, int n_tokens, int n_heads, int head_dim, const float* w, float eps,
                             cudaStream_t stream) {
  if (head_dim < 2 || head_dim % 2 != 0 || head_dim > kMaxHeadDim || n_tokens <= 0) return cudaErrorInvalidValue;
  return launch_kernel(head_norm_kernel, dim3(n_heads, n_tokens), dim3(threads_for(head_dim)), 0, stream, x, n_heads, head_dim, w, eps);
}

cudaError_t launch_rope(float* x, int n_tokens, int n_heads, const RopeArgs& rope, const int32_t* positions,
                        cudaStream_t stream) {
  if (rope.head_dim < 2 || rope.head_dim % 2 != 0 || rope.head_dim > kMaxHeadDim || rope.n_rot > rope.head_dim ||
      n_tokens <= 0) {
    return cudaErrorInvalidValue;
  }
  return launch_kernel(rope_kernel, dim3(n_heads, n_tokens), dim3(rope.head_dim / 2), 0, stream, x, n_heads, rope, positions);
}

cudaError_t launch_kv_store(const QkvTailArgs& a, cudaStream_t stream) {
  if (!valid(a)) return cudaErrorInvalidValue;
  return launch_kernel(kv_store_kernel, dim3(a.n_kv_heads, a.n_tokens), dim3(a.rope.head_dim / 2), 0, stream, a);
}

}  // namespace minfer::kernels

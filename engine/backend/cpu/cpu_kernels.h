// The CPU backend's ops over [rows][width] f32 buffers, parallelised on the
// thread pool. Each mirrors a reference in reference/ and is tested against it.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/cpu/reference/reference.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/model/model_weights.h"
#include "engine/quant/dtype.h"

namespace minfer::cpu {

// y[t] = W · x[t] (+ bias) for t < n_rows.   x: [n_rows][w.n_in], y: [n_rows][w.n_out]
// `xq` is x already in quant::vec_dot_type(w.type) (rows xq_stride bytes apart),
// or null to use x itself (F32 activations).
void matmul(ThreadPool& pool, const Weight& w, const Weight* bias, const void* xq, size_t xq_stride,
            int n_rows, float* y, int64_t y_stride);

// Quantizes n_rows rows of x (width k, x_stride floats apart) to `type`,
// rows `dst_stride` bytes apart.
void quantize_rows(ThreadPool& pool, DType type, const float* x, int64_t x_stride, int n_rows, int64_t k,
                   uint8_t* dst, size_t dst_stride);

struct AttentionArgs {
  const float* q = nullptr;        // [n_tokens][n_heads * head_dim]
  const uint8_t* k_cache = nullptr;  // [n_ctx][n_kv_heads * head_dim] of kv_type
  const uint8_t* v_cache = nullptr;
  const int32_t* seq_cells = nullptr;
  int n_seq_cells = 0;
  const int32_t* cell_pos = nullptr;   // [n_ctx]
  const int32_t* q_pos = nullptr;      // [n_tokens]
  int n_tokens = 0;
  ref::AttentionShape shape;
  float* out = nullptr;            // [n_tokens][n_heads * head_dim]
};

// Attention for every token; one task per (token, KV head) so that each K/V
// row is loaded once for the whole query group. `scratch` is resized as needed.
void attention(ThreadPool& pool, const AttentionArgs& a, std::vector<std::vector<float>>& scratch);
// The attention's softmax weights, exposed for tests: e^x for x ≤ 0 within
// 2 ulp of std::exp (0 below -87.33, where e^x leaves the normal floats),
// and w[keep[k]] = softmax_exp(w[keep[k]] - m) for k < n (0 where w[keep[k]]
// is ±inf) with their sum, in the vector form the machine has: each weight
// the bits softmax_exp gives it.
float softmax_exp(float x);
float softmax_weights(float* w, const int32_t* keep, int n, float m);

// Precomputed RoPE rotation for a step: cos/sin per token and frequency.
struct RopeTable {
  int half = 0;
  std::vector<float> cos, sin;  // [n_tokens][half]
  void build(const ref::RopeParams& p, const int32_t* positions, int n_tokens);
};
void rope(ThreadPool& pool, float* x, int64_t stride, int n_rows, int n_heads, const ref::RopeParams& p,
          const RopeTable& table);

void rms_norm(ThreadPool& pool, const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride,
              int n_rows, int n, float eps);
void swiglu(ThreadPool& pool, float* g, const float* u, int64_t stride, int n_rows, int n);
void add(ThreadPool& pool, float* y, const float* x, int64_t stride, int n_rows, int n);

}  // namespace minfer::cpu

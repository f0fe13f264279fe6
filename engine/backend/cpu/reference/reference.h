// Plain scalar references for every op of the graph: loops and shape
// comments, no intrinsics, no threads. They are the spec: the CPU backend's
// fast paths and every CUDA kernel are tested against them.
#pragma once

#include <cstdint>

#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/quant/dtype.h"

namespace minfer::ref {

// y = x / sqrt(mean(x²) + eps) * w        x, w, y: [n]
void rms_norm_ref(const float* x, const float* w, float* y, int n, float eps);

// Per-head RMSNorm in place (qwen3 q/k norm)  x: [n_heads][head_dim], w: [head_dim]
void head_norm_ref(float* x, const float* w, int n_heads, int head_dim, float eps);

struct RopeParams {
  int head_dim = 0;
  int n_rot = 0;                 // rotated dims per head (≤ head_dim); the rest pass through
  RopeType type = RopeType::kNorm;
  float base = 10000.0f;
  float scale = 1.0f;            // position multiplier (linear scaling: 1 / factor)
  const float* freq_factors = nullptr;  // [n_rot / 2] divisors of the frequencies, or null
};
RopeParams rope_params(const ModelConfig& c, const ModelWeights& w);

// Rotates each head of x by position `pos`, in place      x: [n_heads][head_dim]
// theta_i = pos * scale * base^(-2i / n_rot) / freq_factors[i]; pairs are
// (2i, 2i+1) for kNorm and (i, i + n_rot/2) for kNeox.
void rope_ref(float* x, int n_heads, int pos, const RopeParams& p);

// y = silu(g) * u                          g, u, y: [n]
void swiglu_ref(const float* g, const float* u, float* y, int n);

// y[r] = Σ_k W[r][k] x[k] (+ b[r])          W: [n_out][n_in], x: [n_in], y: [n_out]
// W dequantized to f32, the sum in double: the exact product of the stored
// weights with the given activations.
void matmul_ref(const Weight& w, const Weight* bias, const float* x, float* y);

// One row of the embedding table, dequantized   y: [d_model]
void embed_ref(const Weight& table, int32_t token, float* y);

// Stores one f32 row into a cache row of `type` (F16 rounds to nearest even). [n]
void kv_store_ref(const float* src, void* dst_row, DType type, int n);

struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  DType kv_type = DType::kF16;
};

// One query row's attention over a sequence's cache cells:
//   out[h] = Σ_j softmax_j(q[h]·K[c_j][g] / sqrt(head_dim)) V[c_j][g],  g = h / (n_heads / n_kv_heads)
// over the cells c_j = seq_cells[j] whose position cell_pos[c_j] ≤ q_pos.
//   q, out: [n_heads][head_dim]; k_cache, v_cache: [n_cells][n_kv_heads * head_dim] of kv_type
void attention_ref(const float* q, const void* k_cache, const void* v_cache, const int32_t* seq_cells,
                   int n_seq_cells, const int32_t* cell_pos, int32_t q_pos, const AttentionShape& s, float* out);

// Index of the largest value (the first one on ties)   x: [n]
int32_t argmax_ref(const float* x, int n);

// Reads element i of a cache row stored as `type` (F16 or F32).
float kv_load(const void* row, DType type, int i);

}  // namespace minfer::ref

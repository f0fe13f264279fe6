// The scalar references. Written for clarity: double accumulators where a sum
// runs long, no reordering tricks.
#include "engine/backend/cpu/reference/reference.h"

#include <cmath>
#include <limits>
#include <vector>

#include "engine/common/half.h"
#include "engine/quant/quant.h"

namespace minfer::ref {

void rms_norm_ref(const float* x, const float* w, float* y, int n, float eps) {
  double sum_sq = 0.0;
  for (int i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum_sq / n + eps));
  for (int i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

void head_norm_ref(float* x, const float* w, int n_heads, int head_dim, float eps) {
  for (int h = 0; h < n_heads; ++h) {
    float* row = x + static_cast<size_t>(h) * head_dim;
    rms_norm_ref(row, w, row, head_dim, eps);
  }
}

RopeParams rope_params(const ModelConfig& c, const ModelWeights& w) {
  RopeParams p;
  p.head_dim = c.head_dim;
  p.n_rot = c.n_rot;
  p.type = c.rope_type;
  p.base = c.rope_base;
  p.scale = c.rope_scale;
  p.freq_factors = w.rope_freqs.present() ? w.rope_freqs.f32() : nullptr;
  return p;
}

void rope_ref(float* x, int n_heads, int pos, const RopeParams& p) {
  const int half = p.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<size_t>(h) * p.head_dim;
    for (int i = 0; i < half; ++i) {
      double theta = static_cast<double>(pos) * p.scale * std::pow(static_cast<double>(p.base), -2.0 * i / p.n_rot);
      if (p.freq_factors != nullptr) theta /= p.freq_factors[i];
      const double c = std::cos(theta);
      const double s = std::sin(theta);
      const int i0 = p.type == RopeType::kNorm ? 2 * i : i;
      const int i1 = p.type == RopeType::kNorm ? 2 * i + 1 : i + half;
      const double a = head[i0];
      const double b = head[i1];
      head[i0] = static_cast<float>(a * c - b * s);
      head[i1] = static_cast<float>(a * s + b * c);
    }
  }
}

void swiglu_ref(const float* g, const float* u, float* y, int n) {
  for (int i = 0; i < n; ++i) {
    const double gi = g[i];
    y[i] = static_cast<float>(gi / (1.0 + std::exp(-gi)) * u[i]);
  }
}

void matmul_ref(const Weight& w, const Weight* bias, const float* x, float* y) {
  std::vector<float> row(static_cast<size_t>(w.n_in));
  for (int64_t r = 0; r < w.n_out; ++r) {
    quant::dequantize_row(w.type, w.data + static_cast<size_t>(r) * w.row_bytes, row.data(), w.n_in);
    double sum = 0.0;
    for (int64_t k = 0; k < w.n_in; ++k) sum += static_cast<double>(row[static_cast<size_t>(k)]) * x[k];
    if (bias != nullptr) sum += bias->f32()[r];
    y[r] = static_cast<float>(sum);
  }
}

void embed_ref(const Weight& table, int32_t token, float* y) {
  quant::dequantize_row(table.type, table.data + static_cast<size_t>(token) * table.row_bytes, y, table.n_in);
}

void kv_store_ref(const float* src, void* dst_row, DType type, int n) {
  if (type == DType::kF16) {
    auto* d = static_cast<uint16_t*>(dst_row);
    for (int i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
  } else {
    auto* d = static_cast<float*>(dst_row);
    for (int i = 0; i < n; ++i) d[i] = src[i];
  }
}

float kv_load(const void* row, DType type, int i) {
  if (type == DType::kF16) return f16_to_f32(static_cast<const uint16_t*>(row)[i]);
  return static_cast<const float*>(row)[i];
}

void attention_ref(const float* q, const void* k_cache, const void* v_cache, const int32_t* seq_cells,
                   int n_seq_cells, const int32_t* cell_pos, int32_t q_pos, const AttentionShape& s, float* out) {
  const int kv_dim = s.n_kv_heads * s.head_dim;
  const size_t elem = s.kv_type == DType::kF16 ? 2 : 4;
  const size_t row_bytes = static_cast<size_t>(kv_dim) * elem;
  const int group = s.n_heads / s.n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  std::vector<double> scores(static_cast<size_t>(n_seq_cells));
  for (int h = 0; h < s.n_heads; ++h) {
    const int g = h / group;
    const float* qh = q + static_cast<size_t>(h) * s.head_dim;
    double max_score = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < n_seq_cells; ++j) {
      const int32_t cell = seq_cells[j];
      if (cell_pos[cell] > q_pos) {
        scores[static_cast<size_t>(j)] = -std::numeric_limits<double>::infinity();
        continue;
      }
      const void* krow = static_cast<const uint8_t*>(k_cache) + static_cast<size_t>(cell) * row_bytes;
      double dot = 0.0;
      for (int d = 0; d < s.head_dim; ++d) dot += static_cast<double>(qh[d]) * kv_load(krow, s.kv_type, g * s.head_dim + d);
      scores[static_cast<size_t>(j)] = dot * scale;
      if (scores[static_cast<size_t>(j)] > max_score) max_score = scores[static_cast<size_t>(j)];
    }
    double denom = 0.0;
    for (int j = 0; j < n_seq_cells; ++j) {
      double& sc = scores[static_cast<size_t>(j)];
      sc = std::isinf(sc) ? 0.0 : std::exp(sc - max_score);
      denom += sc;
    }
    float* oh = out + static_cast<size_t>(h) * s.head_dim;
    for (int d = 0; d < s.head_dim; ++d) {
      double acc = 0.0;
      for (int j = 0; j < n_seq_cells; ++j) {
        const double p = scores[static_cast<size_t>(j)];
        if (p == 0.0) continue;
        const void* vrow = static_cast<const uint8_t*>(v_cache) + static_cast<size_t>(seq_cells[j]) * row_bytes;
        acc += p * kv_load(vrow, s.kv_type, g * s.head_dim + d);
      }
      oh[d] = denom > 0.0 ? static_cast<float>(acc / denom) : 0.0f;
    }
  }
}

int32_t argmax_ref(const float* x, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace minfer::ref

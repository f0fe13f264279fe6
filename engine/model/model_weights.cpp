// ModelWeights::from_gguf: tensor names follow llama.cpp (src/llama-arch.cpp,
// LLM_TENSOR_NAMES); shapes are checked against the configuration so that no
// kernel ever sees a weight of the wrong size.
#include "engine/model/model_weights.h"

#include <fmt/format.h>

#include "engine/gguf/gguf.h"
#include "engine/quant/quant.h"

namespace minfer {
namespace {

class Loader {
 public:
  Loader(const gguf::File& f, std::vector<std::vector<float>>& owned) : f_(f), owned_(owned) {}

  // A matrix of n_out rows by n_in columns.
  Expected<Weight> matrix(const std::string& name, int64_t n_in, int64_t n_out) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (t == nullptr) return missing(name);
    if (t->n_dims != 2 || t->ne[0] != static_cast<uint64_t>(n_in) || t->ne[1] != static_cast<uint64_t>(n_out)) {
      return unexpected(ErrorCode::kInvalidFile,
                        fmt::format("{}: tensor '{}' has shape {}, expected [{}, {}]", f_.path(), name,
                                    t->shape_string(), n_in, n_out));
    }
    if (!quant::is_weight_type(t->type)) {
      return unexpected(ErrorCode::kUnsupported,
                        fmt::format("{}: tensor '{}' has type {}, which minfer cannot use as a weight; "
                                    "supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K",
                                    f_.path(), name, dtype_name(t->type)));
    }
    Weight w;
    w.name = name;
    w.type = t->type;
    w.n_in = n_in;
    w.n_out = n_out;
    w.data = t->data;
    w.row_bytes = row_size(t->type, static_cast<uint64_t>(n_in));
    return w;
  }

  // A vector of n elements, converted to F32 when stored otherwise.
  Expected<Weight> vector(const std::string& name, int64_t n) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (t == nullptr) return missing(name);
    if (t->n_elements() != static_cast<uint64_t>(n) || t->ne[0] != static_cast<uint64_t>(n)) {
      return unexpected(ErrorCode::kInvalidFile,
                        fmt::format("{}: tensor '{}' has shape {}, expected [{}]", f_.path(), name,
                                    t->shape_string(), n));
    }
    Weight w;
    w.name = name;
    w.type = DType::kF32;
    w.n_in = n;
    w.n_out = 1;
    w.row_bytes = static_cast<uint64_t>(n) * sizeof(float);
    if (t->type == DType::kF32) {
      w.data = t->data;
    } else if (t->type == DType::kF16 || t->type == DType::kBF16) {
      std::vector<float>& dst = owned_.emplace_back(static_cast<size_t>(n));
      quant::dequantize_row(t->type, t->data, dst.data(), n);
      w.data = reinterpret_cast<const uint8_t*>(dst.data());
    } else {
      return unexpected(ErrorCode::kUnsupported,
                        fmt::format("{}: tensor '{}' has type {}; norms and biases must be f32, f16 or bf16",
                                    f_.path(), name, dtype_name(t->type)));
    }
    return w;
  }

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

 private:
  Unexpected missing(const std::string& name) const {
    return unexpected(ErrorCode::kInvalidFile, fmt::format("{}: tensor '{}' is missing", f_.path(), name));
  }

  const gguf::File& f_;
  std::vector<std::vector<float>>& owned_;
};

}  // namespace

std::vector<const Weight*> ModelWeights::matrices() const {
  std::vector<const Weight*> out{&token_embd};
  for (const LayerWeights& l : layers) {
    for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) out.push_back(w);
  }
  if (output.data != token_embd.data) out.push_back(&output);
  return out;
}

uint64_t ModelWeights::total_bytes() const {
  uint64_t total = 0;
  for (const Weight* w : matrices()) total += w->size_bytes();
  return total;
}

Expected<std::unique_ptr<ModelWeights>> ModelWeights::from_gguf(const gguf::File& f, const ModelConfig& c) {
  auto mw = std::unique_ptr<ModelWeights>(new ModelWeights());
  Loader ld(f, mw->owned_);
  MINFER_ASSIGN_OR_RETURN(mw->token_embd, ld.matrix("token_embd.weight", c.d_model, c.vocab_size));
  MINFER_ASSIGN_OR_RETURN(mw->output_norm, ld.vector("output_norm.weight", c.d_model));
  if (c.tied_output) {
    mw->output = mw->token_embd;
  } else {
    MINFER_ASSIGN_OR_RETURN(mw->output, ld.matrix("output.weight", c.d_model, c.vocab_size));
  }
  if (c.has_rope_freqs) {
    MINFER_ASSIGN_OR_RETURN(mw->rope_freqs, ld.vector("rope_freqs.weight", c.n_rot / 2));
  }
  mw->layers.resize(static_cast<size_t>(c.n_layers));
  for (int i = 0; i < c.n_layers; ++i) {
    LayerWeights& l = mw->layers[static_cast<size_t>(i)];
    const std::string p = fmt::format("blk.{}.", i);
    MINFER_ASSIGN_OR_RETURN(l.attn_norm, ld.vector(p + "attn_norm.weight", c.d_model));
    MINFER_ASSIGN_OR_RETURN(l.wq, ld.matrix(p + "attn_q.weight", c.d_model, c.q_dim()));
    MINFER_ASSIGN_OR_RETURN(l.wk, ld.matrix(p + "attn_k.weight", c.d_model, c.kv_dim()));
    MINFER_ASSIGN_OR_RETURN(l.wv, ld.matrix(p + "attn_v.weight", c.d_model, c.kv_dim()));
    if (c.qkv_bias) {
      MINFER_ASSIGN_OR_RETURN(l.bq, ld.vector(p + "attn_q.bias", c.q_dim()));
      MINFER_ASSIGN_OR_RETURN(l.bk, ld.vector(p + "attn_k.bias", c.kv_dim()));
      MINFER_ASSIGN_OR_RETURN(l.bv, ld.vector(p + "attn_v.bias", c.kv_dim()));
    }
    if (c.qk_norm) {
      MINFER_ASSIGN_OR_RETURN(l.q_norm, ld.vector(p + "attn_q_norm.weight", c.head_dim));
      MINFER_ASSIGN_OR_RETURN(l.k_norm, ld.vector(p + "attn_k_norm.weight", c.head_dim));
    }
    MINFER_ASSIGN_OR_RETURN(l.wo, ld.matrix(p + "attn_output.weight", c.q_dim(), c.d_model));
    MINFER_ASSIGN_OR_RETURN(l.ffn_norm, ld.vector(p + "ffn_norm.weight", c.d_model));
    MINFER_ASSIGN_OR_RETURN(l.w_gate, ld.matrix(p + "ffn_gate.weight", c.d_model, c.d_ff));
    MINFER_ASSIGN_OR_RETURN(l.w_up, ld.matrix(p + "ffn_up.weight", c.d_model, c.d_ff));
    MINFER_ASSIGN_OR_RETURN(l.w_down, ld.matrix(p + "ffn_down.weight", c.d_ff, c.d_model));
  }
  return mw;
}

}  // namespace minfer

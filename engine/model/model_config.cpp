// ModelConfig::from_gguf: the key names and defaults follow llama.cpp
// (src/llama-arch.cpp LLM_KV_* and src/llama-model.cpp load_hparams).
#include "engine/model/model_config.h"

#include <fmt/format.h>

#include "engine/gguf/gguf.h"

namespace minfer {

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::kLlama: return "llama";
    case Arch::kQwen2: return "qwen2";
    case Arch::kQwen3: return "qwen3";
  }
  return "?";
}

const char* rope_type_name(RopeType type) { return type == RopeType::kNorm ? "norm" : "neox"; }

namespace {

Expected<int> read_int(const gguf::File& f, const std::string& key, int lo, int hi) {
  MINFER_ASSIGN_OR_RETURN(uint64_t v, f.get_u64(key));
  if (v < static_cast<uint64_t>(lo) || v > static_cast<uint64_t>(hi)) {
    return unexpected(ErrorCode::kInvalidFile,
                      fmt::format("{}: key '{}' = {} is outside [{}, {}]", f.path(), key, v, lo, hi));
  }
  return static_cast<int>(v);
}

Expected<int> read_int_or(const gguf::File& f, const std::string& key, int fallback, int lo, int hi) {
  if (!f.has(key)) return fallback;
  return read_int(f, key, lo, hi);
}

}  // namespace

Expected<ModelConfig> ModelConfig::from_gguf(const gguf::File& f) {
  ModelConfig c;
  MINFER_ASSIGN_OR_RETURN(c.arch_name, f.get_string("general.architecture"));
  if (c.arch_name == "llama") {
    c.arch = Arch::kLlama;
    c.rope_type = RopeType::kNorm;
  } else if (c.arch_name == "qwen2") {
    c.arch = Arch::kQwen2;
    c.rope_type = RopeType::kNeox;
  } else if (c.arch_name == "qwen3") {
    c.arch = Arch::kQwen3;
    c.rope_type = RopeType::kNeox;
  } else {
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("{}: architecture '{}' is not supported; supported: llama, qwen2, qwen3",
                                  f.path(), c.arch_name));
  }
  MINFER_ASSIGN_OR_RETURN(c.name, f.get_string_or("general.name", ""));
  const std::string a = c.arch_name + ".";
  constexpr int kBig = 1 << 24;
  MINFER_ASSIGN_OR_RETURN(c.n_layers, read_int(f, a + "block_count", 1, 4096));
  MINFER_ASSIGN_OR_RETURN(c.d_model, read_int(f, a + "embedding_length", 1, kBig));
  MINFER_ASSIGN_OR_RETURN(c.n_heads, read_int(f, a + "attention.head_count", 1, 4096));
  MINFER_ASSIGN_OR_RETURN(c.n_kv_heads, read_int_or(f, a + "attention.head_count_kv", c.n_heads, 1, 4096));
  MINFER_ASSIGN_OR_RETURN(c.d_ff, read_int(f, a + "feed_forward_length", 1, kBig));
  MINFER_ASSIGN_OR_RETURN(c.n_ctx_train, read_int(f, a + "context_length", 1, kBig));
  if (c.d_model % c.n_heads != 0 && !f.has(a + "attention.key_length")) {
    return unexpected(ErrorCode::kInvalidFile,
                      fmt::format("{}: embedding_length {} is not a multiple of head_count {} and "
                                  "attention.key_length is absent",
                                  f.path(), c.d_model, c.n_heads));
  }
  MINFER_ASSIGN_OR_RETURN(c.head_dim, read_int_or(f, a + "attention.key_length", c.d_model / c.n_heads, 1, 1024));
  MINFER_ASSIGN_OR_RETURN(int v_dim, read_int_or(f, a + "attention.value_length", c.head_dim, 1, 1024));
  if (v_dim != c.head_dim) {
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("{}: attention.value_length {} differs from key_length {}; minfer "
                                  "supports equal key and value head sizes",
                                  f.path(), v_dim, c.head_dim));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return unexpected(ErrorCode::kInvalidFile,
                      fmt::format("{}: head_count {} is not a multiple of head_count_kv {}", f.path(),
                                  c.n_heads, c.n_kv_heads));
  }
  if (c.head_dim % 2 != 0) {
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("{}: head dimension {} is odd; RoPE needs pairs", f.path(), c.head_dim));
  }
  MINFER_ASSIGN_OR_RETURN(c.n_rot, read_int_or(f, a + "rope.dimension_count", c.head_dim, 2, c.head_dim));
  if (c.n_rot % 2 != 0) {
    return unexpected(ErrorCode::kInvalidFile,
                      fmt::format("{}: rope.dimension_count {} is odd", f.path(), c.n_rot));
  }
  MINFER_ASSIGN_OR_RETURN(c.rope_base, f.get_f32_or(a + "rope.freq_base", 10000.0f));
  if (!(c.rope_base > 0.0f)) {
    return unexpected(ErrorCode::kInvalidFile,
                      fmt::format("{}: rope.freq_base {} must be positive", f.path(), c.rope_base));
  }
  MINFER_ASSIGN_OR_RETURN(std::string scaling, f.get_string_or(a + "rope.scaling.type", "none"));
  if (scaling == "linear") {
    MINFER_ASSIGN_OR_RETURN(float factor, f.get_f32_or(a + "rope.scaling.factor", 1.0f));
    if (!(factor > 0.0f)) {
      return unexpected(ErrorCode::kInvalidFile,
                        fmt::format("{}: rope.scaling.factor {} must be positive", f.path(), factor));
    }
    c.rope_scaling = RopeScaling::kLinear;
    c.rope_scale = 1.0f / factor;
  } else if (scaling != "none") {
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("{}: rope.scaling.type '{}' is not supported; supported: none, linear "
                                  "(llama3-style scaling comes as a rope_freqs.weight tensor)",
                                  f.path(), scaling));
  }
  MINFER_ASSIGN_OR_RETURN(c.rms_eps, f.get_f32_or(a + "attention.layer_norm_rms_epsilon", 1e-5f));

  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr) {
    return unexpected(ErrorCode::kInvalidFile, fmt::format("{}: tensor 'token_embd.weight' is missing", f.path()));
  }
  if (embd->n_dims != 2 || embd->ne[0] != static_cast<uint64_t>(c.d_model) || embd->ne[1] > (1u << 24)) {
    return unexpected(ErrorCode::kInvalidFile,
                      fmt::format("{}: tensor 'token_embd.weight' has shape {}, expected [{}, n_vocab]", f.path(),
                                  embd->shape_string(), c.d_model));
  }
  c.vocab_size = static_cast<int>(embd->ne[1]);
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  c.has_rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
  return c;
}

}  // namespace minfer

// Model hyper-parameters read from GGUF metadata, for the architectures
// minfer runs: `llama`, `qwen2` and `qwen3` (decoder-only, RMSNorm, RoPE,
// grouped-query attention, SwiGLU).
#pragma once

#include <string>

#include "engine/common/expected.h"

namespace minfer::gguf {
class File;
}

namespace minfer {

enum class Arch { kLlama, kQwen2, kQwen3 };

// How RoPE pairs the dimensions of a head (llama.cpp's rope types):
// kNorm rotates adjacent pairs (2i, 2i+1) (arch llama); kNeox rotates
// (i, i + n_rot/2) (qwen2, qwen3).
enum class RopeType { kNorm, kNeox };

enum class RopeScaling { kNone, kLinear };

struct ModelConfig {
  Arch arch = Arch::kLlama;
  std::string arch_name;   // general.architecture
  std::string name;        // general.name (may be empty)
  int n_layers = 0;
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;        // attention.key_length, default d_model / n_heads
  int d_ff = 0;
  int vocab_size = 0;      // rows of token_embd
  int n_ctx_train = 0;
  int n_rot = 0;           // rope.dimension_count, default head_dim
  RopeType rope_type = RopeType::kNorm;
  float rope_base = 10000.0f;
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_scale = 1.0f;  // positions are multiplied by this (1 / factor for linear)
  bool has_rope_freqs = false;  // rope_freqs.weight: per-dimension frequency divisors (llama3 scaling)
  float rms_eps = 1e-5f;
  bool tied_output = false;  // no output.weight: the head reuses token_embd
  bool qkv_bias = false;     // q/k/v projections carry biases (qwen2)
  bool qk_norm = false;      // per-head RMSNorm of q and k before RoPE (qwen3)

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int gqa_group() const { return n_heads / n_kv_heads; }

  // Reads and validates the hyper-parameters; errors name the missing key or
  // the inconsistent values.
  static Expected<ModelConfig> from_gguf(const gguf::File& file);
};

const char* arch_name(Arch arch);
const char* rope_type_name(RopeType type);

}  // namespace minfer

// Synthetic models: GGUF files with random weights (seeded, std 0.02, norms
// 1.0) and the real shapes and metadata of known architectures, for tests and
// benchmarks. Never used to serve.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"

namespace minfer::synth {

// Real hyper-parameters of a published model (from its config.json).
struct Preset {
  std::string name;          // "qwen2.5-0.5b"
  std::string arch;          // GGUF general.architecture: llama | qwen2 | qwen3
  int n_layers = 0;
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int d_ff = 0;
  int vocab_size = 0;
  int n_ctx = 0;             // context_length
  float rope_base = 10000.0f;
  float rms_eps = 1e-6f;
  bool tied_output = false;  // no output.weight: the head reuses token_embd
  bool qkv_bias = false;     // qwen2
  bool qk_norm = false;      // qwen3
};

std::optional<Preset> find_preset(std::string_view name);
std::vector<std::string> preset_names();

struct Options {
  Preset preset;
  int layers = -1;          // override n_layers when > 0
  int vocab = -1;           // override vocab_size when > 0 (synthetic vocab only)
  std::string type = "f16"; // a DType name, or a recipe: "q4_k_m"
  uint64_t seed = 1;
  // A Hugging Face tokenizer.json to carry as the GGUF `gpt2` tokenizer
  // (tokenizer_config.json beside it supplies the chat template and flags).
  // Empty: a synthetic SentencePiece vocab of vocab_size pieces.
  std::string tokenizer_json;
  std::string output_path;
};

// Writes the model; returns the number of bytes written.
Expected<uint64_t> write_model(const Options& options);

}  // namespace minfer::synth

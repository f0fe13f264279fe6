// Synthetic models: GGUF files with random weights (seeded, std 0.02, norms
// 1.0) and the real shapes and metadata of known architectures, for tests and
// benchmarks. Never used to serve.
//
// Files: presets.cpp (the published hyper-parameters), layout.cpp (tensor
// names and shapes per architecture), recipe.cpp (tensor types: one type, or
// llama.cpp's Q4_K_M mix), metadata.cpp (the converter's GGUF keys),
// spm_vocab.cpp (the synthetic SentencePiece vocabulary), normal_rng.cpp and
// tensor_fill.cpp (deterministic weights), synth.cpp (write_model).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"
#include "engine/quant/dtype.h"

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
  // config.json names head_dim, so llama.cpp's converter writes
  // <arch>.attention.key_length / value_length (Qwen3, Llama 3.2).
  bool head_dim_in_config = false;
  // rope_scaling {rope_type: "llama3"} (Llama 3.x): the converter stores the
  // per-frequency factors as the tensor rope_freqs.weight. factor 0: none.
  float llama3_rope_factor = 0.0f;
  float llama3_low_freq_factor = 1.0f;
  float llama3_high_freq_factor = 4.0f;
  int llama3_original_ctx = 8192;
};

std::optional<Preset> find_preset(std::string_view name);
std::vector<std::string> preset_names();

struct Options {
  Preset preset;
  int layers = -1;          // override n_layers when > 0
  int vocab = -1;           // override vocab_size when > 0
  std::string type = "f16"; // a DType name, or a recipe: "q4_k_m"
  uint64_t seed = 1;
  // A Hugging Face tokenizer.json to carry as the GGUF `gpt2` tokenizer
  // (tokenizer_config.json beside it supplies the chat template and flags).
  // Empty: a synthetic SentencePiece vocab of vocab_size pieces.
  std::string tokenizer_json;
  std::string output_path;
  int threads = 0;          // weight generation threads; 0: one per core
};

enum class TensorRole {
  kWeight,     // 2-D matrix: random, std 0.02, takes the chosen type
  kBias,       // random, std 0.02, F32
  kNorm,       // all 1.0, F32
  kRopeFreqs,  // Llama 3 RoPE factors, computed, F32
};

// One tensor of the model, in file order.
struct PlannedTensor {
  std::string name;
  std::vector<uint64_t> ne;  // GGUF order: ne[0] is the input (contiguous) dim
  TensorRole role = TensorRole::kWeight;
  DType type = DType::kF32;
  int layer = -1;            // block index, -1 outside the blocks
};

struct ModelPlan {
  Preset preset;             // with the layers/vocab overrides applied
  std::vector<PlannedTensor> tensors;
  uint32_t file_type = 0;    // general.file_type (llama.cpp's LLAMA_FTYPE)
};

// What write_model writes, without writing it: shapes, types, file type.
// `vocab_rows` (> 0) replaces the vocabulary size (write_model passes the
// imported tokenizer's size).
Expected<ModelPlan> plan_model(const Options& options, int vocab_rows = -1);

// Writes the model; returns the number of bytes written.
Expected<uint64_t> write_model(const Options& options);

}  // namespace minfer::synth

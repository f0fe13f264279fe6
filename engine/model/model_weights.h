// The model's tensors, located in the GGUF mapping and checked against the
// configuration once at load. Immutable afterwards: backends read (CPU) or
// upload (CUDA) from here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/expected.h"
#include "engine/model/model_config.h"
#include "engine/quant/dtype.h"

namespace minfer::gguf {
class File;
}

namespace minfer {

// A weight matrix [n_out rows][n_in columns] (GGUF shape [n_in, n_out]), or a
// vector (n_out == 1). 1-D weights (norms, biases) are always F32 here.
struct Weight {
  std::string name;
  DType type = DType::kF32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  const uint8_t* data = nullptr;  // into the file mapping, or into owned storage
  uint64_t row_bytes = 0;

  bool present() const { return data != nullptr; }
  uint64_t size_bytes() const { return row_bytes * static_cast<uint64_t>(n_out); }
  const float* f32() const { return reinterpret_cast<const float*>(data); }
};

struct LayerWeights {
  Weight attn_norm;                 // [d_model]
  Weight wq, wk, wv;                // [q_dim | kv_dim rows][d_model]
  Weight bq, bk, bv;                // qwen2 biases [q_dim | kv_dim]
  Weight q_norm, k_norm;            // qwen3 per-head norms [head_dim]
  Weight wo;                        // [d_model][q_dim]
  Weight ffn_norm;                  // [d_model]
  Weight w_gate, w_up;              // [d_ff][d_model]
  Weight w_down;                    // [d_model][d_ff]
};

struct ModelWeights {
  Weight token_embd;                // [vocab][d_model]
  Weight output_norm;               // [d_model]
  Weight output;                    // [vocab][d_model]; token_embd when tied
  Weight rope_freqs;                // optional [n_rot / 2]
  std::vector<LayerWeights> layers;

  // Every 2-D weight, in file order of use (for the weight gate and uploads).
  std::vector<const Weight*> matrices() const;
  uint64_t total_bytes() const;

  // Finds and checks every tensor (names as llama.cpp writes them). Errors
  // name the tensor, its shape or type, and what was expected.
  static Expected<std::unique_ptr<ModelWeights>> from_gguf(const gguf::File& file, const ModelConfig& config);

 private:
  std::vector<std::vector<float>> owned_;  // 1-D tensors converted to F32
};

}  // namespace minfer

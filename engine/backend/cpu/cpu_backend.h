// The CPU backend: runs the whole graph on the host with a thread pool and
// the SIMD kernels of engine/quant. It is the reference the CUDA backend is
// checked against and the backend the engine falls back to when the CUDA
// weight gate fails.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_kernels.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/sampling/top_k_draw.h"

namespace minfer {

class CpuBackend final : public Backend {
 public:
  CpuBackend() = default;
  std::string_view name() const override { return "cpu"; }
  std::string description() const override;
  bool supports(Op op) const override;
  bool supports_weight_type(DType type) const override;
  Status prepare(const ModelConfig& config, const ModelWeights& weights, const BackendOptions& options) override;
  Status run(const Graph& graph, const StepInput& input, StepOutput* output) override;
  Status fetch_logits(StepOutput* output) override;

  int n_threads() const { return pool_ ? pool_->size() : 0; }

 private:
  struct Activation {
    std::vector<float> data;
    int width = 0;
    int rows = 0;          // rows currently held (set by the node that wrote it)
    uint64_t version = 0;  // bumped on every write; keys the quantized copy
  };

  Status check_input(const StepInput& in) const;
  Status run_node(const Node& n, const StepInput& in);
  Activation& buf(Buf b) { return bufs_[static_cast<size_t>(b)]; }
  void resize(Buf b, int rows);
  // src's rows as the weight's dot format (quantized once per buffer version).
  const void* activation_for(const Weight& w, const Activation& src, int first_row, int n_rows, size_t* stride);
  uint8_t* k_cache(int layer) { return k_cache_[static_cast<size_t>(layer)].data(); }
  uint8_t* v_cache(int layer) { return v_cache_[static_cast<size_t>(layer)].data(); }

  ModelConfig config_;
  const ModelWeights* weights_ = nullptr;
  BackendOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  std::array<Activation, static_cast<size_t>(Buf::kCount)> bufs_;
  std::vector<std::vector<uint8_t>> k_cache_, v_cache_;  // [layer][cell][kv_dim] of kv_type
  std::vector<int32_t> cell_pos_;                         // position stored in each cell
  ref::RopeParams rope_;
  cpu::RopeTable rope_table_;
  std::vector<std::vector<float>> attn_scratch_;
  // Quantized copy of one activation buffer: which one, which version, which type.
  std::vector<uint8_t> xq_;
  Buf xq_buf_ = Buf::kNone;
  uint64_t xq_version_ = 0;
  DType xq_type_ = DType::kF32;
  int xq_first_row_ = 0;
  int xq_rows_ = 0;
  std::vector<int32_t> argmax_;  // kArgmax's ids, kSample's one
  bool logits_held_ = false;     // the last step ran to its end with logits (fetch_logits)
  std::vector<float> draw_logits_;  // kSample: the row, biased
  std::optional<kernels::LogprobsOut> logprobs_;  // kLogprobs's
  std::vector<kernels::LogprobsOut> row_logprobs_;  // kLogprobs over every row's (Logits::kScore)
  Candidates draw_candidates_;
  std::vector<float> draw_terms_;
};

}  // namespace minfer

// The CUDA backend, host side: one stream, a buffer pool, weights uploaded in
// the GPU plane layout, the KV cache on the device, and the graph's nodes
// turned into kernel launches (kernels/kernels.h). Decode steps (one token)
// are captured once as a CUDA graph and replayed; every wait on the GPU is a
// bounded wait.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/buffer_pool.h"
#include "engine/backend/cuda/cuda_util.h"
#include "kernels/kernels.h"

namespace minfer {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(cuda::DeviceFacts facts);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  std::string description() const override;
  bool supports(Op op) const override;
  bool supports_weight_type(DType type) const override;
  Status prepare(const ModelConfig& config, const ModelWeights& weights, const BackendOptions& options) override;
  Status run(const Graph& graph, const StepInput& input, StepOutput* output) override;
  std::string wedged_reason() const override { return wedged_; }

  const cuda::DeviceFacts& facts() const { return facts_; }
  uint64_t weight_bytes_on_device() const { return weight_bytes_; }
  int launches_last_step() const { return launches_; }
  bool graphs_enabled() const { return graphs_enabled_; }
  int graph_captures() const { return captures_; }
  cuda::BufferPool& pool() { return pool_; }

 private:
  // A buffer's device copies. f32 always; Q8 and f16 only for matmul inputs.
  struct Act {
    float* f32 = nullptr;
    kernels::Q8Rows q8;
    void* f16 = nullptr;
    int width = 0;
    int rows = 0;      // rows held now
    bool q8_ok = false;   // the Q8 copy matches f32 (for `rows`)
    bool f16_ok = false;  // the f16 copy matches f32
  };
  struct Captured {
    cudaGraphExec_t exec = nullptr;
    uint64_t generation = 0;
    int launches = 0;
  };

  Status upload_weights();
  Status alloc_buffers();
  Status check_input(const StepInput& in) const;
  Status upload_inputs(const StepInput& in);
  // Enqueues every node of the graph for n_tokens rows; counts launches.
  Status enqueue(const Graph& g, int n_tokens);
  Status enqueue_output_copy(const Graph& g);
  Status ensure_logits(const Graph& g, int n_tokens);
  Status run_node(const Graph& g, size_t& i, int n_tokens);
  Status matmul(const Node& n, const Node* residual_add, float* dst_override);
  Status matvec_group(const std::vector<const Node*>& nodes, const Node* residual_add);
  Status gemm(const Weight& w, const Act& src, int first_row, int rows, float* y, int ldy, bool accumulate);
  Status ensure_q8(Act& a);
  Status ensure_f16(Act& a);
  Status launched(cudaError_t st, const Node& n);
  Status step_graph(const Graph& g);
  Status finish_step(int n_tokens);
  void wedge(const std::string& why);
  kernels::DeviceWeight dw(const Weight& w) const;
  const float* dv(const Weight* w) const;
  Act& act(Buf b) { return acts_[static_cast<size_t>(b)]; }
  kernels::RopeArgs rope_args() const;

  cuda::DeviceFacts facts_;
  ModelConfig config_;
  const ModelWeights* weights_ = nullptr;
  BackendOptions options_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  void* cublas_ = nullptr;  // cublasHandle_t
  cuda::BufferPool pool_;

  std::unordered_map<const Weight*, kernels::DeviceWeight> dweights_;
  std::unordered_map<const Weight*, const float*> dvectors_;
  std::vector<void*> weight_mem_;
  uint64_t weight_bytes_ = 0;

  std::array<Act, static_cast<size_t>(Buf::kCount)> acts_;
  std::vector<void*> k_cache_, v_cache_;
  int32_t* cell_pos_ = nullptr;
  int32_t* d_tokens_ = nullptr;
  int32_t* d_positions_ = nullptr;
  int32_t* d_kv_cells_ = nullptr;
  int32_t* d_seq_cells_ = nullptr;
  int32_t* d_n_seq_ = nullptr;
  int32_t* d_argmax_ = nullptr;
  float* partials_ = nullptr;
  void* gemm_w16_ = nullptr;
  size_t gemm_w16_bytes_ = 0;
  // Pinned host staging: [n_seq, tokens.., positions.., kv_cells..] and the sequence's cells.
  int32_t* h_header_ = nullptr;
  int32_t* h_seq_cells_ = nullptr;
  std::vector<int32_t> uploaded_cells_;  // what d_seq_cells_ holds
  float* h_logits_ = nullptr;
  size_t h_logits_floats_ = 0;
  int32_t* h_argmax_ = nullptr;
  int out_rows_ = 0;
  int logits_capacity_rows_ = 0;

  std::map<const Graph*, Captured> captured_;
  bool graphs_enabled_ = true;
  int captures_ = 0;
  int launches_ = 0;
  std::string wedged_;
};

}  // namespace minfer

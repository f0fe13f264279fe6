// The CUDA backend, host side: one stream, a buffer pool, weights uploaded in
// the GPU plane layout, the KV cache on the device, and the graph's nodes
// turned into kernel launches (kernels/kernels.h). Decode steps (one token)
// are captured once as a CUDA graph and replayed; every wait on the GPU is a
// bounded wait.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <map>
#include <tuple>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/buffer_pool.h"
#include "engine/backend/cuda/cublas_loader.h"
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
  // Two steps in flight, each with its own pinned staging and its own event;
  // a step fed from the previous one's argmax takes it on the device (the
  // step's first kernel, kernels::launch_step_start). One when profiling or
  // tracing: their events and read-backs belong to one step at a time.
  Status submit(const Graph& graph, const StepInput& input) override;
  Status collect(StepOutput* output) override;
  Status fetch_logits(StepOutput* output) override;
  int max_in_flight() const override { return profiling_ || trace_ != nullptr ? 1 : kSlots; }
  bool overlaps_steps() const override { return true; }
  bool scores_in_slices() const override { return true; }
  std::string wedged_reason() const override { return wedged_; }
  double capture_ms() const override { return capture_ms_; }
  int decode_launches() const override { return decode_launches_; }
  void debug_release_stall() override;

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
    kernels::X16Order f16_order = kernels::X16Order::kNatural;  // its values' order (x16_order)
    float* scale = nullptr;  // a deferred norm's scale (one row; buffers with a Q8 copy)
  };
  struct Captured {
    cudaGraphExec_t exec = nullptr;
    uint64_t generation = 0;
    int launches = 0;
    bool argmax_fused = false;
    std::vector<Op> profile_ops;  // node kinds between the captured profile events
  };

  Status upload_weights();
  Status alloc_buffers();
  Status check_input(const StepInput& in) const;
  // A submitted step's host side: what it uploads from and copies back into,
  // the event that ends it, and what collect() needs to read its output.
  struct Slot {
    int32_t* h_header = nullptr;     // pinned, as d_n_seq_'s header
    int32_t* h_seq_cells = nullptr;  // pinned, [n_ctx]: the cells this step uploads
    unsigned long long* h_argmax_key = nullptr;  // pinned
    int32_t* h_argmax = nullptr;     // pinned, [max_tokens]
    kernels::LogprobsOut* h_logprobs = nullptr;  // pinned: a kLogprobs step's
    cudaEvent_t done = nullptr;
    std::chrono::steady_clock::time_point deadline{};
    Logits logits = Logits::kNone;
    bool argmax = false;
    bool argmax_fused = false;
    bool logprobs = false;
    int out_rows = 0;
    int scored_rows = 0;  // a scoring step's (Logits::kScore): row_logprobs
    const float* logits_row = nullptr;  // a one-row step's logits on the device (fetch_logits)
  };
  static constexpr int kSlots = 2;
  static_assert(sizeof(kernels::DrawArgs) % sizeof(int32_t) == 0 && alignof(kernels::DrawArgs) <= sizeof(int32_t));
  static constexpr size_t kDrawWords = sizeof(kernels::DrawArgs) / sizeof(int32_t);
  // The header's words before the draw: n_seq, the step's tokens and the one
  // after them (a scoring step's: StepInput::next_token) in max_tokens + 1,
  // positions and kv_cells in max_tokens each, feed.
  size_t header_words_draw() const { return 3 + 3 * static_cast<size_t>(options_.max_tokens); }

  Status upload_inputs(const StepInput& in, Slot& slot);
  // A step of an argmax graph begins with kernels::launch_step_start.
  Status enqueue_step_start(const Graph& g);
  // Enqueues every node of the graph for n_tokens rows; counts launches.
  Status enqueue(const Graph& g, int n_tokens);
  Status enqueue_output_copy(const Graph& g, int n_tokens, Slot& slot);
  Status ensure_logits(const Graph& g, int n_tokens);
  // A scoring step's buffers: the scratch for slices of options_.score_rows
  // rows, and row_logprobs_capacity_ >= rows outputs.
  Status ensure_score_rows(int rows);
  // A scoring step's output head and its kLogprobs node (i: the head's; left
  // on the kLogprobs), in slices (Backend::scores_in_slices).
  Status score_head(const Graph& g, size_t& i, Act& src);
  Status run_node(const Graph& g, size_t& i, int n_tokens);
  Status matmul(const Node& n, const Node* residual_add, float* dst_override);
  // qkv_tail: the kQkvTail node after q, k and v, folded into their launch
  // where the kernels take it (kernels::MatvecInput::tail); *tail_folded
  // says whether it was.
  Status matvec_group(const std::vector<const Node*>& nodes, const Node* residual_add,
                      unsigned long long* argmax = nullptr, const Node* tail_norm = nullptr,
                      const Node* qkv_tail = nullptr, bool* tail_folded = nullptr);
  // The arguments of a kQkvTail or kKvStore node's launch.
  kernels::QkvTailArgs qkv_tail_args(const Node& n);
  Status gemm(const Weight& w, const Act& src, int first_row, int rows, float* y, int ldy, bool accumulate);
  // gemm's two halves: w dequantized to f16 (gemm_w16_), and the product
  // with it, which may follow the first more than once.
  Status dequantize_for_gemm(const Weight& w);
  Status gemm_dequantized(const Weight& w, const Act& src, int first_row, int rows, float* y, int ldy, bool accumulate);
  // The seam at g.nodes[i] (a one-row product, its residual add, the
  // deferrable norm of the stream, the products of the norm) in one bridge
  // launch (kernels::launch_bridge): true, with i at the seam's last node;
  // false, nothing enqueued, where it does not apply.
  Expected<bool> try_bridge(const Graph& g, size_t& i);
  Status ensure_q8(Act& a);
  // The f16 copy in `order` (x16_order's for a product's x; kNatural for
  // cuBLAS alone), converted from f32 unless it is there.
  Status ensure_f16(Act& a, kernels::X16Order order);
  // The order of an f16 copy of `rows` rows of `width`: kLanes where every
  // product that reads it takes the fused kernel (rows <= fused_gemm_rows_,
  // width % 128 == 0), which reads that order faster; else kNatural (cuBLAS).
  kernels::X16Order x16_order(int rows, int width) const;
  Status launched(cudaError_t st, const Node& n);
  Status step_graph(const Graph& g);
  // The captured decode step of g for the current profiling and attention
  // variant, captured now if it is not yet; nullptr once capture failed and
  // graphs are off (logged).
  Expected<Captured*> captured(const Graph& g);
  // Eager, one node at a time, each waited for and its output read back.
  Status run_traced(const Graph& g, int n_tokens);
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
  const cuda::CublasApi* blas_ = nullptr;  // loaded at prepare (cublas_loader.h)
  cuda::BufferPool pool_;

  // Keyed by the weight's host data: a tied output head and the embedding
  // table are one matrix, uploaded once.
  std::unordered_map<const uint8_t*, kernels::DeviceWeight> dweights_;
  std::unordered_map<const uint8_t*, const float*> dvectors_;
  std::vector<void*> weight_mem_;
  uint64_t weight_bytes_ = 0;

  std::array<Act, static_cast<size_t>(Buf::kCount)> acts_;
  std::vector<void*> k_cache_, v_cache_;
  int32_t* cell_pos_ = nullptr;
  double* inv_freq_ = nullptr;  // RoPE frequencies, [n_rot / 2]
  int32_t* d_tokens_ = nullptr;
  int32_t* d_positions_ = nullptr;
  int32_t* d_kv_cells_ = nullptr;
  int32_t* d_seq_cells_ = nullptr;
  int32_t* d_n_seq_ = nullptr;
  int32_t* d_feed_ = nullptr;  // kernels::launch_step_start's *feed: the header's word after kv_cells
  kernels::DrawArgs* d_draw_ = nullptr;  // a sampling step's draw: the header's last words
  unsigned long long* sample_lists_ = nullptr;  // kernels::launch_sample's scratch
  unsigned int* sample_count_ = nullptr;        // its count of finished blocks (zero between launches)
  void* logprobs_scratch_ = nullptr;            // kernels::launch_logprobs's, and its count
  unsigned int* logprobs_count_ = nullptr;
  kernels::LogprobsOut* d_logprobs_ = nullptr;  // a kLogprobs step's output
  // A scoring step's (Logits::kScore) kLogprobs over every row: its scratch
  // and counts for a slice of options_.score_rows rows (null until the first
  // scoring step), its output for row_logprobs_capacity_ rows, and the pinned copy of
  // the output (one: a scoring step never runs behind another).
  void* score_scratch_ = nullptr;
  unsigned int* score_counts_ = nullptr;
  kernels::LogprobsOut* d_row_logprobs_ = nullptr;
  kernels::LogprobsOut* h_row_logprobs_ = nullptr;
  int row_logprobs_capacity_ = 0;
  int32_t* d_argmax_ = nullptr;
  unsigned long long* d_argmax_key_ = nullptr;  // the fused argmax of a one-row output head
  bool argmax_fused_ = false;                   // this step's argmax came from the output matvec
  int score_from_ = 0;                          // this step's StepInput::score_from
  // The logits row of the step collected last, while no step has been
  // submitted since (fetch_logits); null otherwise.
  const float* fetchable_row_ = nullptr;
  float* partials_ = nullptr;
  void* gemm_w16_ = nullptr;
  size_t gemm_w16_bytes_ = 0;
  // kernels::launch_gemm_fused takes products of at most fused_gemm_rows_
  // rows (options_.fused_gemm_rows, MINFER_FUSED_GEMM_ROWS).
  int fused_gemm_rows_ = 0;
  bool x16_lanes_ = false;  // MINFER_X16_LANES=1: x16_order may give kLanes (not yet run on a GPU)
  // Pinned host staging a step in flight (header: [n_seq, tokens..,
  // positions.., kv_cells.., feed, draw (kSample's DrawArgs)]); the oldest in
  // flight is submitted_ slots before next_slot_.
  std::array<Slot, kSlots> slots_{};
  int next_slot_ = 0;
  int feed_next_ = 0;  // launch_step_start's feed for a step fed from the last one submitted (0: none)
  std::vector<int32_t> uploaded_cells_;  // what d_seq_cells_ holds
  float* h_logits_ = nullptr;  // one step's logits: a step that copies them back is never behind another
  size_t h_logits_floats_ = 0;
  int out_rows_ = 0;
  int logits_capacity_rows_ = 0;

  // Per-node timing: an event before each node (and one after the last),
  // recorded as graph nodes when profiling a captured decode step.
  std::vector<cudaEvent_t> profile_events_;
  std::vector<Op> profile_ops_;
  Status record_profile_event(size_t k);
  void accumulate_profile();

  std::map<std::tuple<const Graph*, bool, bool>, Captured> captured_;  // (graph, profiling, attn_split_)
  // Decode attention (kernels::launch_attention_decode): a block a query
  // head, or a block a KV head and range of cells once the sequence passes
  // attn_split_cells_ (8 MiB of K/V a layer or 8,192 cells; see prepare()). Both decode
  // graphs are captured together. MINFER_ATTN_DECODE=heads|split forces one;
  // MINFER_ATTN_SPLIT_CELLS=N moves the switch-over (tests).
  enum class AttnDecode { kAuto, kHeads, kSplit };
  AttnDecode attn_mode_ = AttnDecode::kAuto;
  int attn_split_cells_ = 0;
  bool attn_split_ = false;  // the variant of the step being enqueued
  bool attn_split_early_ = true;  // the split kernel told the tail's cell (AttentionArgs::kv_cells)
  bool graphs_enabled_ = true;
  int captures_ = 0;
  int launches_ = 0;
  // A one-row RMS norm left for its consumer's matvec prologue to compute
  // (kernels::MatvecInput::norm_w); `buf` is Buf::kNone when none is pending.
  struct PendingNorm {
    Buf buf = Buf::kNone;
    const float* x = nullptr;
    const float* w = nullptr;
    bool deferred = false;  // the deferred prologue (kernels::MatvecInput::norm_deferred)
  } pending_norm_;
  bool norm_tail_ = false;       // MINFER_NORM_TAIL=1 (see prepare())
  bool fold_qkv_tail_ = true;    // MINFER_QKV_TAIL_IN_PRODUCT=0 turns it off (see prepare())
  int* tail_counter_ = nullptr;  // the tail norm's count of finished blocks (zero between launches)
  unsigned int* bridge_barrier_ = nullptr;  // the bridge's barrier words (kernels::BridgeArgs::barrier)
  int fuse_norm_max_width_ = 0;  // norms of rows up to this wide fold into the next matvec (see prepare())
  // Fills in.norm_* when src's norm is pending (and clears it).
  void take_pending_norm(Buf src, kernels::MatvecInput& in);
  // A one-row RMS norm whose scale its consumers apply (the deferred-scale
  // norm, kernels::launch_rms_norm_deferred): act(buf).q8 holds Q8 of x ⊙ w
  // and act(buf).scale the norm's scale; x and w stay for
  // computing the plain norm should a reader that cannot apply the scale come.
  struct DeferredNorm {
    Buf buf = Buf::kNone;
    const float* x = nullptr;
    const float* w = nullptr;
  } deferred_;
  bool defer_norm_ = true;          // MINFER_DEFER_NORM=0 turns it off (see prepare())
  // Whether the norm at g.nodes[i] can be deferred: a layer's, one row, and
  // read only by the products right after it, all of quantized weights.
  bool can_defer_norm(const Graph& g, size_t i);
  // For a product of src: fills in.xq and in.defer_scale when src's norm is
  // deferred and the product's weights are all quantized (true); computes
  // the plain norm first when they are not.
  Expected<bool> take_deferred(Buf src, bool all_quantized, kernels::MatvecInput& in);
  Status materialize_deferred();
  // The plain norm of one row x with weights w into act(buf) (f32, and Q8
  // when it has a copy): for a pending or deferred norm that a reader which
  // cannot take it needs now.
  Status launch_one_row_norm(Buf buf, const float* x, const float* w);

  std::string wedged_;
  double capture_ms_ = 0.0;
  int decode_launches_ = 0;
  int64_t steps_ = 0;
  int32_t* stall_flag_ = nullptr;  // pinned: the spin kernel of the fault injection polls it
};

}  // namespace minfer

// A backend runs the graph: CPU (engine/backend/cpu) or CUDA
// (engine/backend/cuda). The interface is small on purpose: set up for one
// model, say which ops it implements, run one step.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"
#include "engine/graph/graph.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/quant/dtype.h"
#include "engine/trace/trace.h"
#include "kernels/logprobs.h"

namespace minfer {

struct BackendOptions {
  int n_ctx = 0;              // KV cache cells
  int max_tokens = 512;       // most tokens one step may carry (prefill chunk)
  DType kv_type = DType::kF16;
  int n_threads = 0;          // CPU worker threads; 0: all cores
  int score_rows = 64;        // a scoring step's logits rows held at once (EngineConfig::score_rows)
  // CUDA: A/B switches and the bounded wait's deadline per step
  // (base + per token), see engine/backend/cuda/bounded_wait.h.
  bool cuda_graphs = true;
  bool fa_prefill = true;
  // Prefill products of at most this many tokens on the fused dequantize
  // and multiply kernel (kernels::launch_gemm_fused), more on dequantize +
  // cuBLAS; 0: always the latter (EngineConfig::fused_gemm).
  int fused_gemm_rows = 64;
  double step_timeout_ms = 10000.0;
  double step_timeout_per_token_ms = 20.0;
  int debug_gpu_stall_at_step = -1;  // fault injection (tests only), see EngineConfig
};

// What a step hands back: logits rows (rows × vocab_size, row-major) or, for a
// graph that picks its tokens (Graph::picks_token), one token id per row
// (kArgmax) or the one drawn (kSample), and with kLogprobs the pick's
// log-probabilities.
struct StepOutput {
  int rows = 0;
  std::vector<float> logits;
  std::vector<int32_t> argmax;
  std::optional<kernels::LogprobsOut> logprobs;
  // A scoring step's (Logits::kScore): row t's against the token after it
  // (StepInput::tokens[t + 1], the last row's StepInput::next_token).
  std::vector<kernels::LogprobsOut> row_logprobs;
};

// Accumulated time and calls per op kind.
struct OpProfile {
  std::array<double, static_cast<size_t>(Op::kCount)> ms{};
  std::array<int64_t, static_cast<size_t>(Op::kCount)> calls{};
};

// StepInput::score_from against the step: 0, or within a scoring step's
// tokens (an error naming `backend` and the values otherwise).
Status check_score_from(const Graph& graph, const StepInput& input, std::string_view backend);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // One line for logs and /health: threads and ISA, or the device.
  virtual std::string description() const = 0;
  // The single source of truth for op support; the graph builder and the
  // weight gate both ask it.
  virtual bool supports(Op op) const = 0;
  virtual bool supports_weight_type(DType type) const = 0;
  // Uploads or maps the weights, allocates the KV cache and the activation
  // buffers. Called once.
  virtual Status prepare(const ModelConfig& config, const ModelWeights& weights, const BackendOptions& options) = 0;
  // One step, waited for. Nothing else may be in flight (see submit()).
  virtual Status run(const Graph& graph, const StepInput& input, StepOutput* output) = 0;

  // Steps in flight, for decode that keeps the device busy while the host
  // handles the last token: submit() enqueues a step and returns, collect()
  // waits for the oldest submitted step and hands back its output. A step
  // with StepInput::token_from_previous evaluates the token picked by the step
  // submitted before it. At most max_in_flight() steps are submitted and not
  // collected. By default a step runs inside submit() (run()) and its output
  // waits in a queue: the same results, without the overlap.
  virtual Status submit(const Graph& graph, const StepInput& input);
  virtual Status collect(StepOutput* output);
  virtual int max_in_flight() const { return 2; }
  // The logits row of the step collected last, which picked its token and so
  // did not hand them back (a constrained request's step whose candidates
  // the constraint refused): while nothing is in flight, an error otherwise
  // or where that step computed no logits.
  virtual Status fetch_logits(StepOutput* output);
  int in_flight() const { return static_cast<int>(queued_.size()) + submitted_; }
  // Whether submit() returns before the step has run (CUDA): where it does
  // not, submitting ahead only delays the host's handling of a token.
  virtual bool overlaps_steps() const { return false; }
  // Whether a scoring step (Logits::kScore) of any size holds only
  // BackendOptions::score_rows rows of logits at once, computing and scoring
  // them in slices (CUDA); otherwise it holds all its rows'.
  virtual bool scores_in_slices() const { return false; }

  // Set once the backend can no longer run steps (a GPU wait missed its
  // deadline, or a sticky CUDA error): why. Empty while healthy.
  virtual std::string wedged_reason() const { return {}; }
  // Time spent capturing and instantiating graphs so far, and the kernel
  // launches of the last decode step (0 where not applicable).
  virtual double capture_ms() const { return 0.0; }
  virtual int decode_launches() const { return 0; }
  virtual void debug_release_stall() {}

  // Writes a trace event per node (MINFER_TRACE); null stops tracing. A
  // tracing backend runs eagerly (no graph replay) and reads outputs back.
  virtual void set_trace(TraceWriter* trace) { trace_ = trace; }

  // Per-op-kind timing for benchmarks ("where does a step's time go"). Off by
  // default: measuring costs a clock read (CPU) or an event pair (CUDA) per node.
  virtual void set_profiling(bool on) { profiling_ = on; }
  const OpProfile& profile() const { return profile_; }
  void reset_profile() { profile_ = OpProfile{}; }

 protected:
  // Device backends that override submit()/collect() count their steps here.
  int submitted_ = 0;
  bool profiling_ = false;
  OpProfile profile_;
  TraceWriter* trace_ = nullptr;
  int trace_step_ = 0;

 private:
  std::deque<std::pair<Status, StepOutput>> queued_;  // the default submit()'s outputs, oldest first
  int32_t last_argmax_ = -1;                          // the last submitted step's argmax (-1: none)
};

}  // namespace minfer

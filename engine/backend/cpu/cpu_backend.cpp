#include "engine/backend/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <chrono>
#include <climits>
#include <cstring>

#include "engine/quant/quant.h"
#include "engine/sampling/logprobs.h"
#include "engine/sampling/top_k_draw.h"

namespace minfer {

bool CpuBackend::supports(Op op) const {
  switch (op) {
    case Op::kQkvTail:
    case Op::kGateUpSwiglu:
    case Op::kCount:
      return false;  // the CPU runs the unfused chains
    default:
      return true;
  }
}

std::string CpuBackend::description() const {
  return fmt::format("{} threads, {}", n_threads(), quant::isa_name(quant::active_isa()));
}

bool CpuBackend::supports_weight_type(DType type) const { return quant::is_weight_type(type); }

Status CpuBackend::prepare(const ModelConfig& config, const ModelWeights& weights, const BackendOptions& options) {
  if (options.n_ctx <= 0 || options.max_tokens <= 0) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("cpu backend: n_ctx {} and max_tokens {} must be positive", options.n_ctx,
                                  options.max_tokens));
  }
  if (options.kv_type != DType::kF16 && options.kv_type != DType::kF32) {
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("cpu backend: KV cache type {} is not supported; use f16 or f32",
                                  dtype_name(options.kv_type)));
  }
  config_ = config;
  weights_ = &weights;
  options_ = options;
  pool_ = std::make_unique<ThreadPool>(options.n_threads);
  for (size_t i = 0; i < bufs_.size(); ++i) bufs_[i].width = buf_width(static_cast<Buf>(i), config);
  const size_t elem = options.kv_type == DType::kF16 ? 2 : 4;
  const size_t cache_bytes = static_cast<size_t>(options.n_ctx) * config.kv_dim() * elem;
  k_cache_.assign(static_cast<size_t>(config.n_layers), std::vector<uint8_t>(cache_bytes));
  v_cache_.assign(static_cast<size_t>(config.n_layers), std::vector<uint8_t>(cache_bytes));
  cell_pos_.assign(static_cast<size_t>(options.n_ctx), INT32_MAX);  // empty cells are never visible
  rope_ = ref::rope_params(config, weights);
  return ok_status();
}

void CpuBackend::resize(Buf b, int rows) {
  Activation& a = buf(b);
  const size_t need = static_cast<size_t>(rows) * a.width;
  if (a.data.size() < need) a.data.resize(need);
  a.rows = rows;
  ++a.version;
}

Status CpuBackend::check_input(const StepInput& in) const {
  if (in.n_tokens <= 0 || in.n_tokens > options_.max_tokens) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("cpu backend: step has {} tokens; allowed 1..{}", in.n_tokens, options_.max_tokens));
  }
  if (in.n_seq_cells <= 0 || in.n_seq_cells > options_.n_ctx) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("cpu backend: sequence has {} cells; allowed 1..{}", in.n_seq_cells, options_.n_ctx));
  }
  for (int t = 0; t < in.n_tokens; ++t) {
    if (in.tokens[t] < 0 || in.tokens[t] >= config_.vocab_size) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("cpu backend: token {} at index {} is outside the vocabulary [0, {})",
                                    in.tokens[t], t, config_.vocab_size));
    }
    if (in.kv_cells[t] < 0 || in.kv_cells[t] >= options_.n_ctx || in.positions[t] < 0) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("cpu backend: token {} has cell {} (n_ctx {}) and position {}", t, in.kv_cells[t],
                                    options_.n_ctx, in.positions[t]));
    }
  }
  for (int j = 0; j < in.n_seq_cells; ++j) {
    if (in.seq_cells[j] < 0 || in.seq_cells[j] >= options_.n_ctx) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("cpu backend: sequence cell {} at index {} is outside [0, {})", in.seq_cells[j], j,
                                    options_.n_ctx));
    }
  }
  return ok_status();
}

Status CpuBackend::run(const Graph& graph, const StepInput& in, StepOutput* out) {
  if (weights_ == nullptr) return unexpected(ErrorCode::kInternal, "cpu backend: run() before prepare()");
  MINFER_TRY(check_input(in));
  MINFER_TRY(check_score_from(graph, in, "cpu"));
  rope_table_.build(rope_, in.positions, in.n_tokens);
  logits_held_ = false;
  argmax_.clear();
  logprobs_.reset();
  row_logprobs_.clear();
  for (const Node& n : graph.nodes) {
    const auto t0 = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    const double trace_t0 = trace_ != nullptr ? trace_->now_us() : 0.0;
    Status st = run_node(n, in);
    if (trace_ != nullptr && st) {
      const double dur = trace_->now_us() - trace_t0;
      TensorStats stats;
      int rows = 0, width = 0;
      if (n.dst != Buf::kNone) {
        const Activation& d = buf(n.dst);
        rows = d.rows;
        width = d.width;
        stats = TensorStats::of(d.data.data(), static_cast<int64_t>(rows) * width);
      }
      trace_->node(n.name, op_name(n.op), "cpu", trace_step_, rows, width, trace_t0, dur, stats);
    }
    if (profiling_) {
      const size_t op = static_cast<size_t>(n.op);
      profile_.ms[op] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      ++profile_.calls[op];
    }
    if (!st) {
      return unexpected(st.error().code, fmt::format("cpu backend: node '{}' ({}): {}", n.name, op_name(n.op),
                                                     st.error().message));
    }
  }
  ++trace_step_;
  const Activation& logits = buf(Buf::kLogits);
  out->row_logprobs = row_logprobs_;
  if (graph.options.logits == Logits::kNone) {
    out->rows = 0;
    out->logits.clear();
    out->argmax.clear();
    out->logprobs.reset();
    return ok_status();
  }
  logits_held_ = true;
  out->rows = logits.rows;
  out->logprobs = logprobs_;
  if (graph.scores_rows()) {  // the last row's logits, as Logits::kLast's
    out->rows = 1;
    out->argmax.clear();
    out->logits.assign(logits.data.begin() + static_cast<ptrdiff_t>(logits.rows - 1) * logits.width,
                       logits.data.begin() + static_cast<ptrdiff_t>(logits.rows) * logits.width);
  } else if (graph.picks_token()) {
    out->argmax = argmax_;
    out->logits.clear();
  } else {
    out->logits.assign(logits.data.begin(), logits.data.begin() + static_cast<ptrdiff_t>(logits.rows) * logits.width);
  }
  return ok_status();
}

Status CpuBackend::fetch_logits(StepOutput* out) {
  // Steps run at submit(): with one queued, the buffer holds a later step's.
  if (in_flight() > 0) return unexpected(ErrorCode::kInternal, "cpu backend: logits fetched with a step in flight");
  if (!logits_held_) return unexpected(ErrorCode::kInternal, "cpu backend: the last step left no logits to fetch");
  const Activation& logits = buf(Buf::kLogits);
  out->rows = 1;
  out->logits.assign(logits.data.begin() + static_cast<ptrdiff_t>(logits.rows - 1) * logits.width,
                     logits.data.begin() + static_cast<ptrdiff_t>(logits.rows) * logits.width);
  return ok_status();
}

const void* CpuBackend::activation_for(const Weight& w, const Activation& src, int first_row, int n_rows,
                                       size_t* stride) {
  const DType act = quant::vec_dot_type(w.type);
  const float* x = src.data.data() + static_cast<size_t>(first_row) * src.width;
  if (act == DType::kF32) {
    *stride = static_cast<size_t>(src.width) * sizeof(float);
    return x;
  }
  const size_t row_bytes = row_size(act, static_cast<uint64_t>(src.width));
  *stride = row_bytes;
  const Buf which = static_cast<Buf>(&src - bufs_.data());
  if (xq_buf_ == which && xq_version_ == src.version && xq_type_ == act && xq_first_row_ == first_row &&
      xq_rows_ == n_rows) {
    return xq_.data();  // q, k, v (and gate, up) share one quantized input
  }
  if (xq_.size() < row_bytes * n_rows) xq_.resize(row_bytes * n_rows);
  cpu::quantize_rows(*pool_, act, x, src.width, n_rows, src.width, xq_.data(), row_bytes);
  xq_buf_ = which;
  xq_version_ = src.version;
  xq_type_ = act;
  xq_first_row_ = first_row;
  xq_rows_ = n_rows;
  return xq_.data();
}

Status CpuBackend::run_node(const Node& n, const StepInput& in) {
  ThreadPool& pool = *pool_;
  const ModelConfig& c = config_;
  switch (n.op) {
    case Op::kEmbed: {
      resize(n.dst, in.n_tokens);
      Activation& x = buf(n.dst);
      pool.run(in.n_tokens, [&](int64_t t, int) {
        ref::embed_ref(*n.w, in.tokens[t], x.data.data() + static_cast<size_t>(t) * x.width);
      });
      return ok_status();
    }
    case Op::kRmsNorm: {
      const Activation& src = buf(n.src);
      const auto [first, rows] = node_rows(n.rows, src.rows, in.score_from);
      const float* x = src.data.data() + static_cast<size_t>(first) * src.width;
      resize(n.dst, rows);
      Activation& dst = buf(n.dst);
      cpu::rms_norm(pool, x, src.width, n.w->f32(), dst.data.data(), dst.width, rows, src.width, c.rms_eps);
      return ok_status();
    }
    case Op::kMatmul: {
      Activation& src = buf(n.src);
      if (src.width != n.w->n_in) {
        return unexpected(ErrorCode::kInternal, fmt::format("input width {} does not match weight '{}' [{}, {}]",
                                                            src.width, n.w->name, n.w->n_in, n.w->n_out));
      }
      const auto [first, rows] = node_rows(n.rows, src.rows, in.score_from);
      size_t stride = 0;
      const void* xq = activation_for(*n.w, src, first, rows, &stride);
      resize(n.dst, rows);
      Activation& dst = buf(n.dst);
      cpu::matmul(pool, *n.w, n.bias, xq, stride, rows, dst.data.data(), dst.width);
      return ok_status();
    }
    case Op::kHeadNorm: {
      Activation& x = buf(n.dst);
      pool.run(x.rows, [&](int64_t t, int) {
        ref::head_norm_ref(x.data.data() + static_cast<size_t>(t) * x.width, n.w->f32(), n.n_heads, c.head_dim,
                           c.rms_eps);
      });
      ++x.version;
      return ok_status();
    }
    case Op::kRope: {
      Activation& x = buf(n.dst);
      cpu::rope(pool, x.data.data(), x.width, x.rows, n.n_heads, rope_, rope_table_);
      ++x.version;
      return ok_status();
    }
    case Op::kKvStore: {
      const Activation& k = buf(n.src);
      const Activation& v = buf(n.src2);
      const size_t elem = options_.kv_type == DType::kF16 ? 2 : 4;
      const size_t row_bytes = static_cast<size_t>(c.kv_dim()) * elem;
      uint8_t* kc = k_cache(n.layer);
      uint8_t* vc = v_cache(n.layer);
      pool.run(k.rows, [&](int64_t t, int) {
        const size_t cell = static_cast<size_t>(in.kv_cells[t]);
        ref::kv_store_ref(k.data.data() + static_cast<size_t>(t) * k.width, kc + cell * row_bytes, options_.kv_type,
                          c.kv_dim());
        ref::kv_store_ref(v.data.data() + static_cast<size_t>(t) * v.width, vc + cell * row_bytes, options_.kv_type,
                          c.kv_dim());
      });
      for (int t = 0; t < k.rows; ++t) cell_pos_[static_cast<size_t>(in.kv_cells[t])] = in.positions[t];
      return ok_status();
    }
    case Op::kAttention: {
      const Activation& q = buf(n.src);
      resize(n.dst, q.rows);
      cpu::AttentionArgs a;
      a.q = q.data.data();
      a.k_cache = k_cache(n.layer);
      a.v_cache = v_cache(n.layer);
      a.seq_cells = in.seq_cells;
      a.n_seq_cells = in.n_seq_cells;
      a.cell_pos = cell_pos_.data();
      a.q_pos = in.positions;
      a.n_tokens = q.rows;
      a.shape = {c.n_heads, c.n_kv_heads, c.head_dim, options_.kv_type};
      a.out = buf(n.dst).data.data();
      cpu::attention(pool, a, attn_scratch_);
      return ok_status();
    }
    case Op::kAdd: {
      Activation& y = buf(n.dst);
      const Activation& x = buf(n.src);
      if (x.rows != y.rows || x.width != y.width) {
        return unexpected(ErrorCode::kInternal, fmt::format("add of {}x{} into {}x{}", x.rows, x.width, y.rows, y.width));
      }
      cpu::add(pool, y.data.data(), x.data.data(), y.width, y.rows, y.width);
      ++y.version;
      return ok_status();
    }
    case Op::kSwiglu: {
      Activation& g = buf(n.dst);
      const Activation& u = buf(n.src);
      cpu::swiglu(pool, g.data.data(), u.data.data(), g.width, g.rows, g.width);
      ++g.version;
      return ok_status();
    }
    case Op::kArgmax: {
      const Activation& l = buf(n.src);
      argmax_.resize(static_cast<size_t>(l.rows));
      for (int r = 0; r < l.rows; ++r) {
        argmax_[static_cast<size_t>(r)] = ref::argmax_ref(l.data.data() + static_cast<size_t>(r) * l.width, l.width);
      }
      return ok_status();
    }
    case Op::kSample: {
      MINFER_TRY(check_draw(in.draw, config_.vocab_size, "cpu"));
      const Activation& l = buf(n.src);
      draw_logits_.assign(l.data.begin() + static_cast<ptrdiff_t>(l.rows - 1) * l.width,
                          l.data.begin() + static_cast<ptrdiff_t>(l.rows) * l.width);
      // The step's own token, the last of the penalties' window.
      argmax_.assign(1, draw_in_step(draw_logits_.data(), l.width, *in.draw, in.tokens[in.n_tokens - 1],
                                     &draw_candidates_, &draw_terms_));
      return ok_status();
    }
    case Op::kLogprobs: {
      const Activation& l = buf(n.src);
      if (n.rows == Rows::kAll) {
        // A scored prompt's step: row t (the step's token score_from + t,
        // Rows::kScored) against the token after it, rows shared out over
        // the threads.
        row_logprobs_.resize(static_cast<size_t>(l.rows));
        pool_->run(l.rows, [&](int64_t t, int) {
          const int64_t p = t + in.score_from;
          const int32_t next = p + 1 < in.n_tokens ? in.tokens[p + 1] : in.next_token;
          row_logprobs_[static_cast<size_t>(t)] =
              step_logprobs_raw(std::span<const float>(l.data).subspan(static_cast<size_t>(t) * l.width,
                                                                       static_cast<size_t>(l.width)),
                                next);
        });
        return ok_status();
      }
      if (argmax_.empty()) return unexpected(ErrorCode::kInternal, "logprobs before the step picked its token");
      logprobs_ = step_logprobs_raw(std::span<const float>(l.data).subspan(static_cast<size_t>(l.rows - 1) * l.width,
                                                                         static_cast<size_t>(l.width)),
                                    argmax_.back());
      return ok_status();
    }
    case Op::kQkvTail:
    case Op::kGateUpSwiglu:
    case Op::kCount:
      break;
  }
  return unexpected(ErrorCode::kUnsupported, fmt::format("op {} is not implemented on the cpu backend", op_name(n.op)));
}

}  // namespace minfer

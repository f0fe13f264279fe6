// Decode matrix-vector products: one warp per weight row, 16-byte loads of the
// plane layout, dequantization on the fly (dot.cuh). Memory bound: each weight
// byte is read once; the activations (a few KB) stay in L1/L2. The kernels
// and each weight type's choice among them: matvec_kernels.cuh (compiled a
// few types a file, matvec_types_*.cu); here the launchers' checks, the
// mixed-type kernels and the dispatch on the weight type.
#include "kernels/matvec_kernels.cuh"

namespace minfer::kernels {

MINFER_MATVEC_TYPED(extern, -1);
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kF32));
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kF16));
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kBF16));
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kQ4_0));
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kQ4_1));
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kQ5_0));
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kQ5_1));
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kQ8_0));
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kQ4_K));
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kQ5_K));
MINFER_MATVEC_TYPED(extern, static_cast<int>(WType::kQ6_K));

namespace {

// Launches of two weight types that take a kernel of both compiled types
// (matvec_kernel kLastType) instead of the one that reads each unit's type at
// run time: q/k/v of the K-quant mixes, where attn_v alone takes more bits in
// some layers — Q6_K, or Q8_0 where Q6_K's blocks do not divide the row (and
// q/k then fall back from Q4_K to Q5_0). Every task but the last has `first`,
// the last `last`; `lanes` and `sched` are what lanes_for and schedule_for
// pick for both types at the row widths of the files that have the mix
// (other widths take the run-time-typed kernel). The same bits either way.
struct TwoTypeKernel {
  WType first, last;
  int lanes, sched;
};
constexpr TwoTypeKernel kTwoTypes[] = {
    {WType::kQ4_K, WType::kQ6_K, kWarp, 0},     // Q4_K_M, rows of 32 units or more (7B: 3,584)
    {WType::kQ4_K, WType::kQ6_K, kQuarter, 2},  // Q4_K_M, shorter rows (1.5B: 1,536; 0.6B: 1,024)
    {WType::kQ5_K, WType::kQ6_K, kWarp, 0},     // Q5_K_M likewise
    {WType::kQ5_K, WType::kQ6_K, kQuarter, 2},
    {WType::kQ5_0, WType::kQ8_0, kQuarter, 2},  // Q4_K_M, rows Q4_K's blocks do not divide (0.5B: 896)
};

// The kTwoTypes entry a launch takes, or -1.
int two_type_kernel(const MatvecTask* tasks, int n_tasks) {
  if (n_tasks < 2 || !matvec_two_types()) return -1;
  const int k = tasks[0].w.k;
  auto lanes_of = [&](WType t) { return dispatch_wtype(t, [&](auto type) { return lanes_for<decltype(type)::value>(k); }); };
  auto sched_of = [&](WType t, int lanes) {
    return dispatch_wtype(t, [&](auto type) { return schedule_for<decltype(type)::value>(false, k, lanes); });
  };
  for (int i = 0; i < static_cast<int>(std::size(kTwoTypes)); ++i) {
    const TwoTypeKernel& p = kTwoTypes[i];
    bool match = tasks[n_tasks - 1].w.type == p.last;
    for (int j = 0; j + 1 < n_tasks; ++j) match &= tasks[j].w.type == p.first && tasks[j].w.k == k;
    if (match && tasks[n_tasks - 1].w.k == k && lanes_of(p.first) == p.lanes && sched_of(p.first, p.lanes) == p.sched &&
        sched_of(p.last, p.lanes) == p.sched) {
      return i;
    }
  }
  return -1;
}

template <int kPair, bool kDefer, bool kTail = false>
constexpr auto kTwoTypeKernel =
    matvec_kernel<static_cast<int>(kTwoTypes[kPair].first), kTwoTypes[kPair].sched, kTwoTypes[kPair].lanes, kDefer, false,
                  static_cast<int>(kTwoTypes[kPair].last), kTail>;

// pick(plain, deferred, with the q/k/v tail) with kTwoTypes[two]'s kernels.
template <int kPair = 0, class Pick>
cudaError_t launch_two_types(int two, Pick&& pick) {
  if constexpr (kPair < static_cast<int>(std::size(kTwoTypes))) {
    if (two == kPair) return pick(kTwoTypeKernel<kPair, false>, kTwoTypeKernel<kPair, true>, kTwoTypeKernel<kPair, true, true>);
    return launch_two_types<kPair + 1>(two, pick);
  } else {
    return cudaErrorInvalidValue;
  }
}

std::atomic<uint64_t> g_two_type_launches{0};
std::atomic<uint64_t> g_tail_launches{0};

// Whether a launch may take the q/k/v tail (MatvecInput::tail): q, k and v
// of one token, each task's rows its heads' (the partner of every rotated
// row in its block), nothing of their own to add, no per-head norms.
bool tail_fits(const MatvecTask* tasks, int n_tasks, const MatvecInput& in) {
  const QkvTailArgs& a = *in.tail;
  const RopeArgs& r = a.rope;
  if (n_tasks != 3 || a.n_tokens != 1 || a.q_norm != nullptr || a.k_norm != nullptr || in.tail_norm_w != nullptr) return false;
  if (r.head_dim < 2 || r.head_dim % 2 != 0 || r.n_rot < 0 || r.n_rot > r.head_dim || r.n_rot % 2 != 0) return false;
  if (a.positions == nullptr || a.kv_cells == nullptr || a.k_cache == nullptr || a.v_cache == nullptr || a.cell_pos == nullptr) {
    return false;
  }
  const float* ys[3] = {a.q, a.k, a.v};
  const int rows[3] = {a.n_heads * r.head_dim, a.n_kv_heads * r.head_dim, a.n_kv_heads * r.head_dim};
  for (int i = 0; i < 3; ++i) {
    const MatvecTask& t = tasks[i];
    if (t.y != ys[i] || t.w.n_rows != rows[i] || rows[i] <= 0 || t.bias != nullptr || t.accumulate || t.argmax != nullptr) {
      return false;
    }
  }
  return true;
}

DotInput dot_input(const MatvecInput& in) {
  return DotInput{in.x, in.xq.q, static_cast<const float2*>(in.xq.ds)};
}

}  // namespace

uint64_t matvec_two_type_launches() { return g_two_type_launches.load(std::memory_order_relaxed); }
uint64_t matvec_tail_launches() { return g_tail_launches.load(std::memory_order_relaxed); }

// 48 KB: the default dynamic shared memory of a block, no opt-in needed.
bool matvec_norm_fits(int k) { return k % 32 == 0 && NormSmem(k, true).total <= 48 * 1024; }

cudaError_t launch_matvec(const MatvecTask* tasks, int n_tasks, MatvecInput in, cudaStream_t stream) {
  if (n_tasks < 1 || n_tasks > kMaxMatvecTasks) return cudaErrorInvalidValue;
  MatvecBatch b{};
  b.n_tasks = n_tasks;
  b.in = dot_input(in);
  bool one_type = true;
  for (int i = 1; i < n_tasks; ++i) one_type &= tasks[i].w.type == tasks[0].w.type;
  const int two = one_type ? -1 : two_type_kernel(tasks, n_tasks);
  const int lanes =
      one_type ? dispatch_wtype(tasks[0].w.type, [&](auto type) { return lanes_for<decltype(type)::value>(tasks[0].w.k); })
      : two >= 0 ? kTwoTypes[two].lanes
                 : kWarp;
  const int rows_per_block = lanes == kWarp ? kRowsPerBlock<kWarp> : kRowsPerBlock<kQuarter>;
  int blocks = 0;
  for (int i = 0; i < n_tasks; ++i) {
    b.t[i] = tasks[i];
    b.block_begin[i] = blocks;
    blocks += (tasks[i].w.n_rows + rows_per_block - 1) / rows_per_block;
  }
  b.block_begin[n_tasks] = blocks;
  b.norm_x = in.norm_x;
  b.norm_w = in.norm_w;
  b.norm_eps = in.norm_eps;
  b.k = tasks[0].w.k;
  b.tail_norm_w = in.tail_norm_w;
  b.tail_norm_eps = in.tail_norm_eps;
  b.tail_norm_y = in.tail_norm_y;
  b.tail_norm_q = in.tail_norm_q.q;
  b.tail_norm_ds = static_cast<float2*>(in.tail_norm_q.ds);
  b.tail_counter = in.tail_counter;
  b.defer_scale = in.defer_scale;
  b.norm_deferred = in.norm_w != nullptr && in.norm_deferred;
  const bool defer = b.defer_scale != nullptr || b.norm_deferred;
  if (defer) {
    bool quantized = true;
    for (int i = 0; i < n_tasks; ++i) quantized &= wtype_is_quantized_host(tasks[i].w.type) && tasks[i].w.k == b.k;
    if (!quantized || b.k % 32 != 0 || (in.defer_scale != nullptr && in.norm_w != nullptr)) return cudaErrorInvalidValue;
  }
  if (in.tail_norm_w != nullptr &&
      (n_tasks != 1 || !tasks[0].accumulate || tasks[0].w.n_rows % 32 != 0 || in.tail_counter == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const bool tail = in.tail != nullptr;
  if (tail) {
    if (!tail_fits(tasks, n_tasks, in)) return cudaErrorInvalidValue;
    b.tail = *in.tail;
  }
  if (in.norm_w == nullptr && in.tail_norm_w == nullptr) {
    // The streamed kernels without the deferred norm's scale, the pipelined
    // ones with it too. They have no q/k/v tail: a launch with one that
    // would take them launches nothing.
    cudaError_t st =
        in.defer_scale == nullptr ? launch_matvec_streamed(tasks, n_tasks, b.in, stream, !tail) : cudaErrorNotSupported;
    if (st == cudaErrorNotSupported) {
      st = launch_matvec_piped(tasks, n_tasks, b.in, in.defer_scale, stream,
                               tail ? PipedCall::kWouldLaunch : PipedCall::kLaunch);
    }
    if (st != cudaErrorNotSupported) return tail && st == cudaSuccess ? cudaErrorNotSupported : st;
  }
  size_t smem = 0;
  if (in.norm_w != nullptr) {
    for (int i = 1; i < n_tasks; ++i) {
      if (tasks[i].w.k != b.k) return cudaErrorInvalidValue;
    }
    if (!matvec_norm_fits(b.k)) return cudaErrorInvalidValue;
  }
  if (in.norm_w != nullptr) smem = NormSmem(b.k, !defer && (!one_type || !wtype_is_quantized_host(tasks[0].w.type))).total;
  // The tail norm's block sums reuse the prologue's memory (done with by then).
  if (in.tail_norm_w != nullptr) smem = std::max(smem, sizeof(float) * static_cast<size_t>(tasks[0].w.n_rows / 32));
  // Deferred-norm launches (quantized weights only: checked above) take the
  // kDefer kernels, those with the q/k/v tail the kTail ones (without the
  // deferred norm: none, cudaErrorNotSupported).
  auto pick = [&](auto plain, auto deferred, auto tailed) {
    if (tail) return defer ? launch_matvec_kernel(tailed, b, blocks, smem, stream) : cudaErrorNotSupported;
    return launch_matvec_kernel(defer ? deferred : plain, b, blocks, smem, stream);
  };
  cudaError_t st = cudaSuccess;
  if (two >= 0) {
    st = launch_two_types(two, pick);
    if (st == cudaSuccess) g_two_type_launches.fetch_add(1, std::memory_order_relaxed);
  } else if (!one_type) {
    st = tail ? cudaErrorNotSupported : launch_matvec_mixed(b, blocks, smem, defer, stream);
  } else {
    st = dispatch_wtype(tasks[0].w.type, [&](auto type) {
      return launch_matvec_typed<decltype(type)::value>(b, blocks, smem, lanes, defer, stream);
    });
  }
  if (tail && st == cudaSuccess) g_tail_launches.fetch_add(1, std::memory_order_relaxed);
  return st;
}

cudaError_t launch_gate_up_swiglu(const DeviceWeight& gate, const DeviceWeight& up, MatvecInput in, float* h,
                                  Q8Rows hq, cudaStream_t stream) {
  if (gate.n_rows != up.n_rows || gate.n_rows % 32 != 0 || gate.k != up.k) return cudaErrorInvalidValue;
  size_t smem = 0;
  if (in.norm_w != nullptr) {
    if (!matvec_norm_fits(gate.k)) return cudaErrorInvalidValue;
    smem = NormSmem(gate.k, gate.type != up.type || !wtype_is_quantized_host(gate.type)).total;
  }
  const bool norm_deferred = in.norm_w != nullptr && in.norm_deferred;
  if ((in.defer_scale != nullptr || norm_deferred) &&
      (!wtype_is_quantized_host(gate.type) || !wtype_is_quantized_host(up.type) || gate.k % 32 != 0 ||
       (in.defer_scale != nullptr && in.norm_w != nullptr))) {
    return cudaErrorInvalidValue;
  }
  const DotInput din = dot_input(in);
  float2* hds = static_cast<float2*>(hq.ds);
  if (in.norm_w == nullptr && in.defer_scale == nullptr) {
    const cudaError_t st = launch_gate_up_streamed(gate, up, din, h, hq.q, hds, stream);
    if (st != cudaErrorNotSupported) return st;
  }
  // Deferred-norm launches (quantized weights only: checked above) take the
  // kDefer kernels.
  const bool defer = in.defer_scale != nullptr || norm_deferred;
  if (gate.type != up.type) return launch_gate_up_mixed(gate, up, in, din, h, hq, smem, defer, stream);
  return dispatch_wtype(gate.type, [&](auto type) {
    return launch_gate_up_typed<decltype(type)::value>(gate, up, in, din, h, hq, smem, defer, stream);
  });
}

}  // namespace minfer::kernels

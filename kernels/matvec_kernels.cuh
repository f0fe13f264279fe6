// The decode matvec and gate/up + SwiGLU kernels that hold a lane's weights
// in registers (matvec.cu launches them) and, for one weight type, the
// launch of them that the type's rows take (launch_matvec_typed,
// launch_gate_up_typed). The kernels are compiled a few weight types a file
// (matvec_types_*.cu instantiate those launchers; matvec.cu dispatches to
// them), so that a build compiles them side by side: all in matvec.cu they
// were a build's longest step (130 s of one core for sm_90); the longest
// file now, the run-time-typed kernels', takes 85 s. The same code either
// way: the PTX of all 264 kernels, compared kernel by kernel, did not change
// (2026-12-02; BF16's gate/up once BF16 had a file of its own).
#pragma once

#include <algorithm>
#include <atomic>
#include <iterator>
#include <utility>
#include <type_traits>

#include "kernels/dot.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matvec_piped.cuh"
#include "kernels/matvec_stream.cuh"
#include "kernels/norm.cuh"
#include "kernels/rope.cuh"

namespace minfer::kernels {

// One row per warp. Tried on the H200 (2026-11-30): two rows per warp with
// their loads interleaved (more bytes in flight, 138 registers) lost on every
// model (7B Q4_K_M tg128 168 vs 183 tok/s, 0.5B Q4_K_M 563 vs 616).
constexpr int kWarpsPerBlock = 4;

struct MatvecBatch {
  MatvecTask t[kMaxMatvecTasks];
  int block_begin[kMaxMatvecTasks + 1];  // first block of each task
  int n_tasks;
  DotInput in;
  const float* norm_x;  // norm prologue (see MatvecInput)
  const float* norm_w;
  float norm_eps;
  int k;
  const float* tail_norm_w;  // norm of y by the last block (see MatvecInput)
  float tail_norm_eps;
  float* tail_norm_y;
  int8_t* tail_norm_q;
  float2* tail_norm_ds;
  int* tail_counter;
  const float* defer_scale;  // the deferred-scale norm (see MatvecInput)
  bool norm_deferred;
  QkvTailArgs tail;  // the q/k/v tail folded in (see MatvecInput), when tail.q is set
};

// One weight type's launch (T: a WType, or -1 for the run-time-typed
// kernels): the kernel its lanes, schedule and preload pick, with the
// deferred norm's variant when `defer`. Defined below, instantiated in
// matvec_types_*.cu (MINFER_MATVEC_TYPED), called by matvec.cu.
template <int T>
cudaError_t launch_matvec_typed(const MatvecBatch& b, int blocks, size_t smem, int lanes, bool defer, cudaStream_t stream);
template <int T>
cudaError_t launch_gate_up_typed(const DeviceWeight& gate, const DeviceWeight& up, const MatvecInput& in, const DotInput& din,
                                 float* h, Q8Rows hq, size_t smem, bool defer, cudaStream_t stream);

namespace {

// The tail norm (MatvecInput::tail_norm_w): each block, once its rows are
// written and fenced, counts itself; the last one normalises all of y (read
// from L2: other SMs wrote it) and resets the count. All threads of the block
// call it. smem: y's n / 32 floats for the block sums.
__device__ void matvec_tail_norm(const MatvecBatch& b, const float* y, int n, unsigned char* smem) {
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(b.tail_counter, 1) == static_cast<int>(gridDim.x) - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  rms_norm_quads<true>(y, b.tail_norm_w, n, b.tail_norm_eps, reinterpret_cast<float*>(smem), b.tail_norm_y, nullptr,
                       b.tail_norm_q, b.tail_norm_ds);
  if (threadIdx.x == 0) *b.tail_counter = 0;
}

// The row a slot of task ti computes with the q/k/v tail folded in
// (MatvecInput::tail): q's and k's rotation pairs side by side, so that a
// pair's two values meet in one block — NeoX: slot 2j of a head computes row
// j, slot 2j + 1 row j + n_rot / 2; the normal order's pairs (2j, 2j + 1) are
// neighbours already, and v is not rotated.
__device__ __forceinline__ int tail_row(int slot, int ti, const RopeArgs& rope) {
  if (ti == 2 || !rope.neox) return slot;
  const int i = slot % rope.head_dim;
  if (i >= rope.n_rot) return slot;
  return slot - i + (i % 2 == 0 ? i / 2 : i / 2 + rope.n_rot / 2);
}

// The q/k/v tail on row r's value v (MatvecInput::tail), as qkv_tail_kernel
// does it after the product: the bias, q's and k's rotation with the pair's
// other value (slot ^ 1: the next quarter of the warp, or the next warp of
// the block; cs its cosine and sine), the K/V store into the cache. v's own
// output keeps the product's value, as the tail leaves it. Every thread of
// the block calls it (a warp a row: a barrier); lane s == 0 of a row writes.
template <int kLanes>
__device__ __forceinline__ void fold_qkv_tail(const QkvTailArgs& a, int ti, const MatvecTask& t, int slot, int r, float v,
                                              float2 cs, int s) {
  const bool valid = r < t.w.n_rows;
  const float* bias = ti == 0 ? a.bq : ti == 1 ? a.bk : a.bv;
  float x = v;
  if (bias != nullptr && valid) x += bias[r];
  float pair;
  if constexpr (kLanes == kWarp) {
    __shared__ float vals[kWarpsPerBlock];
    if (threadIdx.x % kWarp == 0) vals[threadIdx.x / kWarp] = x;
    __syncthreads();
    pair = vals[(threadIdx.x / kWarp) ^ 1];
  } else {
    pair = __shfl_xor_sync(0xffffffffu, x, kLanes);
  }
  if (s != 0 || !valid) return;
  const int i = slot % a.rope.head_dim;
  if (ti < 2 && i < a.rope.n_rot) x = i % 2 == 0 ? rope_first(x, pair, cs) : rope_second(pair, x, cs);
  t.y[r] = ti == 2 ? v : x;
  if (ti == 0) return;
  const int cell = a.kv_cells[0];
  store_cache(ti == 1 ? a.k_cache : a.v_cache, a.cache_f16, static_cast<size_t>(cell) * t.w.n_rows + r, x);
  if (ti == 1 && r == 0) a.cell_pos[cell] = a.positions[0];
}

// The norm prologue's shared memory: Q8 values [k], Q8 scales [k/32], the
// blocks' sums of squares [k/32], and (float weights only) f32 values [k].
struct NormSmem {
  size_t xq, xds, sums, xf, total;
  __host__ __device__ NormSmem(int k, bool f32) {
    const size_t nb = static_cast<size_t>(k) / 32;
    xq = 0;
    xds = static_cast<size_t>(k);  // k % 32 == 0: 16-byte aligned
    sums = xds + nb * sizeof(float2);
    xf = (sums + nb * sizeof(float) + 15) / 16 * 16;
    total = f32 ? xf + static_cast<size_t>(k) * sizeof(float) : xf;
  }
};

// Weight types whose dots read f32 activations (kType < 0: mixed, maybe).
constexpr bool reads_f32(int kType) {
  return kType < 0 || kType == static_cast<int>(WType::kF32) || kType == static_cast<int>(WType::kF16) ||
         kType == static_cast<int>(WType::kBF16);
}

// The norm prologue (decode): RMS-normalise norm_x with norm_w into shared
// memory, as Q8 blocks (and f32 when kF32), with the norm kernel's code and
// bits (rms_norm_quads). All threads of the block must call it.
template <bool kF32>
__device__ DotInput norm_prologue(const float* x, const float* w, float eps, int k, unsigned char* smem) {
  const NormSmem l(k, kF32);
  int8_t* xq = reinterpret_cast<int8_t*>(smem + l.xq);
  float2* xds = reinterpret_cast<float2*>(smem + l.xds);
  float* xf = kF32 ? reinterpret_cast<float*>(smem + l.xf) : nullptr;
  rms_norm_quads(x, w, k, eps, reinterpret_cast<float*>(smem + l.sums), xf, nullptr, xq, xds);
  return DotInput{xf, xq, xds};
}

// The deferred prologue (MatvecInput::norm_deferred; quantized weights): the
// deferred form of norm_x into shared memory, its block sums of squares
// where norm_prologue keeps its sums; the kernel takes the scale from them
// last (deferred_scale).
__device__ __forceinline__ DotInput deferred_prologue(const float* x, const float* w, int k, unsigned char* smem) {
  const NormSmem l(k, false);
  int8_t* xq = reinterpret_cast<int8_t*>(smem + l.xq);
  float2* xds = reinterpret_cast<float2*>(smem + l.xds);
  deferred_norm_quads(x, w, k, xq, xds, reinterpret_cast<float*>(smem + l.sums));
  return DotInput{nullptr, xq, xds};
}

// A deferred-norm kernel's scale: from the prologue's block sums (folded,
// the norm weights set), else the one launch_rms_norm_deferred wrote
// (`given`, read at the kernel's start so that its load is long done). Every
// lane of the warp calls it.
__device__ __forceinline__ float deferred_scale(bool folded, float given, int k, float eps, const unsigned char* smem) {
  if (!folded) return given;
  return norm_scale(reinterpret_cast<const float*>(smem + NormSmem(k, false).sums), k, eps, static_cast<int>(threadIdx.x) % kWarp);
}

// kLanes lanes a row: 32 (a warp, row_dot_k) or kQuarter (four rows a warp,
// quarter_dot; quantized types, one type a launch). The same bits either way.
template <int kLanes>
constexpr int kRowsPerBlock = kWarpsPerBlock * (kWarp / kLanes);

// kDefer: the kernel that takes the deferred norm (MatvecInput::defer_scale,
// norm_deferred); a kernel of its own, so that the plain ones keep their
// register allocation (with the deferred code in every kernel behind a
// run-time test, ptxas gave them other registers and spills: 7B ffn_down
// Q6_K 23.3 → 27.8 µs a launch, H200, 2026-12-01).
//
// kPreload: rows of at most kQuarterPreloadUnits units a quarter a row
// (schedule 2) whose weights go into registers before the PDL wait
// (quarter_load), not only into L2, so that the dot products start as soon
// as the input is there. Its own kernel too (4 units a lane held through the
// wait: 72 registers for Q8_0 instead of 56), for launches of one wave. On
// the H200 (CUPTI timeline, 2026-12-01): 0.5B attn_output 2.76 → 1.69 µs a
// layer, q/k/v 4.35 → 3.05; tg128 0.5B Q8_0 1,530 vs 1,459 tok/s.
//
// kLastType: the last task's weight type when it differs from the others'
// (kTwoTypes below); blocks are one task's, so each block runs one type's
// code. Its registers are held to what kTwoTypeMinBlocks blocks an SM leave,
// so that 7B Q4_K_M's q/k/v launch (1,152 blocks) runs in one wave: at the 64
// registers ptxas chose (8 blocks an SM, 1,056 resident) the Q6_K v rows,
// last, ran in a second one, 7.05 µs a layer against 4.45 for the Q4_K-only
// launch of the other layers; at 56 (12 bytes of spill) 5.75 (CUPTI, H200,
// 2026-12-02, bench/results/2026-12-02-h200-session17).
constexpr int kTwoTypeMinBlocks = 9;  // 56 registers a thread
//
// kTail: the kernel that takes the q/k/v tail (MatvecInput::tail; with the
// deferred norm, as every q/k/v launch of the quantized models has it). Its
// own kernel too: behind a run-time test in every kernel, ptxas moved the
// registers of 68 of them (tests/gpu/register_diff.sh, 2026-12-03).
template <int kType, int kSched, int kLanes, bool kDefer, bool kPreload = false, int kLastType = kType, bool kTail = false>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarp, kLastType != kType ? kTwoTypeMinBlocks : 0) matvec_kernel(MatvecBatch b) {
  static_assert(!kTail || kDefer, "the q/k/v tail rides on the deferred-norm kernels");
  extern __shared__ __align__(16) unsigned char matvec_smem[];
  // Pick the task with constant indices: indexing the parameter array with a
  // run-time index would copy it to local memory.
  const int blk = static_cast<int>(blockIdx.x);
  const int ti = (b.n_tasks > 2 && blk >= b.block_begin[2]) ? 2 : (b.n_tasks > 1 && blk >= b.block_begin[1]) ? 1 : 0;
  const MatvecTask& t = ti == 2 ? b.t[2] : ti == 1 ? b.t[1] : b.t[0];
  const int begin = ti == 2 ? b.block_begin[2] : ti == 1 ? b.block_begin[1] : 0;
  const int lane = threadIdx.x % kWarp, s = lane % kLanes;
  const int in_block = static_cast<int>(threadIdx.x) / kWarp * (kWarp / kLanes) + lane / kLanes;  // the row slot's
  const int warp_row = (blk - begin) * kRowsPerBlock<kLanes> + static_cast<int>(threadIdx.x) / kWarp * (kWarp / kLanes);
  const int slot = warp_row + lane / kLanes;
  const int r = kTail ? tail_row(slot, ti, b.tail.rope) : slot;
  // The tail's rotation, before the wait (the position is uploaded before
  // the step), kept in shared memory rather than in registers through the dot.
  __shared__ float2 tail_cs[kTail ? kRowsPerBlock<kLanes> : 1];
  if (kTail && s == 0 && ti < 2) tail_cs[in_block] = rope_cos_sin(slot % b.tail.rope.head_dim / 2, b.tail.positions[0], b.tail.rope);
  constexpr bool kPreloaded = kPreload && kType >= 0 && kHasRaw<static_cast<WType>(kType)> && (kLanes == kWarp || kSched == 2);
  constexpr WType kRawType = kPreloaded ? static_cast<WType>(kType) : WType::kQ8_0;  // any type with a Raw
  QuarterRaw<kRawType> quarter_pre;
  WarpRaw<kRawType> warp_pre;
  if constexpr (kPreloaded && kLanes == kQuarter) {
    if (r < t.w.n_rows) quarter_pre = quarter_load<kRawType>(t.w, r, s);
  } else if constexpr (kPreloaded) {
    if (r < t.w.n_rows) {
      warp_pre = warp_load<kRawType>(t.w, r, lane);
      // The rest of a longer row into L2.
      if (t.w.k / Unit<kRawType>::kElems > kWarp * kWarpPreloadUnits<kRawType>) prefetch_row(t.w, r, s, kLanes);
    }
  } else {
    if (r < t.w.n_rows) prefetch_row(t.w, r, s, kLanes);
  }
  if (b.norm_w != nullptr) norm_quads_prefetch_weights(b.norm_w, b.k);
  pdl_begin();
  const float given = kDefer && b.defer_scale != nullptr ? *b.defer_scale : 0.0f;  // the deferred norm's scale
  DotInput in = b.in;
  if (kDefer && b.norm_w != nullptr) in = deferred_prologue(b.norm_x, b.norm_w, b.k, matvec_smem);
  else if (b.norm_w != nullptr) in = norm_prologue<reads_f32(kType)>(b.norm_x, b.norm_w, b.norm_eps, b.k, matvec_smem);
  // The whole warp (its shuffles need every lane); with the q/k/v tail every
  // warp stays for its barrier.
  if (warp_row >= t.w.n_rows && b.tail_norm_w == nullptr && !kTail) return;
  [[maybe_unused]] float tail_v = 0.0f;
  if (warp_row < t.w.n_rows) {
    auto dot = [&](auto type) {
      [[maybe_unused]] constexpr int T = decltype(type)::value;
      if constexpr (kLanes == kWarp && kPreloaded) return row_dot_preloaded<kRawType, kSched>(warp_pre, t.w, r, in, lane);
      else if constexpr (kLanes == kWarp) return row_dot_k<T, kSched>(t.w, r, in, lane);
      else if constexpr (kPreloaded) return quarter_dot_loaded(quarter_pre, t.w, r < t.w.n_rows, in, s);
      else return quarter_dot<T, kSched>(t.w, r, r < t.w.n_rows, in, s);
    };
    float v;
    if constexpr (kLastType != kType) {
      static_assert(!kPreloaded, "one type's preload");
      v = ti == b.n_tasks - 1 ? dot(std::integral_constant<int, kLastType>{}) : dot(std::integral_constant<int, kType>{});
    } else {
      v = dot(std::integral_constant<int, kType>{});
    }
    if constexpr (kDefer) v = __fmul_rn(v, deferred_scale(b.norm_w != nullptr, given, b.k, b.norm_eps, matvec_smem));
    if constexpr (kTail) tail_v = v;
    if (!kTail && s == 0 && r < t.w.n_rows) {
      if (t.bias != nullptr) v += t.bias[r];
      const float out = t.accumulate ? t.y[r] + v : v;
      t.y[r] = out;
      if (t.argmax != nullptr) argmax_fold(t.argmax, argmax_pack(out, r));
      if (b.tail_norm_w != nullptr) __threadfence();  // y[r] visible before this block counts itself
    }
  }
  if constexpr (kTail) fold_qkv_tail<kLanes>(b.tail, ti, t, slot, r, tail_v, ti < 2 && s == 0 ? tail_cs[in_block] : float2{}, s);
  if (b.tail_norm_w != nullptr) matvec_tail_norm(b, t.y, t.w.n_rows, matvec_smem);
}

// Gate and up rows share an output index: one warp (or quarter, kLanes)
// per row computes both dots in one pass (row_dot_pair, quarter_dot_pair),
// 32 rows per block, so the block also writes the Q8 block of h that the
// down projection reads (no extra launch). 32 lanes a row: 16 warps of 2
// rows; 512 threads leave ptxas 128 registers a thread (a 1024-thread block
// caps it at 64 and spills the K-quant dots). A quarter a row: 8 warps of 4.
// Tried on the H200 (2026-12-01): 32 warps of one row each (1024 threads, the
// same 64 registers as two resident blocks of 512, and half as long a last
// partial wave) lost — 7B gate/up Q4_K 34.3 vs 30.0 µs a launch, Q8_0 51.7 vs
// 49.5; tg128 7B Q4_K_M 383 vs 406 tok/s, Q8_0 304 vs 317: a warp's second
// row keeps more bytes in flight than the shorter wave saves.
constexpr int kGateUpRows = 32;
template <int kLanes>
constexpr int kGateUpThreads = kLanes == kWarp ? 512 : 256;

// kDefer: as matvec_kernel's (the deferred norm, a kernel of its own).
// kPreload (a quarter a row, rows of at most kQuarterPreloadUnits units):
// both rows' weights go into registers before the PDL wait, as
// matvec_kernel's kPreload; the same bits as quarter_dot_pair's schedule 0.
template <int kType, int kMinBlocks, int kSched, int kLanes, bool kDefer, bool kPreload = false>
__global__ void __launch_bounds__(kGateUpThreads<kLanes>, kMinBlocks)
    gate_up_kernel(DeviceWeight gate, DeviceWeight up, DotInput in_global, const float* norm_x, const float* norm_w,
                   float norm_eps, const float* defer_scale, float* h, int8_t* hq, float2* hds) {
  extern __shared__ __align__(16) unsigned char gate_up_smem[];
  constexpr int kWarps = kGateUpThreads<kLanes> / kWarp;
  constexpr int kRowsPerWarp = kGateUpRows / kWarps;  // 2 (rows one after the other) or 4 (a quarter each)
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, s = lane % kLanes;
  const int first_row = blockIdx.x * kGateUpRows + warp * kRowsPerWarp + (kLanes == kWarp ? 0 : lane / kLanes);
  constexpr int kOwnRows = kLanes == kWarp ? kRowsPerWarp : 1;  // rows of this lane's warp or quarter
  constexpr bool kPreloaded = kPreload && kLanes == kQuarter && kType >= 0 && kHasRaw<static_cast<WType>(kType)>;
  constexpr WType kRawType = kPreloaded ? static_cast<WType>(kType) : WType::kQ8_0;  // any type with a Raw
  QuarterRaw<kRawType> pre_gate, pre_up;
  if constexpr (kPreloaded) {
    pre_gate = quarter_load<kRawType>(gate, first_row, s);
    pre_up = quarter_load<kRawType>(up, first_row, s);
  } else {
#pragma unroll
    for (int i = 0; i < kOwnRows; ++i) {
      prefetch_row(gate, first_row + i, s, kLanes);
      prefetch_row(up, first_row + i, s, kLanes);
    }
  }
  if (norm_w != nullptr) norm_quads_prefetch_weights(norm_w, gate.k);
  pdl_begin();
  const float given = kDefer && defer_scale != nullptr ? *defer_scale : 0.0f;  // the deferred norm's scale
  DotInput in = in_global;
  if (kDefer && norm_w != nullptr) in = deferred_prologue(norm_x, norm_w, gate.k, gate_up_smem);
  else if (norm_w != nullptr) in = norm_prologue<reads_f32(kType)>(norm_x, norm_w, norm_eps, gate.k, gate_up_smem);
  __shared__ float out[kGateUpRows];
  // Both rows' dots before any store: a store to h could alias the
  // activations, which would keep the second row's loads from being issued
  // with the first's.
  float2 gu[kOwnRows];
#pragma unroll
  for (int i = 0; i < kOwnRows; ++i) {
    if constexpr (kLanes == kWarp) {
      gu[i] = row_dot_pair_k<kType, kSched>(gate, up, first_row + i, in, lane);
    } else if constexpr (kPreloaded) {
      gu[i] = make_float2(quarter_dot_loaded(pre_gate, gate, true, in, s), quarter_dot_loaded(pre_up, up, true, in, s));
    } else {
      gu[i] = quarter_dot_pair<kType, kSched>(gate, up, first_row + i, true, in, s);
    }
  }
  if constexpr (kDefer) {
    const float scale = deferred_scale(norm_w != nullptr, given, gate.k, norm_eps, gate_up_smem);
#pragma unroll
    for (int i = 0; i < kOwnRows; ++i) gu[i] = make_float2(__fmul_rn(gu[i].x, scale), __fmul_rn(gu[i].y, scale));
  }
#pragma unroll
  for (int i = 0; i < kOwnRows; ++i) {
    if (s == 0) {
      const float v = silu(gu[i].x) * gu[i].y;
      out[first_row + i - blockIdx.x * kGateUpRows] = v;
      h[first_row + i] = v;
    }
  }
  __syncthreads();
  if (warp == 0 && hq != nullptr) quantize_block_q8(out[lane], lane, blockIdx.x, hq, hds);
}

// Lanes a row (kLanes above): the one set_matvec_lanes forces, else a
// quarter-warp for rows of fewer units than a warp has lanes, a warp for the
// rest (quantized types; float types always take a warp). On the H200
// (tests/gpu/matvec_bench.cpp, bench/results/2026-12-01-h200-session6; µs a
// launch, a warp vs a quarter a row): rows of 28 units (0.5B, k = 896) win —
// output head Q8_0 57.5 vs 40.6, gate/up 6.2 vs 4.9, q/k/v 4.0 vs 3.0 — as a
// warp a row leaves 4 lanes idle and the block scheduler hands out four times
// the blocks; rows of 56 units come out within a few percent either way (7B
// gate/up Q4_K 30.1 vs 30.7, q/k/v 9.0 vs 9.0, output head Q6_K 143.6 vs
// 139.4), and long rows lose badly, having a quarter of the warps (7B
// ffn_down Q4_K 21.8 vs 36.9, 0.5B ffn_down Q8_0 3.8 vs 7.4). 0.5B
// attn_output (896 rows: 56 blocks of 16 for 132 SMs) took 2.9 µs of a layer
// against 1.7 with a warp a row (CUPTI timelines of sessions 6 and 5); alone
// it is 3.0 vs 3.7 µs (kernel bench), and with its weights loaded before the
// PDL wait (kPreload) 1.7 in a step.
template <int kType>
constexpr bool kQuarterable = kType >= 0 && kType != static_cast<int>(WType::kF32) && kType != static_cast<int>(WType::kF16) &&
                              kType != static_cast<int>(WType::kBF16);
template <int kType>
int lanes_for(int k) {
  if constexpr (!kQuarterable<kType>) {
    return kWarp;
  } else {
    const int forced = matvec_lanes();
    if (forced == kQuarter || forced == kWarp) return forced;
    return k / Unit<static_cast<WType>(kType)>::kElems < kWarp ? kQuarter : kWarp;
  }
}

// The load schedule (row_dot_t in dot.cuh) of a launch: the one
// set_matvec_schedule forces, else what measured fastest for the kernel, the
// type and the units a lane has (tests/gpu/matvec_bench.cpp on the H200,
// bench/results/2026-11-30-h200-session4; µs a launch with schedules 0 / 1 / 2):
//  - gate/up, whenever every lane has a unit: groups (7B Q4_K 39.1 / 29.7 /
//    29.8, Q8_0 56.1 / 51.1 / 55.1).
//  - matvec, Q4_K and Q5_K: one unit at a time, whose unrolled loop already
//    issues four units' loads together on long rows (7B ffn_down Q4_K 21.2 /
//    22.6 / 23.1, attn_output 4.9 / 5.2 / 6.6; session 6, after the unit's
//    instructions were cut).
//  - matvec, Q6_K: one unit at a time under four units a lane (7B output
//    head 148 / 151 / 189), double groups from there (7B ffn_down 25.4 /
//    28.1 / 23.2).
//  - matvec, other types: groups once a lane has 3 units (7B q/k/v Q8_0
//    8.8 / 6.9 / 8.7), double groups from 16 (7B ffn_down Q8_0 32.5 / 26.7 /
//    26.2); fewer units a lane would make most of a group's loads repeats of
//    the last unit (0.5B output head Q8_0, under one a lane: 57 / 75 / 115).
//  - a quarter a row (lanes == kQuarter; rows of under 32 units by default):
//    gate/up one unit at a time (0.5B Q8_0 4.9 / 6.1 / 6.7), matvec groups of
//    4 (0.5B q/k/v 4.2 / 3.6 / 3.0; output head 40.6 / 40.6 / 41.7).
template <int kType>
int schedule_for(bool gate_up, int k, int lanes) {
  const int forced = matvec_schedule();
  if (forced >= 0) return forced;
  constexpr WType T = static_cast<WType>(kType);
  if constexpr (kType < 0) {
    return 0;
  } else {
    if (lanes == kQuarter) return gate_up ? 0 : 2;
    const int per_lane = k / Unit<T>::kElems / kWarp;
    if (gate_up) return per_lane >= 1 ? 1 : 0;
    if constexpr (T == WType::kQ4_K || T == WType::kQ5_K) return 0;
    if constexpr (T == WType::kQ6_K) return per_lane < 4 ? 0 : 2;
    return per_lane >= 16 ? 2 : per_lane >= 3 ? 1 : 0;
  }
}

// Blocks of `kernel` (with `threads` and `smem` bytes of dynamic shared
// memory, under the default limit) the device holds at once.
int resident_blocks(void (*kernel)(MatvecBatch), int threads, size_t smem) {
  return blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, smem, 0) * device_limits().sms;
}

}  // namespace

// A kernel of matvec_kernel's family launched over batch b.
template <class Kernel>
cudaError_t launch_matvec_kernel(Kernel kernel, const MatvecBatch& b, int blocks, size_t smem, cudaStream_t stream) {
  return launch_kernel(kernel, dim3(blocks), dim3(kWarpsPerBlock * kWarp), smem, stream, b);
}

// A kernel of gate_up_kernel's family launched over these weights.
template <class Kernel>
cudaError_t launch_gate_up_kernel(Kernel kernel, int threads, const DeviceWeight& gate, const DeviceWeight& up,
                                  const MatvecInput& in, const DotInput& din, float* h, Q8Rows hq, size_t smem,
                                  cudaStream_t stream) {
  return launch_kernel(kernel, dim3(gate.n_rows / kGateUpRows), dim3(threads), smem, stream, gate, up, din, in.norm_x, in.norm_w,
                       in.norm_eps, in.defer_scale, h, hq.q, static_cast<float2*>(hq.ds));
}

template <int T>
cudaError_t launch_matvec_typed(const MatvecBatch& b, int blocks, size_t smem, int lanes, bool defer, cudaStream_t stream) {
  // Deferred-norm launches (quantized weights only: checked by the caller)
  // take the kDefer kernels; with the q/k/v tail, the kTail ones, which
  // exist for the shapes the q/k/v launches of the quantized models take
  // (pick_tail: a quarter a row with schedule 2, a warp with schedule 0);
  // any other launch with the tail launches nothing (cudaErrorNotSupported).
  const bool tail = b.tail.q != nullptr;
  auto pick = [&](auto plain, auto deferred) {
    return tail ? cudaErrorNotSupported : launch_matvec_kernel(defer ? deferred : plain, b, blocks, smem, stream);
  };
  auto pick_tail = [&](auto plain, auto deferred, auto tailed) {
    if (!tail) return pick(plain, deferred);
    return defer ? launch_matvec_kernel(tailed, b, blocks, smem, stream) : cudaErrorNotSupported;
  };
  constexpr bool D = kQuarterable<T>;  // a type the deferred norm takes
  const int sched = schedule_for<T>(false, b.k, lanes);
  if constexpr (kQuarterable<T>) {
    if constexpr (kHasRaw<static_cast<WType>(T)>) {
      // One block an SM at most (surely one wave): weights preloaded.
      if (lanes == kQuarter && sched == 2 && b.k / Unit<static_cast<WType>(T)>::kElems <= kQuarterPreloadUnits &&
          blocks <= device_limits().sms && matvec_preload()) {
        return pick_tail(matvec_kernel<T, 2, kQuarter, false, true>, matvec_kernel<T, 2, kQuarter, D, true>,
                         matvec_kernel<T, 2, kQuarter, true, true, T, true>);
      }
    }
    if (lanes == kQuarter) {
      return sched == 2   ? pick_tail(matvec_kernel<T, 2, kQuarter, false>, matvec_kernel<T, 2, kQuarter, D>,
                                      matvec_kernel<T, 2, kQuarter, true, false, T, true>)
             : sched == 1 ? pick(matvec_kernel<T, 1, kQuarter, false>, matvec_kernel<T, 1, kQuarter, D>)
                          : pick(matvec_kernel<T, 0, kQuarter, false>, matvec_kernel<T, 0, kQuarter, D>);
    }
  }
  if constexpr (kHasRaw<static_cast<WType>(T)>) {
    // A warp a row: its first units preloaded when every block of the
    // launch is resident at once (else the later ones gain nothing).
    if (lanes == kWarp && matvec_preload()) {
      auto preloaded = [&](auto plain, auto deferred) {
        const bool one_wave = blocks <= resident_blocks(defer ? deferred : plain, kWarpsPerBlock * kWarp, smem);
        return one_wave ? pick(plain, deferred) : cudaErrorNotSupported;
      };
      const cudaError_t st =
          sched == 2   ? preloaded(matvec_kernel<T, 2, kWarp, false, true>, matvec_kernel<T, 2, kWarp, D, true>)
          : sched == 1 ? preloaded(matvec_kernel<T, 1, kWarp, false, true>, matvec_kernel<T, 1, kWarp, D, true>)
                       : preloaded(matvec_kernel<T, 0, kWarp, false, true>, matvec_kernel<T, 0, kWarp, D, true>);
      if (st != cudaErrorNotSupported) return st;
    }
  }
  if constexpr (kQuarterable<T>) {
    if (sched == 0) {
      return pick_tail(matvec_kernel<T, 0, kWarp, false>, matvec_kernel<T, 0, kWarp, D>,
                       matvec_kernel<T, 0, kWarp, true, false, T, true>);
    }
  }
  return sched == 2   ? pick(matvec_kernel<T, 2, kWarp, false>, matvec_kernel<T, 2, kWarp, D>)
         : sched == 1 ? pick(matvec_kernel<T, 1, kWarp, false>, matvec_kernel<T, 1, kWarp, D>)
                      : pick(matvec_kernel<T, 0, kWarp, false>, matvec_kernel<T, 0, kWarp, D>);
}

template <int T>
cudaError_t launch_gate_up_typed(const DeviceWeight& gate, const DeviceWeight& up, const MatvecInput& in, const DotInput& din,
                                 float* h, Q8Rows hq, size_t smem, bool defer, cudaStream_t stream) {
  float2* hds = static_cast<float2*>(hq.ds);
  auto pick = [&](auto plain, auto deferred, int threads) {
    return launch_gate_up_kernel(defer ? deferred : plain, threads, gate, up, in, din, h, hq, smem, stream);
  };
  constexpr bool D = kQuarterable<T>;  // a type the deferred norm takes
  const int lanes = lanes_for<T>(gate.k);
  const int sched = schedule_for<T>(true, gate.k, lanes);
  if constexpr (kQuarterable<T>) {
    if (lanes == kQuarter) {
      constexpr int kThreads = kGateUpThreads<kQuarter>;
      if constexpr (T == static_cast<int>(WType::kQ8_0) || T == static_cast<int>(WType::kQ4_K)) {
        // Rows of one group of units a lane: weights preloaded. Two
        // blocks an SM (kMinBlocks) make every block of a launch of up to
        // twice the SMs resident at once, so each has its weights when
        // the input comes. (Q5_K's and Q6_K's units would spill 264-480
        // bytes under the 128 registers that leaves.)
        if (gate.k / Unit<static_cast<WType>(T)>::kElems <= kQuarterPreloadUnits &&
            gate.n_rows / kGateUpRows <= 2 * device_limits().sms && matvec_preload()) {
          return pick(gate_up_kernel<T, 2, 0, kQuarter, false, true>, gate_up_kernel<T, 2, 0, kQuarter, D, true>,
                      kThreads);
        }
      }
      return sched == 2   ? pick(gate_up_kernel<T, 1, 2, kQuarter, false>, gate_up_kernel<T, 1, 2, kQuarter, D>, kThreads)
             : sched == 1 ? pick(gate_up_kernel<T, 1, 1, kQuarter, false>, gate_up_kernel<T, 1, 1, kQuarter, D>, kThreads)
                          : pick(gate_up_kernel<T, 1, 0, kQuarter, false>, gate_up_kernel<T, 1, 0, kQuarter, D>, kThreads);
    }
  }
  // A warp a row without the norm prologue: pipelined where it applies
  // (matvec_piped.cu).
  if (in.norm_w == nullptr) {
    const cudaError_t st = launch_gate_up_piped(gate, up, din, in.defer_scale, h, hq.q, hds, stream);
    if (st != cudaErrorNotSupported) return st;
  }
  // Two resident 512-thread blocks an SM need at most 64 registers a thread:
  // the legacy blocks and the float types fit (Q8_0 and Q5_0 spill a few
  // bytes). Q4_K needs 90 for one block an SM; capped at 64 it spills 148
  // bytes and still wins on the H200 (7B Q4_K_M tg128 279 vs 273 tok/s, same
  // run, 2026-11-30). Q5_K and Q6_K would spill far more: one block.
  constexpr bool one_block = T < 0 || T == static_cast<int>(WType::kQ5_K) || T == static_cast<int>(WType::kQ6_K);
  constexpr int B = one_block ? 1 : 2;
  constexpr int kThreads = kGateUpThreads<kWarp>;
  return sched == 2   ? pick(gate_up_kernel<T, B, 2, kWarp, false>, gate_up_kernel<T, B, 2, kWarp, D>, kThreads)
         : sched == 1 ? pick(gate_up_kernel<T, B, 1, kWarp, false>, gate_up_kernel<T, B, 1, kWarp, D>, kThreads)
                      : pick(gate_up_kernel<T, B, 0, kWarp, false>, gate_up_kernel<T, B, 0, kWarp, D>, kThreads);
}

// Launches of weights of several types (matvec: tasks of different types
// without a two-type kernel; gate/up: gate and up of different types) on the
// kernels that read each unit's type at run time. Defined in
// matvec_types_f32_f16.cu, with the other run-time-typed kernels.
cudaError_t launch_matvec_mixed(const MatvecBatch& b, int blocks, size_t smem, bool defer, cudaStream_t stream);
cudaError_t launch_gate_up_mixed(const DeviceWeight& gate, const DeviceWeight& up, const MatvecInput& in, const DotInput& din,
                                 float* h, Q8Rows hq, size_t smem, bool defer, cudaStream_t stream);

// The two launchers' explicit instantiations (in matvec_types_*.cu) and
// their declarations (matvec.cu): T a WType's value, or -1.
#define MINFER_MATVEC_TYPED(prefix, T)                                                                                      \
  prefix template cudaError_t launch_matvec_typed<T>(const MatvecBatch&, int, size_t, int, bool, cudaStream_t);           \
  prefix template cudaError_t launch_gate_up_typed<T>(const DeviceWeight&, const DeviceWeight&, const MatvecInput&,       \
                                                      const DotInput&, float*, Q8Rows, size_t, bool, cudaStream_t)

}  // namespace minfer::kernels

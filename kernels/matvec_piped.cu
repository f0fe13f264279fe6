// Decode matvecs and gate/up + SwiGLU with each lane's weights pipelined
// through shared memory (sm_80 and later).
//
// The plain kernels (matvec_kernels.cuh) hold a lane's weights in registers from load
// to use, so a warp loads a unit, waits, computes, and only then loads the
// next: with 64 registers a thread (two blocks of 512 an SM) little else
// fits. On the H200 (7B gate/up Q4_K, Nsight Compute) that issues 0.6
// instructions a cycle a scheduler, stalled on those loads, at 60% of the
// copy bandwidth; and gate/up's 592 blocks of 32 rows make 2.24 waves of the
// 264 resident, the last 11% of the rows costing 19% of the time
// (tests/gpu/matvec_bench.cpp "2 waves").
//
// Here each lane's weights go through slots of its own in shared memory,
// `stages` steps ahead of the one it computes (pipe.cuh): one block of 32
// warps an SM, rows shared out so that warps differ by at most one; the
// same sums as the plain kernels, the same bits.
//
// Types with Unit::Raw (Q8_0, Q4_K, Q5_K, Q6_K), rows of at least 32 units,
// one type a launch, without the norm prologue or the tail norm (with the
// deferred norm's scale); gate/up takes Q8_0 and Q4_K. As many stages as
// the shared memory left by the staged activations holds, at least 2 and up
// to kDefaultPipedStages (set_piped_stages: another limit, up to 8), all of
// them issued before the PDL wait unless set_piped_early says fewer. By
// default only launches of at least 16 MiB of weights (kPipedMinBytes).
// Every other launch takes matvec.cu's kernels.
#include <algorithm>
#include <atomic>

#include "kernels/dot.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matvec_piped.cuh"
#include "kernels/pipe.cuh"

namespace minfer::kernels {
namespace {

using namespace piped;  // NOLINT(google-build-using-namespace): this file's machinery

std::atomic<int> g_gate_up_piped{-1};
std::atomic<int> g_matvec_piped{-1};
std::atomic<int> g_piped_stages_cap{0};
std::atomic<int> g_piped_early{0};
std::atomic<int> g_last_piped_stages{0};
std::atomic<uint64_t> g_piped_launches{0};
__device__ unsigned long long* g_gate_up_probe = nullptr;  // set_gate_up_probe (kernels.h set_phase_probe)

// The least weight bytes a launch pipelines by default (mode -1). A block of
// 32 warps and most of the shared memory cannot start on an SM until the
// previous kernel's blocks there are gone, so the plain kernels' PDL overlap
// (their small blocks start early and load before the wait) is lost: on the H200
// (2026-12-01, same run) pipelining every eligible launch won on 7B's
// gate/up and ffn_down (kernel bench, µs: gate/up Q4_K 30.0 → 25.6, Q8_0
// 49.9 → 37.2; ffn_down Q4_K 21.2 → 17.5, Q6_K 24.0 → 21.8, Q8_0 28.4 →
// 20.5) and lost on the short launches of a decode step (7B attn_output
// Q4_K 4.2 → 5.7, output head Q6_K 147 → 158; tg128 0.5B Q8_0 1,858 →
// 1,820 tok/s, 1.5B Q4_K_M 1,003 → 976, 7B Q4_K_M 469 → 461 against gate/up
// alone). Since the activations are staged in shared memory (stage_acts)
// the five-piece types, with two stages, win too (kernel bench, H200,
// 2026-12-01: 7B ffn_down Q6_K 24.1 → 19.6 µs, output head Q6_K 148.5 →
// 133.1; tg128 7B Q4_K_M 474 → 489 tok/s with them pipelined), while
// attn_output still loses (Q4_K 4.1 → 4.5). 7B Q8_0's q/k/v (17.5 MB) just
// clears the bar, and pipelined it wins (tg128 403 vs 396 tok/s on the
// plain kernel; H200, 2026-12-01, same run, both arms with the late trigger
// attention_decode.cu records).
constexpr size_t kPipedMinBytes = size_t{16} << 20;
// (Tried on the H200, 2026-12-02, not kept: rows of 16-31 units pipelined
// too, one partial step a row, so that the output heads of 0.5B (Q8_0, 896
// wide: 28 units) and 1.5B (Q6_K, 1,536: 24) would take these kernels. The
// kernel bench had them ahead (0.5B head 39.2 vs 41.5 µs, 1.5B 63.6 vs
// 66.0), a greedy decode step not: CUPTI shares, same run, 0.5B Q8_0 46.8
// vs 47.6 µs, 1.5B Q4_K_M 80.9 vs 71.2; tg128 1,942 vs 1,941 and 1,030 vs
// 1,039 tok/s. bench/results/2026-12-02-h200-session22.)

// Gate/up: block c takes Q8 blocks of h [c n / G, (c + 1) n / G) — whole
// groups of 32 rows, so it quantizes its own, and SMs differ by at most one
// group; warp w the block's rows w, w + 32, ... kDefer: the deferred norm's
// scale, applied as the plain kernel applies it. Shared memory: the slots,
// the staged activations, the block's rows' gate and up sums, then its h.
// (Tried on the H200, 2026-12-01, not kept: rows shared out in halves of
// groups, a group split between two SMs quantized by the second to finish
// (an atomic count a group), so that 7B's 592 groups make 8-9 halves an SM
// instead of 4-5 groups: tg128 7B Q4_K_M 496 vs 495 tok/s, Q8_0 409 vs 408,
// same run. Tried again there on 2026-12-03, when the phase probe showed
// that inside a decode step an SM's rows take as long as it has groups —
// 14.3 µs on the SMs with five, 11.3 on those with four: the halves evened
// them out (12.7 and 11.3 µs, 9 halves or 8) and yet gate/up's share of the
// step grew, 22.1 → 23.4 µs a layer; tg128 7B Q4_K_M 569 vs 581, Q8_0 444 vs
// 442 (bench/results/2026-12-03-h200-session27, run2-tree.patch). Why is
// not established: the products after it kept their shares (ffn_down Q6_K
// 23.50 vs 23.44 µs, Q4_K 9.42 vs 9.40).)
template <int kType, bool kDefer>
__global__ void __launch_bounds__(kPipedWarps * kWarp, 1)
    gate_up_piped_kernel(DeviceWeight gate, DeviceWeight up, DotInput in, const float* defer_scale, float* h, int8_t* hq,
                         float2* hds, int stages, int early) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr WType T = static_cast<WType>(kType);
  extern __shared__ __align__(16) unsigned char piped_smem[];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int n_groups = gate.n_rows / 32;
  const int g0 = static_cast<int>(static_cast<long long>(blockIdx.x) * n_groups / gridDim.x);
  const int g1 = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * n_groups / gridDim.x);
  const int r0 = 32 * g0, n_rows = 32 * (g1 - g0);  // the block's rows
  const int ring_bytes = stages * StageLayout<kType, 2>::kBytes;  // a warp's
  unsigned char* acts = piped_smem + kPipedWarps * ring_bytes;
  float2* sums = reinterpret_cast<float2*>(acts + staged_bytes(gate.k));  // the block's rows' gate and up
  float* out = reinterpret_cast<float*>(sums + n_rows);                   // the block's h, for its Q8 blocks
  const int my_rows = (n_rows - warp + kPipedWarps - 1) / kPipedWarps;
  float scale = 0.0f;
  unsigned long long* probe = kPhaseProbes ? g_gate_up_probe : nullptr;
  const bool probing = probe != nullptr && threadIdx.x == 0;
  // Thread 0's clock, 32 bits (one register through the rows; each phase
  // added as it ends; no static shared memory: resident_shape sizes the
  // dynamic part).
  unsigned stamp = probing ? static_cast<unsigned>(clock()) : 0u;
  auto lap = [&](int field, bool rows = false) {
    const unsigned now = static_cast<unsigned>(clock());
    atomicAdd(probe + field, static_cast<unsigned long long>(now - stamp));
    if (rows) {  // the slowest block's rows; the rows of blocks with more groups than the fewest
      atomicMax(probe + 5, static_cast<unsigned long long>(now - stamp));
      if (g1 - g0 > n_groups / static_cast<int>(gridDim.x)) {
        atomicAdd(probe + 6, static_cast<unsigned long long>(now - stamp));
        atomicAdd(probe + 7, 1ull);
      }
    }
    stamp = now;
  };
  const auto phase = make_phase<T, 2>(
      my_rows, gate.k / Unit<T>::kElems, [&](int j) { return RowAt{0, r0 + warp + kPipedWarps * j}; },
      [&](int, int wi) -> const DeviceWeight& { return wi == 0 ? gate : up; });
  pipe_rows(
      phase, piped_smem + warp * ring_bytes, stages, early, lane,
      [&] {
        if (probing) lap(1);
        if (kDefer) scale = *defer_scale;
        const DotInput staged = stage_acts(in, gate.k, acts);
        if (probing) lap(2);
        return staged;
      },
      [&](int j, RowAt, const float (&gv)[2]) {
        if (lane == 0) sums[warp + kPipedWarps * j] = make_float2(gv[0], gv[1]);
      });
  if (probing) lap(3, true);
  __syncthreads();
  // SwiGLU once the rows are done, a row a thread, rather than by lane 0 of
  // each row's warp between its steps: its expf and division (~30 SASS
  // instructions) were issued for the whole warp once a row of two steps.
  for (int i = static_cast<int>(threadIdx.x); i < n_rows; i += kPipedWarps * kWarp) {
    float g = sums[i].x, v = sums[i].y;
    if constexpr (kDefer) {
      g = __fmul_rn(g, scale);
      v = __fmul_rn(v, scale);
    }
    const float hv = silu(g) * v;
    out[i] = hv;
    h[r0 + i] = hv;
  }
  __syncthreads();
  if (hq != nullptr) {
    for (int g = warp; g < g1 - g0; g += kPipedWarps) quantize_block_q8(out[32 * g + lane], lane, g0 + g, hq, hds);
  }
  if (probing) {
    lap(4);
    atomicAdd(probe, 1ull);
  }
#else
  __trap();  // launched only on sm_80 and later (device_limits().cc_major)
#endif
}

// Matvec: the tasks' rows one after the other; warp w of block b is warp
// gw = w G + b of the launch (G blocks) and takes rows gw, gw + W, ... (W
// warps in all), so that a launch of fewer rows than warps still spreads
// over every SM. Each row is written as the plain kernels write it (the deferred
// norm's scale, bias, residual, argmax). Shared memory: the slots, then the
// staged activations.
// (Tried on the H200, 2026-12-03, not kept: blocks of 28 warps, which 7B's
// 3,584 ffn_down rows fill (27-28 an SM, one a warp, where 32 leave 4-5
// idle) and which leave ptxas up to 72 registers (Q6_K 64 → 68). Kernel
// bench 7B ffn_down Q6_K 18.4 → 18.6 µs, Q4_K 12.1 → 11.9, output head
// 117.2 → 117.8, Q8_0 q/k/v 8.0 → 7.3; a decode step (CUPTI) 7B Q4_K_M
// 1,695.0 → 1,690.1 µs; tg128 7B Q4_K_M 585 / 586 vs 586 / 584 tok/s, Q8_0
// 441 / 437 vs 439 / 436 (bench/results/2026-12-03-h200-session28,
// run2-tree.patch).) Nor (H200, 2026-12-04, not kept) blocks of 16 warps on
// half an SM's shared memory, so that the next kernel's block (a block of 32
// warps holds all 65,536 registers) could start beside this one and load
// its first stages while this one ends: it did start early — ffn_down 25-27
// µs before gate/up ended — and shared DRAM with gate/up, which had two
// stages of 16 warps in flight instead of three of 32. Kernel bench 7B
// gate/up Q4_K 19.8 → 23.2 µs, Q8_0 34.2 → 37.9; a decode step (CUPTI) 7B
// Q4_K_M 1,699.2 → 2,109.1 µs; tg128 7B Q4_K_M 589 → 473 tok/s, Q8_0 443 →
// 386 (bench/results/2026-12-04-h200-session33, run2-tree.patch).
struct PipedBatch {
  MatvecTask t[kMaxMatvecTasks];
  int begin[kMaxMatvecTasks + 1];  // first row of each task; begin[n_tasks]: all rows
  int n_tasks;
  DotInput in;
  const float* defer_scale;  // kDefer
  int stages, early;
};

template <int kType, bool kDefer>
__global__ void __launch_bounds__(kPipedWarps * kWarp, 1) matvec_piped_kernel(PipedBatch b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr WType T = static_cast<WType>(kType);
  extern __shared__ __align__(16) unsigned char piped_smem[];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int gw = warp * gridDim.x + blockIdx.x, n_warps = gridDim.x * kPipedWarps;
  const int n_rows = b.begin[b.n_tasks];
  const int my_rows = gw < n_rows ? (n_rows - gw + n_warps - 1) / n_warps : 0;
  // Tasks by constant indices (a run-time index into the parameter would
  // copy it to local memory).
  auto task = [&](int ti) -> const MatvecTask& { return ti == 2 ? b.t[2] : ti == 1 ? b.t[1] : b.t[0]; };
  const int ring_bytes = b.stages * StageLayout<kType, 1>::kBytes;  // a warp's
  const int k = b.t[0].w.k;
  unsigned char* acts = piped_smem + kPipedWarps * ring_bytes;
  float scale = 0.0f;
  // The warp's best argmax key of the task it is on (lane 0), folded into the
  // task's argmax when the warp moves to another task and at its end, not a
  // row at a time: argmax_fold reads one word every SM contends for, and a
  // warp waits for that read before its next row — 36 rows a warp of an
  // output head. Once a warp (H200, 2026-12-02, CUPTI, same machine, twice
  // each): a greedy 7B decode step 1,935.8-1,936.8 → 1,926.3-1,926.4 µs on
  // Q4_K_M, 2,513.0-2,513.2 → 2,508.9-2,509.0 on Q8_0; a row at a time, a
  // pipelined 0.5B Q8_0 head (rows under 32 units, not pipelined by default)
  // had taken 67.7 µs of the step against the plain kernel's 45.7
  // (bench/results/2026-12-02-h200-session22). The largest key wins either
  // way: the same argmax.
  unsigned long long best = 0;
  int best_task = 0;
  const auto phase = make_phase<T, 1>(
      my_rows, k / Unit<T>::kElems,
      [&](int j) {
        const int g = gw + n_warps * j;
        const int ti = (b.n_tasks > 2 && g >= b.begin[2]) ? 2 : (b.n_tasks > 1 && g >= b.begin[1]) ? 1 : 0;
        return RowAt{ti, g - (ti == 2 ? b.begin[2] : ti == 1 ? b.begin[1] : 0)};
      },
      [&](int ti, int) -> const DeviceWeight& { return task(ti).w; });
  pipe_rows(
      phase, piped_smem + warp * ring_bytes, b.stages, b.early, lane,
      [&] {
        if (kDefer) scale = *b.defer_scale;
        return stage_acts<kChunkSums<kType>>(b.in, k, acts);
      },
      [&](int, RowAt at, const float (&sums)[1]) {
        if (lane != 0) return;
        const unsigned long long key = write_row<kDefer>(task(at.task), at.r, sums[0], scale);
        if (at.task != best_task) {
          if (best != 0) argmax_fold(task(best_task).argmax, best);
          best = 0;
          best_task = at.task;
        }
        best = max(best, key);
      });
  if (lane == 0 && best != 0) argmax_fold(task(best_task).argmax, best);
#else
  __trap();  // launched only on sm_80 and later (device_limits().cc_major)
#endif
}

}  // namespace

namespace piped {

// Up to 4 stages by default (kDefaultPipedStages): more bytes in flight did
// not make any product faster (H200, 2026-12-01, bench/results/
// 2026-12-01-h200-session15: tg128 7B Q4_K_M 501 / 500 / 500 tok/s with up
// to 4 / 8 / 2 stages, Q8_0 406 / 403 / 407), and 7B Q8_0's q/k/v, 4 steps
// a row and about a row a warp, lost with 6 (5.13 → 6.07 µs a layer): its
// whole work out before the wait slows the deferred norm ahead of it. Yet
// fewer steps before the wait lost more (set_piped_early 1 / 2: tg128 7B
// Q4_K_M 483 / 491, Q8_0 397 / 398; the norm 5.44 → 3.43 µs a launch but
// gate/up 36.06 → 38.48, q/k/v 5.70 → 7.66): the loads before the wait are
// worth the norm's time they cost.
// A block for every SM, though the one-block norm before gate/up holds an
// SM when gate/up launches (a pipelined block needs a whole SM, so one of
// gate/up's blocks starts ~5 µs late): on the H200 (2026-12-04, same build)
// grids of SMs - 1 and - 2 blocks left gate/up's share of a 7B Q4_K_M step at
// 20.67 vs 20.78 µs and tg128 at 590 vs 589 tok/s
// (bench/results/2026-12-04-h200-session33, run5-tree.patch).
ResidentShape resident_shape(const void* kernel, size_t stage_bytes, size_t fixed, int work, int max_blocks, size_t extra) {
  const DeviceLimits lim = device_limits();
  if (lim.sms == 0 || max_blocks < 1) return {};
  const int grid = std::min(max_blocks, lim.sms);
  const size_t rest = fixed + extra * static_cast<size_t>((work + grid - 1) / grid);
  const size_t max_smem = static_cast<size_t>(lim.max_smem);
  if (rest + 2 * stage_bytes > max_smem) return {};
  const int cap = g_piped_stages_cap.load(std::memory_order_relaxed);
  const int most = cap >= 2 ? std::min(cap, kMaxPipedStages) : kDefaultPipedStages;
  const int stages = static_cast<int>(std::min<size_t>(most, (max_smem - rest) / stage_bytes));
  const int early = g_piped_early.load(std::memory_order_relaxed);
  const size_t smem = rest + static_cast<size_t>(stages) * stage_bytes;
  if (blocks_per_sm(kernel, kPipedWarps * kWarp, smem, lim.max_smem) < 1) return {};
  return ResidentShape{grid, stages, early >= 1 ? std::min(early, stages) : stages, smem};
}

void note_piped_launch(int stages) {
  g_piped_launches.fetch_add(1, std::memory_order_relaxed);
  g_last_piped_stages.store(stages, std::memory_order_relaxed);
}

bool wanted(int mode, const DeviceWeight* w, int n) {
  if (mode >= 0) return mode == 1;
  size_t bytes = 0;
  for (int i = 0; i < n; ++i) {
    const PlaneSizes ps = plane_sizes(w[i].type, w[i].k);
    bytes += (ps.q_row + ps.qh_row + ps.meta_row + ps.d_row) * static_cast<size_t>(w[i].n_rows);
  }
  return bytes >= kPipedMinBytes;
}

}  // namespace piped

void set_gate_up_piped(int mode) { g_gate_up_piped.store(mode, std::memory_order_relaxed); }
int gate_up_piped() { return g_gate_up_piped.load(std::memory_order_relaxed); }
void set_matvec_piped(int mode) { g_matvec_piped.store(mode, std::memory_order_relaxed); }
int matvec_piped() { return g_matvec_piped.load(std::memory_order_relaxed); }
uint64_t piped_launches() { return g_piped_launches.load(std::memory_order_relaxed); }
void set_piped_stages(int max_stages) { g_piped_stages_cap.store(max_stages, std::memory_order_relaxed); }
void set_piped_early(int steps) { g_piped_early.store(steps, std::memory_order_relaxed); }
int last_piped_stages() { return g_last_piped_stages.load(std::memory_order_relaxed); }

cudaError_t launch_gate_up_piped(const DeviceWeight& gate, const DeviceWeight& up, const DotInput& in, const float* defer_scale,
                                 float* h, int8_t* hq, float2* hds, cudaStream_t stream, PipedCall call) {
  const DeviceWeight both[2] = {gate, up};
  if ((call != PipedCall::kFits && !wanted(gate_up_piped(), both, 2)) || gate.type != up.type || gate.k != up.k || gate.n_rows != up.n_rows ||
      gate.n_rows % 32 != 0 || !planes_aligned(up)) {
    return cudaErrorNotSupported;
  }
  return dispatch_wtype(gate.type, [&](auto type) -> cudaError_t {
    constexpr int T = decltype(type)::value;
    // (Two stages of two Q5_K or Q6_K weights do not fit on the H200.)
    if constexpr (T != static_cast<int>(WType::kQ8_0) && T != static_cast<int>(WType::kQ4_K)) {
      return cudaErrorNotSupported;
    } else {
      if (!pipeable<T>(gate)) return cudaErrorNotSupported;
      const int n_groups = gate.n_rows / 32;
      auto kernel = defer_scale != nullptr ? gate_up_piped_kernel<T, true> : gate_up_piped_kernel<T, false>;
      const ResidentShape sh = resident_shape(reinterpret_cast<const void*>(kernel), kPipedWarps * StageLayout<T, 2>::kBytes,
                                              staged_bytes(gate.k), n_groups, n_groups, 32 * (sizeof(float2) + sizeof(float)));
      if (call != PipedCall::kLaunch) return sh.grid == 0 ? cudaErrorNotSupported : cudaSuccess;
      return launch_shaped(kernel, sh, stream, gate, up, in, defer_scale, h, hq, hds, sh.stages, sh.early);
    }
  });
}

cudaError_t launch_matvec_piped(const MatvecTask* tasks, int n_tasks, const DotInput& in, const float* defer_scale,
                                cudaStream_t stream, PipedCall call) {
  if (n_tasks < 1 || n_tasks > kMaxMatvecTasks) return cudaErrorNotSupported;
  PipedBatch b{};
  b.n_tasks = n_tasks;
  b.in = in;
  b.defer_scale = defer_scale;
  int rows = 0;
  for (int i = 0; i < n_tasks; ++i) {
    if (tasks[i].w.type != tasks[0].w.type || tasks[i].w.k != tasks[0].w.k) return cudaErrorNotSupported;
    b.t[i] = tasks[i];
    b.begin[i] = rows;
    rows += tasks[i].w.n_rows;
  }
  b.begin[n_tasks] = rows;
  const DeviceWeight w[kMaxMatvecTasks] = {b.t[0].w, b.t[1].w, b.t[2].w};
  if (call != PipedCall::kFits && !wanted(matvec_piped(), w, n_tasks)) return cudaErrorNotSupported;
  return dispatch_wtype(tasks[0].w.type, [&](auto type) -> cudaError_t {
    constexpr int T = decltype(type)::value;
    if constexpr (kP16<T> == 0) {
      return cudaErrorNotSupported;
    } else {
      for (int i = 0; i < n_tasks; ++i) {
        if (!pipeable<T>(tasks[i].w)) return cudaErrorNotSupported;
      }
      auto kernel = defer_scale != nullptr ? matvec_piped_kernel<T, true> : matvec_piped_kernel<T, false>;
      const ResidentShape sh = resident_shape(reinterpret_cast<const void*>(kernel), kPipedWarps * StageLayout<T, 1>::kBytes,
                                              staged_bytes(tasks[0].w.k, kChunkSums<T>), rows, rows, 0);
      if (call != PipedCall::kLaunch) return sh.grid == 0 ? cudaErrorNotSupported : cudaSuccess;
      b.stages = sh.stages;
      b.early = sh.early;
      return launch_shaped(kernel, sh, stream, b);
    }
  });
}

bool matvec_fits_piped(const MatvecTask* tasks, int n_tasks, bool deferred) {
  static const float kScale = 1.0f;  // only whether one is given counts
  return launch_matvec_piped(tasks, n_tasks, DotInput{}, deferred ? &kScale : nullptr, nullptr, PipedCall::kFits) ==
         cudaSuccess;
}

bool gate_up_fits_piped(const DeviceWeight& gate, const DeviceWeight& up, bool deferred) {
  static const float kScale = 1.0f;
  return launch_gate_up_piped(gate, up, DotInput{}, deferred ? &kScale : nullptr, nullptr, nullptr, nullptr, nullptr,
                              PipedCall::kFits) == cudaSuccess;
}

cudaError_t set_gate_up_probe(unsigned long long* fields) {
  return cudaMemcpyToSymbol(g_gate_up_probe, &fields, sizeof(fields));
}

}  // namespace minfer::kernels

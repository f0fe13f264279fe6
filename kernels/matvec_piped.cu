// Decode matvecs and gate/up + SwiGLU with each lane's weights pipelined
// through shared memory (sm_80 and later).
//
// The plain kernels (matvec.cu) hold a lane's weights in registers from load
// to use, so a warp loads a unit, waits, computes, and only then loads the
// next: with 64 registers a thread (two blocks of 512 an SM) little else
// fits. On the H200 (7B gate/up Q4_K, Nsight Compute) that issues 0.6
// instructions a cycle a scheduler, stalled on those loads, at 60% of the
// copy bandwidth; and gate/up's 592 blocks of 32 rows make 2.24 waves of the
// 264 resident, the last 11% of the rows costing 19% of the time
// (tests/gpu/matvec_bench.cpp "2 waves").
//
// Here a lane copies its units' pieces with cp.async into slots of its own
// in shared memory — no register holds a byte in flight — `stages` steps
// ahead of the one it computes (a step: one unit of each weight a row has),
// the first of them before the PDL wait (weights are constants). One block
// of 32 warps an SM, the launch exactly the resident blocks, rows shared out
// so that warps differ by at most one. Lane l of a row takes units l, l + 32,
// ... in order, as the plain kernels do: the same sums, the same bits.
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

namespace minfer::kernels {
namespace {

std::atomic<int> g_gate_up_piped{-1};
std::atomic<int> g_matvec_piped{-1};
std::atomic<int> g_piped_stages_cap{0};
std::atomic<int> g_piped_early{0};
std::atomic<int> g_last_piped_stages{0};
std::atomic<uint64_t> g_piped_launches{0};

constexpr int kPipedWarps = 32;            // a block: one an SM
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
constexpr int kMaxPipedStages = 8;  // set_piped_stages's limit (cp_async_wait's cases)

// A lane's slots for one unit of T: Unit::load's reads by size — 16-byte
// pieces, 8-byte ones (Q6_K's scales of its half super-block) and the 4-byte
// words that hold a 2-byte scale. In 16-byte slots for every piece, as
// before 2026-12-01, Q8_0 took 48 bytes a lane a unit for its 34 and Q6_K 80
// for its 54.5, and 192 KiB of slots gave Q6_K 2 stages and gate/up Q8_0 2.
// Now they get 3 (H200, 2026-12-01, CUPTI shares against the session
// before: 7B ffn_down Q6_K 19.34 → 17.19 µs, output head Q6_K 153.8 →
// 143.3; tg128 7B Q4_K_M 495 → 501 tok/s, Q8_0 unchanged). Held at 2
// stages the compact slots read 497 and 500: the fewer bytes a lane reads
// and stores count as much as the third stage.
template <int kType>
constexpr int kP16 = kType == static_cast<int>(WType::kQ8_0)   ? 2
                     : kType == static_cast<int>(WType::kQ4_K) ? 3
                     : kType == static_cast<int>(WType::kQ5_K) ? 5
                     : kType == static_cast<int>(WType::kQ6_K) ? 3
                                                               : 0;
template <int kType>
constexpr int kP8 = kType == static_cast<int>(WType::kQ6_K) ? 1 : 0;
template <int kType>
constexpr int kP4 = kType == static_cast<int>(WType::kQ8_0) || kType == static_cast<int>(WType::kQ6_K) ? 1 : 0;

// One warp's stage for kW weights a row: the warp's 16-byte pieces (piece i
// of lane l at slot i * 32 + l: a warp's reads of one piece are
// conflict-free), then its 8-byte ones, then its words. A multiple of 128
// bytes, so every stage and region stays 16-byte aligned.
template <int kType, int kW>
struct StageLayout {
  static constexpr int kOff8 = kW * kP16<kType> * kWarp * 16;
  static constexpr int kOff4 = kOff8 + kW * kP8<kType> * kWarp * 8;
  static constexpr int kBytes = kOff4 + kW * kP4<kType> * kWarp * 4;
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// IssueFetch: Unit::load's pieces go out as cp.async into this lane's slots
// of a stage, in the order the load reads them (a 2-byte scale as the
// aligned 4-byte word holding it). ReadFetch: the same load again, its
// pieces from the slots. `stage`: the warp's stage; L: its StageLayout.
template <class L>
struct IssueFetch {
  unsigned char* stage;
  int lane;
  int i16 = 0, i8 = 0, i4 = 0;
  __device__ int4 operator()(const void* p) {
    const uint32_t dst = smem_addr(stage + 16 * (kWarp * i16++ + lane));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(p) : "memory");
    return int4{};
  }
  __device__ int2 u64(const void* p) {
    const uint32_t dst = smem_addr(stage + L::kOff8 + 8 * (kWarp * i8++ + lane));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(p) : "memory");
    return int2{};
  }
  __device__ uint16_t u16(const uint16_t* p) {
    const void* word = reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{3});
    const uint32_t dst = smem_addr(stage + L::kOff4 + 4 * (kWarp * i4++ + lane));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(word) : "memory");
    return 0;
  }
};
template <class L>
struct ReadFetch {
  const unsigned char* stage;
  int lane;
  int i16 = 0, i8 = 0, i4 = 0;
  __device__ int4 operator()(const void*) { return *reinterpret_cast<const int4*>(stage + 16 * (kWarp * i16++ + lane)); }
  __device__ int2 u64(const void*) { return *reinterpret_cast<const int2*>(stage + L::kOff8 + 8 * (kWarp * i8++ + lane)); }
  __device__ uint16_t u16(const uint16_t* p) {
    const uint32_t word = *reinterpret_cast<const uint32_t*>(stage + L::kOff4 + 4 * (kWarp * i4++ + lane));
    return static_cast<uint16_t>((reinterpret_cast<uintptr_t>(p) & 2) ? word >> 16 : word);
  }
};

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}
// The same for a count known at run time (uniform across the warp; the
// instruction takes an immediate).
__device__ __forceinline__ void cp_async_wait(int pending) {
  switch (pending) {
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    case 7: cp_async_wait<7>(); break;
    default: cp_async_wait<0>(); break;
  }
}

// Where the j-th row a warp takes is: its task and its row in the task.
struct RowAt {
  int task, r;
};

// The pipeline of one warp over its n_rows rows (row_at(j)), kW weights a row
// (weight(task, wi)), all of one type and width: then done(j, row, sums) with
// the rows' warp sums (every lane gets them). Calls pdl_begin once its first
// `early` steps are out, issues the rest of the first `stages`, then calls
// start() for the input (every thread of the block calls it there: it may
// hold a barrier). `ring`: the warp's stages, one after the other.
template <WType T, int kW, class Start, class RowOf, class WeightOf, class Done>
__device__ __forceinline__ void pipe_rows(unsigned char* ring, int stages, int early, int lane, int n_rows, int n_units,
                                          Start start, RowOf row_at, WeightOf weight, Done done) {
  using L = StageLayout<static_cast<int>(T), kW>;
  const int n_iter = (n_units + kWarp - 1) / kWarp;  // steps a row
  // The next step to issue: row ij, units from lane + 32 iit, into stage ist.
  int ij = 0, iit = 0, ist = 0;
  auto issue_next = [&] {
    if (ij < n_rows) {
      const RowAt at = row_at(ij);
      const int u = min(lane + kWarp * iit, n_units - 1);  // past the row: its last unit again, value dropped
      IssueFetch<L> f{ring + ist * L::kBytes, lane};
#pragma unroll
      for (int wi = 0; wi < kW; ++wi) Unit<T>::load(weight(at.task, wi), at.r, u, f);
      if (++iit == n_iter) iit = 0, ++ij;
    }
    cp_async_commit();  // an empty group past the end keeps the count the wait relies on
    if (++ist == stages) ist = 0;
  };
  for (int s = 0; s < early; ++s) issue_next();
  pdl_begin();
  for (int s = early; s < stages; ++s) issue_next();
  const DotInput in = start();  // the activations in shared memory (stage_acts)

  float acc[kW] = {};
  int j = 0, it = 0, st = 0;
  RowAt at = n_rows > 0 ? row_at(0) : RowAt{0, 0};
  for (int s = 0, n_steps = n_rows * n_iter; s < n_steps; ++s) {
    cp_async_wait(stages - 1);  // this lane's step s has landed
    ReadFetch<L> f{ring + st * L::kBytes, lane};
    const int u = min(lane + kWarp * it, n_units - 1);
    float part[kW];
#pragma unroll
    for (int wi = 0; wi < kW; ++wi) {
      // (the row for the scale's half of its word)
      part[wi] = Unit<T>::dot(Unit<T>::load(weight(at.task, wi), at.r, u, f), u, in, SwizzledActs{});
    }
    if (lane + kWarp * it < n_units) {
#pragma unroll
      for (int wi = 0; wi < kW; ++wi) acc[wi] = add_rn(acc[wi], part[wi]);
    }
    issue_next();  // step s + stages into the stage just read
    if (++st == stages) st = 0;
    if (++it == n_iter) {
      float sums[kW];
#pragma unroll
      for (int wi = 0; wi < kW; ++wi) {
        sums[wi] = warp_sum(acc[wi]);
        acc[wi] = 0.0f;
      }
      done(j, at, sums);
      it = 0;
      if (++j < n_rows) at = row_at(j);
    }
  }
}

// The activations staged in shared memory. Read from global memory (L1), a
// step's activation loads — lane l at 16-byte chunk 4 l + i of the row
// (Q4_K, instruction i) or 2 l + i (Q8_0) — touch 16 (8) cache lines an
// instruction, and the L1 pipe, not DRAM, bounded 7B's gate/up Q4_K (Nsight
// Compute, H200, 2026-12-01: stalls of 4.1 cycles an instruction on MIO
// throttle and 3.1 on short scoreboard). In shared memory with chunk c at
// swizzled_chunk(c) (dot.cuh), each quarter of a warp's 16-byte reads falls
// on distinct banks (Q8_0, Q4_K; Q6_K's pattern keeps two-way conflicts):
// MIO throttle 3.2, short scoreboard 1.6; kernel bench 7B ffn_down Q4_K
// 17.5 → 13.1 µs, gate/up Q4_K 25.4 → 24.7. (Tried, 2026-12-01, not kept:
// gate and up sharing one load of a unit's staged activations, 4 of the 10
// 16-byte shared loads of a Q4_K step fewer in the PTX — no change: kernel
// bench gate/up Q4_K 24.5 µs, Q8_0 37.4; tg128 7B 478 / 401 tok/s.)
// Once a block, after the PDL wait: the Q8 values (k bytes, rounded up to
// whole 128-byte rows of chunks, which the swizzle permutes within), then
// the scales. Every thread of the block; ends with a barrier.
__host__ __device__ inline size_t staged_values_bytes(int k) { return (static_cast<size_t>(k) + 127) / 128 * 128; }
__host__ __device__ inline size_t staged_bytes(int k) { return staged_values_bytes(k) + static_cast<size_t>(k / 32) * sizeof(float2); }

__device__ __forceinline__ DotInput stage_acts(const DotInput& in, int k, unsigned char* smem) {
  constexpr int kBatch = 2;  // chunks a thread loads before it stores (loads in flight)
  int4* q = reinterpret_cast<int4*>(smem);
  float2* ds = reinterpret_cast<float2*>(smem + staged_values_bytes(k));
  const int chunks = k / 16, n_ds = k / 32, tid = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  for (int c0 = 0; c0 < chunks; c0 += kBatch * n) {  // n_ds = k / 32 < chunks: the scales ride along
    int4 v[kBatch];
    float2 d[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int c = c0 + i * n + tid;
      if (c < chunks) v[i] = ld16a(in.q + 16 * c);
      if (c < n_ds) d[i] = in.ds[c];
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int c = c0 + i * n + tid;
      if (c < chunks) q[swizzled_chunk(c)] = v[i];
      if (c < n_ds) ds[c] = d[i];
    }
  }
  __syncthreads();
  return DotInput{nullptr, reinterpret_cast<const int8_t*>(q), ds};
}
#endif

// Gate/up: block c takes Q8 blocks of h [c n / G, (c + 1) n / G) — whole
// groups of 32 rows, so it quantizes its own, and SMs differ by at most one
// group; warp w the block's rows w, w + 32, ... kDefer: the deferred norm's
// scale, applied as the plain kernel applies it. Shared memory: the slots,
// the staged activations, then the block's h. (Tried on the H200,
// 2026-12-01, not kept: rows shared out in halves of groups, a group split
// between two SMs quantized by the second to finish (an atomic count a
// group), so that 7B's 592 groups make 8-9 halves an SM instead of 4-5
// groups: tg128 7B Q4_K_M 496 vs 495 tok/s, Q8_0 409 vs 408, same run — the
// SMs with a fifth group do not set gate/up's pace.)
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
  const int ring_bytes = stages * StageLayout<kType, 2>::kBytes;  // a warp's
  unsigned char* acts = piped_smem + kPipedWarps * ring_bytes;
  float* out = reinterpret_cast<float*>(acts + staged_bytes(gate.k));  // the block's h, for its Q8 blocks
  const int my_rows = (32 * (g1 - g0) - warp + kPipedWarps - 1) / kPipedWarps;
  float scale = 0.0f;
  pipe_rows<T, 2>(
      piped_smem + warp * ring_bytes, stages, early, lane, my_rows, gate.k / Unit<T>::kElems,
      [&] {
        if (kDefer) scale = *defer_scale;
        return stage_acts(in, gate.k, acts);
      },
      [&](int j) { return RowAt{0, 32 * g0 + warp + kPipedWarps * j}; },
      [&](int, int wi) -> const DeviceWeight& { return wi == 0 ? gate : up; },
      [&](int j, RowAt at, const float (&sums)[2]) {
        float g = sums[0], v = sums[1];
        if constexpr (kDefer) {
          g = __fmul_rn(g, scale);
          v = __fmul_rn(v, scale);
        }
        if (lane == 0) {
          const float hv = silu(g) * v;
          out[warp + kPipedWarps * j] = hv;
          h[at.r] = hv;
        }
      });
  __syncthreads();
  if (hq != nullptr) {
    for (int g = warp; g < g1 - g0; g += kPipedWarps) quantize_block_q8(out[32 * g + lane], lane, g0 + g, hq, hds);
  }
#else
  __trap();  // launched only on sm_80 and later (device_limits().cc_major)
#endif
}

// Matvec: the tasks' rows one after the other; warp w of block b is warp
// gw = w G + b of the launch (G blocks) and takes rows gw, gw + W, ... (W
// warps in all), so that a launch of fewer rows than warps still spreads
// over every SM. Each row is written as matvec.cu writes it (the deferred
// norm's scale, bias, residual, argmax). Shared memory: the slots, then the
// staged activations.
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
  pipe_rows<T, 1>(
      piped_smem + warp * ring_bytes, b.stages, b.early, lane, my_rows, k / Unit<T>::kElems,
      [&] {
        if (kDefer) scale = *b.defer_scale;
        return stage_acts(b.in, k, acts);
      },
      [&](int j) {
        const int g = gw + n_warps * j;
        const int ti = (b.n_tasks > 2 && g >= b.begin[2]) ? 2 : (b.n_tasks > 1 && g >= b.begin[1]) ? 1 : 0;
        return RowAt{ti, g - (ti == 2 ? b.begin[2] : ti == 1 ? b.begin[1] : 0)};
      },
      [&](int ti, int) -> const DeviceWeight& { return task(ti).w; },
      [&](int, RowAt at, const float (&sums)[1]) {
        if (lane != 0) return;
        const MatvecTask& t = task(at.task);
        float v = sums[0];
        if constexpr (kDefer) v = __fmul_rn(v, scale);
        if (t.bias != nullptr) v += t.bias[at.r];
        const float o = t.accumulate ? t.y[at.r] + v : v;
        t.y[at.r] = o;
        if (t.argmax != nullptr) argmax_fold(t.argmax, argmax_pack(o, at.r));
      });
#else
  __trap();  // launched only on sm_80 and later (device_limits().cc_major)
#endif
}

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
//
// A pipelined launch: one block an SM (at most `max_blocks`), and as many
// stages of `stage_bytes` (all the block's warps' stages) as the shared
// memory left by `fixed` bytes (the staged activations) and `extra` bytes for
// each unit of `work` the block may get holds — up to kDefaultPipedStages or
// set_piped_stages's limit — `early` of them before the PDL wait. grid 0:
// fewer than two stages fit.
struct ResidentShape {
  int grid = 0, stages = 0, early = 0;
  size_t smem = 0;
};
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

template <class Kernel, class... Args>
cudaError_t launch_shaped(Kernel kernel, const ResidentShape& sh, cudaStream_t stream, Args&&... args) {
  if (sh.grid == 0) return cudaErrorNotSupported;
  const cudaError_t st =
      launch_kernel(kernel, dim3(sh.grid), dim3(kPipedWarps * kWarp), sh.smem, stream, std::forward<Args>(args)...);
  if (st == cudaSuccess) {
    g_piped_launches.fetch_add(1, std::memory_order_relaxed);
    g_last_piped_stages.store(sh.stages, std::memory_order_relaxed);
  }
  return st;
}

// Whether weights of type T and width k may be pipelined (sm_80, whole units,
// a warp's worth of them a row, 16-byte aligned planes).
template <int kType>
bool pipeable(const DeviceWeight& w) {
  if constexpr (kP16<kType> == 0) {
    return false;
  } else {
    constexpr int kElems = Unit<static_cast<WType>(kType)>::kElems;
    return device_limits().cc_major >= 8 && w.k % kElems == 0 && w.k / kElems >= kWarp && planes_aligned(w);
  }
}

// Whether a launch of `n` weights is pipelined under `mode` (set_*_piped):
// off, every eligible launch, or (-1) those of at least kPipedMinBytes.
bool wanted(int mode, const DeviceWeight* w, int n) {
  if (mode >= 0) return mode == 1;
  size_t bytes = 0;
  for (int i = 0; i < n; ++i) {
    const PlaneSizes ps = plane_sizes(w[i].type, w[i].k);
    bytes += (ps.q_row + ps.qh_row + ps.meta_row + ps.d_row) * static_cast<size_t>(w[i].n_rows);
  }
  return bytes >= kPipedMinBytes;
}

}  // namespace

void set_gate_up_piped(int mode) { g_gate_up_piped.store(mode, std::memory_order_relaxed); }
int gate_up_piped() { return g_gate_up_piped.load(std::memory_order_relaxed); }
void set_matvec_piped(int mode) { g_matvec_piped.store(mode, std::memory_order_relaxed); }
int matvec_piped() { return g_matvec_piped.load(std::memory_order_relaxed); }
uint64_t piped_launches() { return g_piped_launches.load(std::memory_order_relaxed); }
void set_piped_stages(int max_stages) { g_piped_stages_cap.store(max_stages, std::memory_order_relaxed); }
void set_piped_early(int steps) { g_piped_early.store(steps, std::memory_order_relaxed); }
int last_piped_stages() { return g_last_piped_stages.load(std::memory_order_relaxed); }

cudaError_t launch_gate_up_piped(const DeviceWeight& gate, const DeviceWeight& up, const DotInput& in, const float* defer_scale,
                                 float* h, int8_t* hq, float2* hds, cudaStream_t stream) {
  const DeviceWeight both[2] = {gate, up};
  if (!wanted(gate_up_piped(), both, 2) || gate.type != up.type || gate.k != up.k || gate.n_rows != up.n_rows ||
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
                                              staged_bytes(gate.k), n_groups, n_groups, 32 * sizeof(float));
      return launch_shaped(kernel, sh, stream, gate, up, in, defer_scale, h, hq, hds, sh.stages, sh.early);
    }
  });
}

cudaError_t launch_matvec_piped(const MatvecTask* tasks, int n_tasks, const DotInput& in, const float* defer_scale,
                                cudaStream_t stream) {
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
  if (!wanted(matvec_piped(), w, n_tasks)) return cudaErrorNotSupported;
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
                                              staged_bytes(tasks[0].w.k), rows, rows, 0);
      b.stages = sh.stages;
      b.early = sh.early;
      return launch_shaped(kernel, sh, stream, b);
    }
  });
}

}  // namespace minfer::kernels

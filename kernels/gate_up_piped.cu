// Gate/up + SwiGLU for decode with each lane's weights pipelined through
// shared memory (sm_80 and later).
//
// The plain kernel (matvec.cu gate_up_kernel) holds a lane's weights in
// registers from load to use, so a warp loads a unit of gate and up, waits,
// computes, and only then loads the next: with 64 registers a thread (two
// blocks of 512 an SM) nothing else fits. On the H200 (7B Q4_K, Nsight
// Compute) it issues 0.6 instructions a cycle a scheduler, stalled on those
// loads, and reaches 60% of the copy bandwidth; and its 592 blocks of 32
// rows make 2.24 waves of the 264 resident, the last 11% of the rows costing
// 19% of the time (tests/gpu/matvec_bench.cpp "2 waves").
//
// Here a lane copies its units' 16-byte pieces with cp.async into slots of
// its own in shared memory — no register holds a byte in flight — kStages
// steps ahead of the one it computes (a step: one unit of gate and one of
// up), and the first kStages go out before the PDL wait (weights are
// constants). One block an SM, the launch exactly the resident blocks; block
// c takes Q8 blocks of h [c n / G, (c + 1) n / G) — whole groups of 32 rows,
// so it quantizes its own, and SMs differ by at most one group. Warp w takes
// the block's rows w, w + kWarps, ...; lane l of a row units l, l + 32, ...
// in order, as row_dot_pair_t does: the same sums, the same bits.
//
// Types whose unit is three 16-byte pieces (Q4_K: meta, two halves of
// quants; Q8_0: two halves and the 4-byte word holding d), rows of at least
// 32 units; every other launch takes matvec.cu's kernels.
#include <algorithm>
#include <atomic>
#include <iterator>

#include "kernels/dot.cuh"
#include "kernels/gate_up_piped.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels {
namespace {

std::atomic<int> g_piped{-1};
std::atomic<uint64_t> g_piped_launches{0};

constexpr int kPiecesPerUnit = 3;
constexpr int kPiecesPerStep = 2 * kPiecesPerUnit;  // gate's unit, then up's

template <int kType>
constexpr bool kPipedType = kType == static_cast<int>(WType::kQ4_K) || kType == static_cast<int>(WType::kQ8_0);

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// A lane's slots of one stage: piece i at slot[i * kWarp] (the warp's lanes
// side by side, so that a warp's 16-byte reads of one piece are conflict-free).
//
// IssueFetch: Unit::load's pieces go out as cp.async into the slots, in the
// order the load reads them (the 2-byte scale as the aligned 4-byte word
// holding it). ReadFetch: the same load again, its pieces from the slots.
struct IssueFetch {
  int4* slot;
  int i = 0;
  __device__ int4 operator()(const void* p) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(slot + kWarp * i++)), "l"(p) : "memory");
    return int4{};
  }
  __device__ uint16_t u16(const uint16_t* p) {
    const void* word = reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{3});
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_addr(slot + kWarp * i++)), "l"(word) : "memory");
    return 0;
  }
};
struct ReadFetch {
  const int4* slot;
  int i = 0;
  __device__ int4 operator()(const void*) { return slot[kWarp * i++]; }
  __device__ uint16_t u16(const uint16_t* p) {
    const uint32_t word = *reinterpret_cast<const uint32_t*>(slot + kWarp * i++);
    return static_cast<uint16_t>((reinterpret_cast<uintptr_t>(p) & 2) ? word >> 16 : word);
  }
};

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}
#endif

template <int kType, int kWarps, int kStages, bool kDefer>
__global__ void __launch_bounds__(kWarps * kWarp, 1)
    gate_up_piped_kernel(DeviceWeight gate, DeviceWeight up, DotInput in, const float* defer_scale, float* h, int8_t* hq,
                         float2* hds) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr WType T = static_cast<WType>(kType);
  constexpr int kStageInts = kPiecesPerStep * kWarp;  // int4s a warp's stage
  extern __shared__ __align__(16) int4 piped_smem[];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int n_groups = gate.n_rows / 32;
  const int g0 = static_cast<int>(static_cast<long long>(blockIdx.x) * n_groups / gridDim.x);
  const int g1 = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * n_groups / gridDim.x);
  const int first_row = 32 * g0;
  float* out = reinterpret_cast<float*>(piped_smem + kWarps * kStages * kStageInts);  // the block's h, for its Q8 blocks
  int4* ring = piped_smem + warp * kStages * kStageInts + lane;
  const int n_units = gate.k / Unit<T>::kElems;
  const int n_iter = (n_units + kWarp - 1) / kWarp;       // steps a row
  const int my_rows = (32 * (g1 - g0) - warp + kWarps - 1) / kWarps;
  const int n_steps = my_rows * n_iter;

  // The next step to issue: row (warp + kWarps * ij), units from lane + 32 * iit, into stage ist.
  int ij = 0, iit = 0, ist = 0;
  auto issue_next = [&] {
    if (ij < my_rows) {
      const int r = first_row + warp + kWarps * ij;
      const int u = min(lane + kWarp * iit, n_units - 1);  // past the row: its last unit again, value dropped
      IssueFetch f{ring + ist * kStageInts};
      Unit<T>::load(gate, r, u, f);
      Unit<T>::load(up, r, u, f);
      if (++iit == n_iter) iit = 0, ++ij;
    }
    cp_async_commit();  // an empty group past the end keeps the count the wait relies on
    if (++ist == kStages) ist = 0;
  };
#pragma unroll
  for (int s = 0; s < kStages; ++s) issue_next();
  pdl_begin();
  const float scale = kDefer ? *defer_scale : 1.0f;  // the deferred norm's scale

  float acc_g = 0.0f, acc_u = 0.0f;
  int j = 0, it = 0, st = 0;
  for (int s = 0; s < n_steps; ++s) {
    cp_async_wait<kStages - 1>();  // this lane's step s has landed
    ReadFetch f{ring + st * kStageInts};
    const int r = first_row + warp + kWarps * j, u = min(lane + kWarp * it, n_units - 1);
    const auto rg = Unit<T>::load(gate, r, u, f);  // (r for the scale's half of its word)
    const auto ru = Unit<T>::load(up, r, u, f);
    const float pg = Unit<T>::dot(rg, u, in), pu = Unit<T>::dot(ru, u, in);
    if (lane + kWarp * it < n_units) {
      acc_g = add_rn(acc_g, pg);
      acc_u = add_rn(acc_u, pu);
    }
    issue_next();  // step s + kStages into the stage just read
    if (++st == kStages) st = 0;
    if (++it == n_iter) {
      float g = warp_sum(acc_g), v = warp_sum(acc_u);
      if constexpr (kDefer) g = __fmul_rn(g, scale), v = __fmul_rn(v, scale);
      const int local = warp + kWarps * j;
      if (lane == 0) {
        const float hv = silu(g) * v;
        out[local] = hv;
        h[first_row + local] = hv;
      }
      acc_g = acc_u = 0.0f;
      it = 0;
      ++j;
    }
  }
  __syncthreads();
  if (hq != nullptr) {
    for (int g = warp; g < g1 - g0; g += kWarps) quantize_block_q8(out[32 * g + lane], lane, g0 + g, hq, hds);
  }
#else
  __trap();  // launched only on sm_80 and later (launch_gate_up_piped)
#endif
}

struct PipedShape {
  int warps, stages;
};
// Modes 1 and 2 (set_gate_up_piped): 32 warps of 2 stages, 16 of 4; each
// 192 KiB of slots, one block an SM.
constexpr PipedShape kShapes[] = {{32, 2}, {16, 4}};

template <int kType, int kMode, bool kDefer>
constexpr auto kPipedKernel = gate_up_piped_kernel<kType, kShapes[kMode - 1].warps, kShapes[kMode - 1].stages, kDefer>;

template <int kType, int kMode>
cudaError_t launch_mode(const DeviceWeight& gate, const DeviceWeight& up, const DotInput& in, const float* defer_scale, float* h,
                        int8_t* hq, float2* hds, cudaStream_t stream) {
  constexpr PipedShape sh = kShapes[kMode - 1];
  const DeviceLimits lim = device_limits();
  const int n_groups = gate.n_rows / 32;
  const int threads = sh.warps * kWarp;
  auto kernel = defer_scale != nullptr ? kPipedKernel<kType, kMode, true> : kPipedKernel<kType, kMode, false>;
  // Sized for the most groups a block may get, at most one more than n / G.
  const size_t ring = static_cast<size_t>(sh.warps) * sh.stages * kPiecesPerStep * kWarp * sizeof(int4);
  const int per_sm = blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, ring + 32 * sizeof(float),
                                   lim.max_smem);
  if (per_sm < 1 || lim.sms == 0) return cudaErrorNotSupported;
  const int grid = std::min(n_groups, per_sm * lim.sms);
  const size_t smem = ring + sizeof(float) * 32 * static_cast<size_t>((n_groups + grid - 1) / grid);
  if (smem > static_cast<size_t>(lim.max_smem)) return cudaErrorNotSupported;
  const cudaError_t st = launch_kernel(kernel, dim3(grid), dim3(threads), smem, stream, gate, up, in, defer_scale, h, hq, hds);
  if (st == cudaSuccess) g_piped_launches.fetch_add(1, std::memory_order_relaxed);
  return st;
}

}  // namespace

void set_gate_up_piped(int mode) { g_piped.store(mode, std::memory_order_relaxed); }
int gate_up_piped() { return g_piped.load(std::memory_order_relaxed); }
uint64_t gate_up_piped_launches() { return g_piped_launches.load(std::memory_order_relaxed); }

cudaError_t launch_gate_up_piped(const DeviceWeight& gate, const DeviceWeight& up, const DotInput& in, const float* defer_scale,
                                 float* h, int8_t* hq, float2* hds, cudaStream_t stream) {
  const int chosen = gate_up_piped();
  const int mode = chosen < 0 ? 1 : chosen;
  if (mode == 0 || mode > static_cast<int>(std::size(kShapes)) || gate.type != up.type || gate.k != up.k ||
      gate.n_rows != up.n_rows || gate.n_rows % 32 != 0 || !planes_aligned(gate) || !planes_aligned(up)) {
    return cudaErrorNotSupported;
  }
  if (device_limits().cc_major < 8) return cudaErrorNotSupported;
  return dispatch_wtype(gate.type, [&](auto type) -> cudaError_t {
    constexpr int T = decltype(type)::value;
    if constexpr (!kPipedType<T>) {
      return cudaErrorNotSupported;
    } else {
      if (gate.k % Unit<static_cast<WType>(T)>::kElems != 0 || gate.k / Unit<static_cast<WType>(T)>::kElems < kWarp) {
        return cudaErrorNotSupported;
      }
      return mode == 1 ? launch_mode<T, 1>(gate, up, in, defer_scale, h, hq, hds, stream)
                       : launch_mode<T, 2>(gate, up, in, defer_scale, h, hq, hds, stream);
    }
  });
}

}  // namespace minfer::kernels

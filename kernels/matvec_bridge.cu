// The bridge between two sub-layers of a decode step (kernels.h,
// launch_bridge; sm_80 and later): the product that adds to the residual
// stream, the deferred norm of the stream, and the products of that norm, in
// one launch. Opt-in (MINFER_BRIDGE): it loses on the H200.
//
// As three launches (H200, 7B Q8_0, 2026-12-01, CUPTI) the seam costs a
// one-block norm kernel of 5.4 µs a seam, twice a layer, with DRAM idle but
// for the next product's first stages: the norm waits for every block of the
// product before it to leave, and the next product's blocks, a whole SM
// each, can only start loading once the previous kernel's blocks are gone
// from their SM. Folding the norm into each block of the next product lost
// (bench/results/2026-12-01-h200-session12: its predecessor's 896 blocks
// held every SM until they ended).
//
// Here one block an SM runs both products through one ring of stages
// (pipe.cuh, pipe_two): its rows of the first, then its rows of the second,
// whose first steps go out while the first's last ones are computed. Between
// them every block waits at a barrier in global memory for the whole
// stream, then normalises it itself — the deferred norm's code
// (deferred_norm_quads) into its staged activations, so the Q8 values, the
// scale and every product's bits are those of the three launches. Block 0
// also writes the norm's outputs where launch_rms_norm_deferred would.
//
// Measured (H200, 2026-12-02, bench/results/2026-12-02-h200-session16): the
// seam got no cheaper. Each block spent 4.6 µs at the barrier and 4.8-5.2 on
// the norm (set_bridge_probe), against the 5.4 µs (Q8_0) and 3.6 (Q4_K_M)
// the norm launch's share was — a load the seam waits for queues behind
// the stages in flight, the barrier's and the norm's as much as the
// launch's — and attn_output, one block an SM, could not load during
// attention on the SMs attention held (6.1 µs in the bridge, 3.1 as its own
// launch of small blocks). tg128 7B Q8_0 365-367 tok/s vs 407-409, Q4_K_M
// 433-454 vs 500-502.
#include <algorithm>
#include <atomic>
#include <climits>

#include "kernels/dot.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/norm.cuh"
#include "kernels/pipe.cuh"

namespace minfer::kernels {
namespace {

using namespace piped;  // NOLINT(google-build-using-namespace): the pipeline's machinery

std::atomic<int> g_bridge{0};
std::atomic<uint64_t> g_bridge_launches{0};

// set_bridge_probe's buffer: [2 kinds][kBridgeProbeBlocks][kBridgeProbeFields].
__device__ unsigned long long* g_bridge_probe = nullptr;

struct BridgeParams {
  MatvecTask a;  // the residual product
  DotInput a_in;
  const float* norm_w;
  float eps;
  int8_t* norm_q;
  float2* norm_ds;
  float* norm_scale;
  DeviceWeight gate, up;  // kGateUp
  float* h;
  int8_t* hq;
  float2* hds;
  MatvecTask b[kMaxMatvecTasks];   // !kGateUp
  int b_begin[kMaxMatvecTasks + 1];  // first row of each; b_begin[n_b]: all rows
  int n_b;
  unsigned int* barrier;
  int stages, early;
};

// The pairs with a kernel: into q/k/v, the first product's type the same as
// theirs or Q6_K (Q4_K_M and Q5_K_M files keep some ffn_down in Q6_K); into
// gate/up (attn_output's type in those files too) the same, Q8_0 or Q4_K
// (two stages of two Q5_K or Q6_K weights do not fit).
template <int kTA, int kTB, bool kGateUp>
constexpr bool kBridgePair = kP16<kTA> > 0 && kP16<kTB> > 0 &&
                             (kGateUp ? kTA == kTB && (kTB == static_cast<int>(WType::kQ8_0) || kTB == static_cast<int>(WType::kQ4_K))
                                      : kTA == kTB || kTA == static_cast<int>(WType::kQ6_K));

template <int kTA, int kTB, bool kGateUp>
constexpr int kBridgeStageBytes = std::max(StageLayout<kTA, 1>::kBytes, StageLayout<kTB, kGateUp ? 2 : 1>::kBytes);

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
__device__ __forceinline__ unsigned int ld_acquire(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Every block of the grid (all resident) arrives once, then waits for the
// others: bar[0] counts the arrivals, bar[1] the barriers passed. The last
// to arrive zeroes the count, then moves the generation on, which releases
// the rest; each block's writes before it are visible to every block after
// it (the fence, and the acquiring loads). The generation is read before
// arriving: it cannot move on until this block has arrived. (Tried on the
// H200, 2026-12-02: a warp of each block taking no rows and arriving for
// it, so that the fence waits for no copies of its own — no change, tg128
// 7B Q4_K_M 433 vs 435 tok/s, Q8_0 365 vs 365.)
__device__ __forceinline__ void grid_barrier(unsigned int* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int gen = ld_acquire(bar + 1);
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      atomicExch(bar, 0u);
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (ld_acquire(bar + 1) == gen) {
      }
    }
  }
  __syncthreads();
}

// The deferred norm's Q8 values into the staged activations' layout
// (stage_acts: chunk c of 16 values at swizzled_chunk(c)), and into the
// norm's own outputs where g_q is set.
struct StagedQ8Store {
  int8_t* q;
  float2* ds;
  int8_t* g_q;
  float2* g_ds;
  __device__ void value(int i, int8_t v) const {
    q[16 * swizzled_chunk(i / 16) + i % 16] = v;
    if (g_q != nullptr) g_q[i] = v;
  }
  __device__ void scales(int b, float2 v) const {
    ds[b] = v;
    if (g_ds != nullptr) g_ds[b] = v;
  }
};
#endif

// Shared memory: the warps' rings, the staged activations (the first
// product's, then the norm's), the norm's block sums, then (gate/up) the
// block's h for its Q8 blocks. The first product's rows go to the warps as
// matvec_piped_kernel's do, the second's as its own pipelined kernel's.
template <int kTA, int kTB, bool kGateUp>
__global__ void __launch_bounds__(kPipedWarps * kWarp, 1) bridge_kernel(BridgeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr WType TA = static_cast<WType>(kTA), TB = static_cast<WType>(kTB);
  constexpr int kStageBytes = kBridgeStageBytes<kTA, kTB, kGateUp>;
  extern __shared__ __align__(16) unsigned char piped_smem[];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int gw = warp * gridDim.x + blockIdx.x, n_warps = gridDim.x * kPipedWarps;
  const int n = p.a.w.n_rows, ka = p.a.w.k;  // the stream's width (the second product's k)
  const int ring_bytes = p.stages * kStageBytes;  // a warp's
  unsigned char* acts = piped_smem + kPipedWarps * ring_bytes;
  const size_t acts_bytes = staged_bytes(ka) > staged_bytes(n) ? staged_bytes(ka) : staged_bytes(n);
  float* sums = reinterpret_cast<float*>(acts + acts_bytes);
  float* out = sums + n / 32;
  const bool leader = threadIdx.x == 0;  // the probe's clock
  unsigned long long* probe = g_bridge_probe;
  long long t[6] = {};
  if (probe != nullptr && leader) t[0] = clock64();
  norm_quads_prefetch_weights(p.norm_w, n);  // constant: before the wait

  const auto first = make_phase<TA, 1, false>(  // staged without the chunk sums
      gw < n ? (n - gw + n_warps - 1) / n_warps : 0, ka / Unit<TA>::kElems,
      [&](int j) { return RowAt{0, gw + n_warps * j}; }, [&](int, int) -> const DeviceWeight& { return p.a.w; });
  auto start_a = [&] {
    const DotInput in = stage_acts(p.a_in, ka, acts);
    if (probe != nullptr && leader) t[1] = clock64();
    return in;
  };
  auto done_a = [&](int, RowAt at, const float (&s)[1]) {
    if (lane == 0) store_row<false>(p.a, at.r, s[0], 0.0f);
  };
  float scale = 0.0f;
  auto between = [&] {
    if (probe != nullptr) {
      __syncthreads();
      if (leader) t[2] = clock64();
    }
    grid_barrier(p.barrier);
    if (probe != nullptr && leader) t[3] = clock64();
    const bool writes = blockIdx.x == 0;
    int8_t* q = reinterpret_cast<int8_t*>(acts);
    float2* ds = reinterpret_cast<float2*>(acts + staged_values_bytes(n));
    deferred_norm_quads<true>(p.a.y, p.norm_w, n,
                              StagedQ8Store{q, ds, writes ? p.norm_q : nullptr, writes ? p.norm_ds : nullptr}, sums);
    scale = norm_scale(sums, n, p.eps, lane);
    if (writes && threadIdx.x == 0) *p.norm_scale = scale;
    if (probe != nullptr && leader) t[4] = clock64();
    return DotInput{nullptr, q, ds};
  };
  unsigned char* ring = piped_smem + warp * ring_bytes;
  if constexpr (kGateUp) {
    const int n_groups = p.gate.n_rows / 32;
    const int g0 = static_cast<int>(static_cast<long long>(blockIdx.x) * n_groups / gridDim.x);
    const int g1 = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * n_groups / gridDim.x);
    const auto second = make_phase<TB, 2, false>(
        (32 * (g1 - g0) - warp + kPipedWarps - 1) / kPipedWarps, n / Unit<TB>::kElems,
        [&](int j) { return RowAt{0, 32 * g0 + warp + kPipedWarps * j}; },
        [&](int, int wi) -> const DeviceWeight& { return wi == 0 ? p.gate : p.up; });
    pipe_two(first, second, ring, kStageBytes, p.stages, p.early, lane, start_a, done_a, between,
             [&](int j, RowAt at, const float (&s)[2]) {
               if (lane == 0) {
                 const float hv = silu(__fmul_rn(s[0], scale)) * __fmul_rn(s[1], scale);
                 out[warp + kPipedWarps * j] = hv;
                 p.h[at.r] = hv;
               }
             });
    __syncthreads();
    if (p.hq != nullptr) {
      for (int g = warp; g < g1 - g0; g += kPipedWarps) quantize_block_q8(out[32 * g + lane], lane, g0 + g, p.hq, p.hds);
    }
  } else {
    const int n_rows = p.b_begin[p.n_b];
    // Tasks by constant indices (a run-time index into the parameter would
    // copy it to local memory).
    auto task = [&](int ti) -> const MatvecTask& { return ti == 2 ? p.b[2] : ti == 1 ? p.b[1] : p.b[0]; };
    const auto second = make_phase<TB, 1, false>(
        gw < n_rows ? (n_rows - gw + n_warps - 1) / n_warps : 0, n / Unit<TB>::kElems,
        [&](int j) {
          const int g = gw + n_warps * j;
          const int ti = (p.n_b > 2 && g >= p.b_begin[2]) ? 2 : (p.n_b > 1 && g >= p.b_begin[1]) ? 1 : 0;
          return RowAt{ti, g - (ti == 2 ? p.b_begin[2] : ti == 1 ? p.b_begin[1] : 0)};
        },
        [&](int ti, int) -> const DeviceWeight& { return task(ti).w; });
    pipe_two(first, second, ring, kStageBytes, p.stages, p.early, lane, start_a, done_a, between,
             [&](int, RowAt at, const float (&s)[1]) {
               if (lane == 0) store_row<true>(task(at.task), at.r, s[0], scale);
             });
  }
  if (probe != nullptr) {
    __syncthreads();
    if (leader && blockIdx.x < kBridgeProbeBlocks) {
      t[5] = clock64();
      unsigned long long* f = probe + (static_cast<size_t>(kGateUp ? 1 : 0) * kBridgeProbeBlocks + blockIdx.x) * kBridgeProbeFields;
      atomicAdd(f, 1ull);
      for (int i = 1; i < 6; ++i) atomicAdd(f + i, static_cast<unsigned long long>(t[i] - t[i - 1]));
    }
  }
#else
  __trap();  // launched only on sm_80 and later (device_limits().cc_major)
#endif
}

// The second product's weights, for the default mode's size rule.
int second_weights(const BridgeArgs& a, DeviceWeight (&w)[kMaxMatvecTasks]) {
  if (a.gate.q != nullptr) {
    w[0] = a.gate;
    w[1] = a.up;
    return 2;
  }
  for (int i = 0; i < a.n_next; ++i) w[i] = a.next[i].w;
  return a.n_next;
}

}  // namespace

void set_bridge(int mode) { g_bridge.store(mode, std::memory_order_relaxed); }
cudaError_t set_bridge_probe(unsigned long long* buf) { return cudaMemcpyToSymbol(g_bridge_probe, &buf, sizeof(buf)); }
int bridge() { return g_bridge.load(std::memory_order_relaxed); }
uint64_t bridge_launches() { return g_bridge_launches.load(std::memory_order_relaxed); }

cudaError_t launch_bridge(const BridgeArgs& a, cudaStream_t stream) {
  const int mode = bridge();
  const bool gate_up = a.gate.q != nullptr;
  const int n = a.product.w.n_rows;
  if (mode == 0 || device_limits().cc_major < 8 || !a.product.accumulate || a.product.y == nullptr || a.x.q == nullptr ||
      a.norm_w == nullptr || a.norm_q.q == nullptr || a.norm_scale == nullptr || a.barrier == nullptr || n % 32 != 0) {
    return cudaErrorNotSupported;
  }
  DeviceWeight second[kMaxMatvecTasks];
  const int n_second = second_weights(a, second);
  if (gate_up) {
    if (a.h == nullptr || a.up.type != a.gate.type || a.up.n_rows != a.gate.n_rows || a.gate.n_rows % 32 != 0) {
      return cudaErrorNotSupported;
    }
  } else if (a.n_next < 1 || a.n_next > kMaxMatvecTasks) {
    return cudaErrorNotSupported;
  }
  for (int i = 0; i < n_second; ++i) {
    if (second[i].type != second[0].type || second[i].k != n) return cudaErrorNotSupported;
  }
  if (!wanted(mode == 1 ? 1 : gate_up ? gate_up_piped() : matvec_piped(), second, n_second)) return cudaErrorNotSupported;

  BridgeParams p{};
  p.a = a.product;
  p.a_in = DotInput{nullptr, a.x.q, static_cast<const float2*>(a.x.ds)};
  p.norm_w = a.norm_w;
  p.eps = a.norm_eps;
  p.norm_q = a.norm_q.q;
  p.norm_ds = static_cast<float2*>(a.norm_q.ds);
  p.norm_scale = a.norm_scale;
  p.gate = a.gate;
  p.up = a.up;
  p.h = a.h;
  p.hq = a.hq.q;
  p.hds = static_cast<float2*>(a.hq.ds);
  int rows = 0;
  for (int i = 0; i < (gate_up ? 0 : a.n_next); ++i) {
    p.b[i] = a.next[i];
    p.b_begin[i] = rows;
    rows += a.next[i].w.n_rows;
  }
  p.b_begin[gate_up ? 0 : a.n_next] = rows;
  p.n_b = gate_up ? 0 : a.n_next;
  p.barrier = a.barrier;

  auto run = [&](auto kernel, size_t stage_bytes) -> cudaError_t {
    // Every SM a block: the barrier needs them all resident at once.
    const size_t fixed = std::max(staged_bytes(a.product.w.k), staged_bytes(n)) + sizeof(float) * static_cast<size_t>(n / 32);
    const int groups = gate_up ? a.gate.n_rows / 32 : 0;
    const ResidentShape sh = resident_shape(reinterpret_cast<const void*>(kernel), kPipedWarps * stage_bytes, fixed, groups,
                                            INT_MAX, gate_up ? 32 * sizeof(float) : 0);
    if (sh.grid == 0) return cudaErrorNotSupported;
    p.stages = sh.stages;
    p.early = sh.early;
    const cudaError_t st = launch_kernel(kernel, dim3(sh.grid), dim3(kPipedWarps * kWarp), sh.smem, stream, p);
    if (st == cudaSuccess) g_bridge_launches.fetch_add(1, std::memory_order_relaxed);
    return st;
  };
  return dispatch_wtype(a.product.w.type, [&](auto ta) -> cudaError_t {
    return dispatch_wtype(second[0].type, [&](auto tb) -> cudaError_t {
      constexpr int TA = decltype(ta)::value, TB = decltype(tb)::value;
      if (gate_up) {
        if constexpr (kBridgePair<TA, TB, true>) {
          if (pipeable<TA>(a.product.w) && pipeable<TB>(a.gate) && pipeable<TB>(a.up)) {
            return run(bridge_kernel<TA, TB, true>, kBridgeStageBytes<TA, TB, true>);
          }
        }
        return cudaErrorNotSupported;
      }
      if constexpr (kBridgePair<TA, TB, false>) {
        bool ok = pipeable<TA>(a.product.w);
        for (int i = 0; i < a.n_next; ++i) ok = ok && pipeable<TB>(a.next[i].w);
        if (ok) return run(bridge_kernel<TA, TB, false>, kBridgeStageBytes<TA, TB, false>);
      }
      return cudaErrorNotSupported;
    });
  });
}

}  // namespace minfer::kernels

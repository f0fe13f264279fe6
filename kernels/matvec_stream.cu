// Decode matvecs whose weights stream through shared memory (sm_90).
//
// The plain kernels (matvec_kernels.cuh) load weights into registers, so the bytes a
// warp keeps in flight are bounded by its registers, and a row's first load
// waits for the previous kernel (PDL) unless the row fits a prefetch. Here a
// block owns consecutive groups of rows and walks them in tiles — a group's
// rows, a slice of their units — that the Hopper bulk-copy engine
// (cp.async.bulk) moves from each weight plane into a ring of shared-memory
// stages, signalling an mbarrier per stage. No register holds a byte in
// flight; a block keeps every stage but the one it computes on loading, and it
// starts its first stages before its PDL wait (weights are constants), so they
// overlap the previous kernel.
//
// The dot products are the plain kernels' (Unit::load from the stage,
// Unit::dot): lane l takes units l, l + 32, ... of each slice, slices in
// order, so a lane's sum runs in unit order and the results are bit-identical
// to matvec.cu's. Applies to the types with Unit::Raw (Q8_0, Q4_K, Q5_K,
// Q6_K); every other case, and devices before sm_90, use matvec.cu.
//
// Opt-in (set_matvec_stream; MINFER_MATVEC_STREAM=1): on the H200 it is slower
// than matvec.cu (7B gate/up Q4_K 37.5 vs 29.7 µs a launch), though its copies
// alone reach 87-98% of the copy bandwidth: the consumer, one block of 16
// warps an SM doing the same unpacking arithmetic, is the limit
// (bench/results/2026-11-30-h200-session4).
#include <algorithm>
#include <atomic>

#include "kernels/dot.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matvec_stream.cuh"

namespace minfer::kernels {
namespace {

std::atomic<bool> g_stream{false};
std::atomic<uint64_t> g_stream_launches{0};
std::atomic<int> g_shape_warps{0}, g_shape_units{0}, g_shape_stages{0};

constexpr int kPlanes = 4;  // q, qh, meta, d (weight_layout.h)
constexpr int kMaxStages = 8;
constexpr int kMaxSliceUnits = 128;  // rows of up to this many units are one slice
constexpr int kStaticSmem = 2048;  // the kernel's own shared memory (barriers, out[]), rounded up

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done bra WAIT;\n}" ::"r"(
          smem_u32(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
// The barriers' initialisation, visible to the bulk-copy (async) proxy.
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
#endif

// The weights of one launch and where a tile of them lands in a stage.
//
// A group is the rows_per_group rows the block's warps take at once (one a
// warp); a tile is the group's rows over a slice of units. Rows of at most
// kMaxSliceUnits units are one slice (whole rows), and then each plane's
// part of a tile is one contiguous copy of all the group's rows; longer rows
// are cut into slices, one copy a row and plane. Bulk copies move whole
// 16-byte pieces from 16-byte-aligned addresses: a copy starts at the piece
// holding its first byte and ends at the piece holding its last (planes are
// padded to 16 bytes), and its data begins (start & 15) bytes into its slot.
// A stage holds, for each weight, each plane's region: [R rows of the plane]
// (whole rows) or R slots of one row's slice each.
struct StreamArgs {
  MatvecTask t[kMaxMatvecTasks];  // matvec: the tasks; gate/up: t[0] gate, t[1] up
  int group_begin[kMaxMatvecTasks + 1];
  int n_tasks;
  int n_units;                  // units a row
  int rows_per_group;           // R
  int units_per_slice;          // U, a multiple of 32
  int n_slices;                 // ceil(n_units / U); 1: whole rows
  int stages;                   // S
  int groups_per_block;         // even for gate/up (two groups make a Q8 block of h)
  uint32_t plane_row[kPlanes];  // bytes of a row in each plane (0: none)
  uint32_t unit2[kPlanes];      // twice the bytes of a unit in each plane (Q6_K's d: 1)
  uint32_t slot[kPlanes];       // slices: bytes of a row's slot in each plane
  uint32_t region[kPlanes];     // offset of each plane's region in a weight's part
  uint32_t weight_bytes;        // one weight's part of a stage
  uint32_t stage_bytes;
  DotInput in;
  float* h;  // gate/up: silu(gate) * up, and its Q8 blocks
  int8_t* hq;
  float2* hds;
};

// The device helpers exist for sm_90 only (and the host pass, which needs
// their declarations for the kernel template).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__device__ __forceinline__ const void* plane_of(const DeviceWeight& w, int p) {
  return p == 0 ? w.q : p == 1 ? w.qh : p == 2 ? w.meta : w.d;
}

// The task (matvec) of group g, with constant indices (a run-time index into
// the parameter array would copy it to local memory).
__device__ __forceinline__ int task_of(const StreamArgs& a, int g) {
  return (a.n_tasks > 2 && g >= a.group_begin[2]) ? 2 : (a.n_tasks > 1 && g >= a.group_begin[1]) ? 1 : 0;
}
__device__ __forceinline__ const MatvecTask& task_at(const StreamArgs& a, int ti) { return ti == 2 ? a.t[2] : ti == 1 ? a.t[1] : a.t[0]; }
__device__ __forceinline__ int group_first_row(const StreamArgs& a, int g, int ti) {
  return (g - (ti == 2 ? a.group_begin[2] : ti == 1 ? a.group_begin[1] : 0)) * a.rows_per_group;
}

// Copy c of a tile: weight wi, plane p, and (slices) row rho of the group.
struct Piece {
  uintptr_t start;  // the first byte wanted, in global memory
  uint32_t bytes;   // bytes wanted (0: no copy)
  uint32_t dst;     // offset of its slot in the stage
};
__device__ __forceinline__ Piece tile_piece(const StreamArgs& a, const DeviceWeight& w, int wi, int p, int rho, int r0, int nr,
                                            int u0, int nu) {
  Piece pc{0, 0, static_cast<uint32_t>(wi) * a.weight_bytes + a.region[p]};
  if (a.plane_row[p] == 0) return pc;
  const uintptr_t plane = reinterpret_cast<uintptr_t>(plane_of(w, p));
  if (a.n_slices == 1) {
    pc.start = plane + static_cast<size_t>(r0) * a.plane_row[p];
    pc.bytes = static_cast<uint32_t>(nr) * a.plane_row[p];
  } else {
    if (rho >= nr) return pc;
    pc.start = plane + static_cast<size_t>(r0 + rho) * a.plane_row[p] + static_cast<uint32_t>(u0) * a.unit2[p] / 2;
    pc.bytes = static_cast<uint32_t>(nu) * a.unit2[p] / 2;
    pc.dst += static_cast<uint32_t>(rho) * a.slot[p];
  }
  return pc;
}

// Warp 0: issue the tile (group g, slice s) into stage `stage`, one lane a copy.
template <bool kPair>
__device__ void issue_tile(const StreamArgs& a, int g, int s, unsigned char* stage, uint64_t* bar, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int ti = kPair ? 0 : task_of(a, g);
  const int r0 = group_first_row(a, g, ti);
  const int nr = min(a.rows_per_group, task_at(a, ti).w.n_rows - r0);
  const int u0 = s * a.units_per_slice, nu = min(a.units_per_slice, a.n_units - u0);
  const int per_weight = a.n_slices == 1 ? kPlanes : kPlanes * a.rows_per_group;
  const int n_copies = (kPair ? 2 : 1) * per_weight;
  uint32_t total = 0;
  for (int c = lane; c < n_copies; c += kWarp) {
    const int wi = c / per_weight, rest = c % per_weight;
    const DeviceWeight& w = kPair ? (wi == 0 ? a.t[0].w : a.t[1].w) : task_at(a, ti).w;
    const Piece pc = tile_piece(a, w, wi, rest % kPlanes, rest / kPlanes, r0, nr, u0, nu);
    if (pc.bytes) total += static_cast<uint32_t>(((pc.start + pc.bytes + 15) & ~uintptr_t{15}) - (pc.start & ~uintptr_t{15}));
  }
  total = static_cast<uint32_t>(warp_sum_int(static_cast<int>(total)));
  if (lane == 0) mbar_expect_tx(bar, total);
  __syncwarp();
  for (int c = lane; c < n_copies; c += kWarp) {
    const int wi = c / per_weight, rest = c % per_weight;
    const DeviceWeight& w = kPair ? (wi == 0 ? a.t[0].w : a.t[1].w) : task_at(a, ti).w;
    const Piece pc = tile_piece(a, w, wi, rest % kPlanes, rest / kPlanes, r0, nr, u0, nu);
    if (pc.bytes == 0) continue;
    const uintptr_t from = pc.start & ~uintptr_t{15};
    const uint32_t bytes = static_cast<uint32_t>(((pc.start + pc.bytes + 15) & ~uintptr_t{15}) - from);
    bulk_copy(stage + pc.dst, reinterpret_cast<const void*>(from), bytes, bar);
  }
#endif
}

// Row r0 + rho of `w` as the stage holds it: plane pointers such that
// Unit::load(view, 0, u) reads unit u of the row from its slot.
__device__ __forceinline__ DeviceWeight staged_view(const StreamArgs& a, const DeviceWeight& w, int wi, int r0, int rho, int u0,
                                                    const unsigned char* stage) {
  auto at = [&](int p) -> const void* {
    const Piece pc = tile_piece(a, w, wi, p, rho, r0, a.rows_per_group, u0, 0);
    const size_t in_region = a.n_slices == 1 ? static_cast<size_t>(rho) * a.plane_row[p] : 0;
    return stage + pc.dst + (pc.start & 15) + in_region - static_cast<uint32_t>(u0) * a.unit2[p] / 2;
  };
  DeviceWeight v = w;
  if (a.plane_row[0]) v.q = at(0);
  if (a.plane_row[1]) v.qh = at(1);
  if (a.plane_row[2]) v.meta = at(2);
  if (a.plane_row[3]) v.d = at(3);
  return v;
}

// Lane `lane`'s part of a slice of a staged row: units u0 + lane + 32 j, in
// order, added to acc. Loads first (indices past the slice clamped to its
// last unit, their values dropped), then the dot products.
template <WType T, int kPerLane>
__device__ __forceinline__ void slice_dot(const DeviceWeight& v, int u0, int nu, const DotInput& in, int lane, float* acc) {
  typename Unit<T>::Raw raw[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) raw[j] = Unit<T>::load(v, 0, u0 + min(lane + kWarp * j, nu - 1), SmemFetch{});
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int u = u0 + min(lane + kWarp * j, nu - 1);
    const float part = Unit<T>::dot(raw[j], u, in);
    if (lane + kWarp * j < nu) *acc = add_rn(*acc, part);
  }
}

#endif  // sm_90

// One warp a row of the group. kPair: gate and up, silu(gate) * up into h;
// two consecutive groups (16 rows each) make a Q8 block of h, quantized once
// the second is done.
template <int kType, bool kPair, int kPerLane>
__global__ void __launch_bounds__(kPair ? 512 : 256) matvec_stream_kernel(StreamArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr WType T = static_cast<WType>(kType);
  extern __shared__ __align__(128) unsigned char stream_smem[];
  // full[s]: stage s has landed (the bulk copies' bytes); empty[s]: every
  // warp has read it (one arrival a warp), so warp 0 may refill it. Warps run
  // ahead of each other by up to the stages in flight.
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
  // h of a Q8 block, by block: warps run up to `stages` tiles (stages / 2
  // blocks) ahead of warp 0, which quantizes it.
  __shared__ float out[kMaxStages][kPair ? 32 : 1];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int n_warps = static_cast<int>(blockDim.x) / kWarp;
  const int n_groups = a.group_begin[a.n_tasks];
  const int first_group = blockIdx.x * a.groups_per_block;
  const int n_tiles = min(a.groups_per_block, n_groups - first_group) * a.n_slices;
  if (threadIdx.x < a.stages) {
    mbar_init(&full[threadIdx.x], 1);
    mbar_init(&empty[threadIdx.x], static_cast<uint32_t>(n_warps));
  }
  fence_async_smem();
  __syncthreads();
  // The producer's position: the next tile to issue, as (group, slice, stage).
  int pg = first_group, ps = 0, pst = 0, issued = 0;
  auto issue_next = [&] {
    issue_tile<kPair>(a, pg, ps, stream_smem + static_cast<size_t>(pst) * a.stage_bytes, &full[pst], lane);
    ++issued;
    if (++ps == a.n_slices) ps = 0, ++pg;
    if (++pst == a.stages) pst = 0;
  };
  if (warp == 0) {
    while (issued < a.stages && issued < n_tiles) issue_next();
  }
  pdl_begin();

  float acc = 0.0f, acc_up = 0.0f;
  int g = first_group, s = 0, st = 0;
  uint32_t parity = 0;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int ti = kPair ? 0 : task_of(a, g);
    const MatvecTask& t = task_at(a, ti);
    const int r0 = group_first_row(a, g, ti), r = r0 + warp;
    const int u0 = s * a.units_per_slice, nu = min(a.units_per_slice, a.n_units - u0);
    mbar_wait(&full[st], parity);
    const unsigned char* stage = stream_smem + static_cast<size_t>(st) * a.stage_bytes;
    if (r < t.w.n_rows) {
      slice_dot<T, kPerLane>(staged_view(a, t.w, 0, r0, warp, u0, stage), u0, nu, a.in, lane, &acc);
      if constexpr (kPair) slice_dot<T, kPerLane>(staged_view(a, a.t[1].w, 1, r0, warp, u0, stage), u0, nu, a.in, lane, &acc_up);
    }
    const bool row_done = s == a.n_slices - 1;
    if (row_done) {
      const float v = warp_sum(acc);
      if constexpr (kPair) {
        const float u = warp_sum(acc_up);
        if (lane == 0) {
          const float hv = silu(v) * u;
          out[g / 2 % kMaxStages][(g % 2) * 16 + warp] = hv;
          a.h[r] = hv;
        }
      } else if (lane == 0 && r < t.w.n_rows) {
        float y = v;
        if (t.bias != nullptr) y += t.bias[r];
        const float o = t.accumulate ? t.y[r] + y : y;
        t.y[r] = o;
        if (t.argmax != nullptr) argmax_fold(t.argmax, argmax_pack(o, r));
      }
      acc = acc_up = 0.0f;
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[st]);  // this warp is done with the stage (and out[])
    if (warp == 0) {
      mbar_wait(&empty[st], parity);  // every warp is
      if (kPair && row_done && g % 2 == 1 && a.hq != nullptr) quantize_block_q8(out[g / 2 % kMaxStages][lane], lane, g / 2, a.hq, a.hds);
      if (issued < n_tiles) issue_next();
    }
    if (row_done) s = 0, ++g;
    else ++s;
    if (++st == a.stages) st = 0, parity ^= 1u;
  }
#else
  __trap();  // launched only on sm_90 and later (stream_launch)
#endif
}

size_t round16(size_t x) { return (x + 15) / 16 * 16; }

struct Shape {
  int warps, units, stages;
};

template <int kType>
constexpr bool kStreamable = kType >= 0 && kHasRaw<static_cast<WType>(kType)>;

// Fills the stage layout of `a` for `shape` (a.t set); false if a ring of
// two stages does not fit.
bool plan(StreamArgs& a, WType type, int k, Shape shape, int rows_per_group, int n_weights, int max_smem, bool sliced = false) {
  const PlaneSizes ps = plane_sizes(type, k);
  const size_t rows[kPlanes] = {ps.q_row, ps.qh_row, ps.meta_row, ps.d_row};
  a.n_units = k / (type == WType::kQ8_0 ? 32 : 64);
  const int whole = a.n_units <= 32 ? 32 : a.n_units <= 64 ? 64 : 128;
  a.units_per_slice = a.n_units <= kMaxSliceUnits && !sliced ? whole : shape.units;
  a.n_slices = (a.n_units + a.units_per_slice - 1) / a.units_per_slice;
  a.rows_per_group = rows_per_group;
  uint32_t off = 0;
  for (int p = 0; p < kPlanes; ++p) {
    a.plane_row[p] = static_cast<uint32_t>(rows[p]);
    a.unit2[p] = static_cast<uint32_t>(2 * rows[p] / a.n_units);
    a.region[p] = off;
    if (rows[p] == 0) {
      a.slot[p] = 0;
    } else if (a.n_slices == 1) {
      a.slot[p] = 0;
      off += static_cast<uint32_t>(round16(rows[p] * rows_per_group) + 16);
    } else {
      a.slot[p] = static_cast<uint32_t>(round16(static_cast<size_t>(a.units_per_slice) * a.unit2[p] / 2) + 16);
      off += a.slot[p] * static_cast<uint32_t>(rows_per_group);
    }
  }
  a.weight_bytes = off;
  a.stage_bytes = off * static_cast<uint32_t>(n_weights);
  a.stages = std::min({shape.stages, kMaxStages, (max_smem - kStaticSmem) / static_cast<int>(a.stage_bytes)});
  if (a.stages < 2 && a.n_slices == 1 && !sliced) return plan(a, type, k, shape, rows_per_group, n_weights, max_smem, true);
  return a.stages >= 2;
}

// Grid, groups a block, shared memory; then the launch.
template <class Kernel>
cudaError_t stream_launch(Kernel kernel, StreamArgs& a, int threads, bool even_groups, cudaStream_t stream) {
  const DeviceLimits lim = device_limits();
  const size_t smem = static_cast<size_t>(a.stages) * a.stage_bytes;
  const int per_sm = blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, smem, lim.max_smem - kStaticSmem);
  if (per_sm < 1) return cudaErrorNotSupported;
  const int n_groups = a.group_begin[a.n_tasks];
  const int resident = per_sm * lim.sms;
  a.groups_per_block = (n_groups + resident - 1) / resident;
  if (even_groups) a.groups_per_block += a.groups_per_block % 2;
  const int grid = (n_groups + a.groups_per_block - 1) / a.groups_per_block;
  const cudaError_t st = launch_kernel(kernel, dim3(grid), dim3(threads), smem, stream, a);
  if (st == cudaSuccess) g_stream_launches.fetch_add(1, std::memory_order_relaxed);
  return st;
}

Shape shape_or(Shape def) {
  const Shape forced{g_shape_warps.load(), g_shape_units.load(), g_shape_stages.load()};
  return Shape{forced.warps > 0 ? forced.warps : def.warps, forced.units > 0 ? forced.units : def.units,
               forced.stages > 0 ? forced.stages : def.stages};
}

// Launches kernel<kPerLane> for the plan's units a slice.
template <int T, bool kPair>
cudaError_t launch_planned(StreamArgs& a, int threads, bool even_groups, cudaStream_t stream) {
  switch (a.units_per_slice) {
    case 32: return stream_launch(matvec_stream_kernel<T, kPair, 1>, a, threads, even_groups, stream);
    case 64: return stream_launch(matvec_stream_kernel<T, kPair, 2>, a, threads, even_groups, stream);
    case 128: return stream_launch(matvec_stream_kernel<T, kPair, 4>, a, threads, even_groups, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

void set_matvec_stream(bool on) { g_stream.store(on, std::memory_order_relaxed); }
bool matvec_stream() { return g_stream.load(std::memory_order_relaxed); }
uint64_t matvec_stream_launches() { return g_stream_launches.load(std::memory_order_relaxed); }
void set_matvec_stream_shape(int warps, int units, int stages) {
  g_shape_warps.store(warps);
  g_shape_units.store(units);
  g_shape_stages.store(stages);
}

// Defaults (the H200, tests/gpu/matvec_bench.cpp): matvec 8 warps, rows of
// more than 128 units in slices of 128, up to 4 stages; gate/up 16 warps,
// slices of 64 units, up to 3 stages.
cudaError_t launch_matvec_streamed(const MatvecTask* tasks, int n_tasks, const DotInput& in, cudaStream_t stream, bool launch) {
  if (!matvec_stream()) return cudaErrorNotSupported;
  const DeviceLimits lim = device_limits();
  if (lim.sms == 0) return cudaErrorNotSupported;
  for (int i = 0; i < n_tasks; ++i) {
    if (tasks[i].w.type != tasks[0].w.type || tasks[i].w.k != tasks[0].w.k || !planes_aligned(tasks[i].w)) return cudaErrorNotSupported;
  }
  const Shape shape = shape_or(Shape{8, 128, 4});
  if (shape.warps < 1 || shape.warps > 8) return cudaErrorInvalidValue;
  StreamArgs a{};
  a.n_tasks = n_tasks;
  a.in = in;
  int groups = 0;
  for (int i = 0; i < n_tasks; ++i) {
    a.t[i] = tasks[i];
    a.group_begin[i] = groups;
    groups += (tasks[i].w.n_rows + shape.warps - 1) / shape.warps;
  }
  a.group_begin[n_tasks] = groups;
  return dispatch_wtype(tasks[0].w.type, [&](auto type) -> cudaError_t {
    constexpr int T = decltype(type)::value;
    if constexpr (!kStreamable<T>) {
      return cudaErrorNotSupported;
    } else {
      if (!plan(a, static_cast<WType>(T), tasks[0].w.k, shape, shape.warps, 1, lim.max_smem)) return cudaErrorNotSupported;
      if (!launch) return cudaSuccess;
      return launch_planned<T, false>(a, shape.warps * kWarp, false, stream);
    }
  });
}

cudaError_t launch_gate_up_streamed(const DeviceWeight& gate, const DeviceWeight& up, const DotInput& in, float* h, int8_t* hq,
                                    float2* hds, cudaStream_t stream) {
  if (!matvec_stream()) return cudaErrorNotSupported;
  const DeviceLimits lim = device_limits();
  if (lim.sms == 0 || gate.type != up.type || !planes_aligned(gate) || !planes_aligned(up)) return cudaErrorNotSupported;
  constexpr int kWarps = 16;  // a group: 16 rows, half a Q8 block of h
  const Shape shape = shape_or(Shape{kWarps, 64, 3});
  StreamArgs a{};
  a.n_tasks = 1;
  a.t[0].w = gate;
  a.t[1].w = up;
  a.in = in;
  a.group_begin[0] = 0;
  a.group_begin[1] = gate.n_rows / kWarps;
  a.h = h;
  a.hq = hq;
  a.hds = hds;
  return dispatch_wtype(gate.type, [&](auto type) -> cudaError_t {
    constexpr int T = decltype(type)::value;
    if constexpr (!kStreamable<T>) {
      return cudaErrorNotSupported;
    } else {
      if (!plan(a, static_cast<WType>(T), gate.k, shape, kWarps, 2, lim.max_smem)) return cudaErrorNotSupported;
      return launch_planned<T, true>(a, kWarps * kWarp, true, stream);
    }
  });
}

}  // namespace minfer::kernels

// Dot products of one weight row (plane layout, weight_layout.h) with the
// activations, one warp per row: each lane takes every 32nd unit of the row
// (a unit is one block, or the part of a K-quant super-block whose quants are
// 32 bytes), loads it with 16-byte loads and accumulates in f32; the warp sum
// is the row's value. Quantized weights use the Q8 activations and dp4a;
// float weights use the f32 activations.
#pragma once

#include <type_traits>

#include "kernels/common.cuh"
#include "kernels/weight_layout.h"

namespace minfer::kernels {

struct DotInput {
  const float* x;    // [k] f32 (float weights)
  const int8_t* q;   // [k] Q8 values (quantized weights)
  const float2* ds;  // [k/32] Q8 scales and sums
  // The integer sum of each 16-value chunk of q, chunk c at 8 (c / 8) + 4 (c %
  // 2) + (c % 8) / 2 (a Q6_K unit's four in one 16-byte read), or nullptr:
  // the dot products add them up themselves (the same integers either way).
  const int* csum = nullptr;
};

// Where chunk c's sum lies in DotInput::csum.
__host__ __device__ constexpr int chunk_sum_slot(int c) { return 8 * (c / 8) + 4 * (c % 2) + (c % 8) / 2; }

// Weights: read-only global memory, through the non-coherent cache.
// Tried on the H200 (2026-12-02, not kept): these loads with an L2
// evict-first policy (createpolicy + ld.global.nc.L2::cache_hint), so that
// the weight stream would leave the kernels' code, the K/V rows and the
// activations in L2. Decode attention did not move (0.5B Q8_0 5.43 vs 5.44
// µs a layer, 7B Q8_0 8.53 vs 8.80), the 0.5B output head slowed (54.2 vs
// 45.7 µs) and the hint's registers took attn_output off its preloading
// kernel: tg128 0.5B Q8_0 1,856 vs 1,900 tok/s, 7B Q8_0 393 vs 403, Q4_K_M
// 525 vs 519 (same run). The same hint on the pipelined kernels' 16-byte
// cp.async raised cudaErrorIllegalInstruction (CUDA 13.0, driver 580)
// (bench/results/2026-12-02-h200-session20).
__device__ __forceinline__ int4 ld16(const void* p) { return __ldg(reinterpret_cast<const int4*>(p)); }
__device__ __forceinline__ float4 ld16f(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
// Activations: generic loads, since the norm-fused matvec keeps them in
// shared memory (ld.global.nc on a shared address is an error).
__device__ __forceinline__ int4 ld16a(const void* p) { return *reinterpret_cast<const int4*>(p); }
__device__ __forceinline__ float4 ld16fa(const float* p) { return *reinterpret_cast<const float4*>(p); }
// Where a Unit::load takes its weight bytes from (`f(p)`: the 16 bytes at p;
// `f.u64(p)`: the 8 at p; `f.u16(p)`: the 2-byte scale at p; `f.quad16(p)`:
// the 16 bytes at p that the four lanes of a K-quant super-block's units
// share, its meta; `f.pair8(p)`: 8 bytes the two lanes of a Q6_K half
// super-block share; `f.quad_u16(p)`: a 2-byte scale the four lanes of a
// super-block share), in the order the load reads them:
// global memory (GlobalFetch), a stage in shared memory that the streamed
// matvec filled (SmemFetch, matvec_stream.cu), or a lane's own slots that
// the pipelined gate/up fills and reads back (matvec_piped.cu).
struct GlobalFetch {
  __device__ int4 operator()(const void* p) const { return ld16(p); }
  __device__ int2 u64(const void* p) const { return __ldg(static_cast<const int2*>(p)); }
  __device__ uint16_t u16(const uint16_t* p) const { return *p; }
  __device__ int4 quad16(const void* p) const { return ld16(p); }
  __device__ int2 pair8(const void* p) const { return u64(p); }
  __device__ uint16_t quad_u16(const uint16_t* p) const { return *p; }
};
struct SmemFetch {
  __device__ int4 operator()(const void* p) const { return ld16a(p); }
  __device__ int2 u64(const void* p) const { return *static_cast<const int2*>(p); }
  __device__ uint16_t u16(const uint16_t* p) const { return *p; }
  __device__ int4 quad16(const void* p) const { return ld16a(p); }
  __device__ int2 pair8(const void* p) const { return u64(p); }
  __device__ uint16_t quad_u16(const uint16_t* p) const { return *p; }
};

// Byte `off` of a plane. Offsets are 32-bit (one multiply-add a row, one
// 64-bit add), so every plane is under 4 GiB (plane_offsets_fit, weight_layout.h:
// the CUDA weight gate checks it).
__device__ __forceinline__ const uint8_t* plane_at(const void* plane, uint32_t off) {
  return static_cast<const uint8_t*>(plane) + off;
}

// Where a dot takes its Q8 activations from, by 16-byte chunk c of in.q
// (values 16 c onwards): where they lie (PlainActs: the row in global
// memory, or the norm prologue's copy in shared memory), or the pipelined
// kernels' copy in shared memory with chunk c at c ^ ((c / 8) % 8)
// (SwizzledActs, matvec_piped.cu). The scales in.ds lie as they are either
// way. The types the pipelined kernels take (Q8_0, Q4_K, Q5_K, Q6_K) read
// through it.
// `a.quad(in, c, i)`: chunk c + i for c a multiple of 4 and i < 4 (a K-quant
// unit's four), which the swizzle keeps in one aligned group of four: chunk
// c's place with i in its low bits, without the swizzle's arithmetic again.
// `a.every2(in, c, g)`: chunk c + 2 g for c % 8 < 2 and g < 4 (a Q6_K unit's
// four groups), in one aligned group of eight: chunk c's place ^ 2 g.
struct PlainActs {
  static constexpr bool kSums = false;  // in.csum may be nullptr
  __device__ int4 operator()(const DotInput& in, int c) const { return ld16a(in.q + 16 * c); }
  __device__ int4 quad(const DotInput& in, int c, int i) const { return (*this)(in, c + i); }
  __device__ int4 every2(const DotInput& in, int c, int g) const { return (*this)(in, c + 2 * g); }
};
// The pipelined kernels' staged activations (pipe.cuh stage_acts): chunk c
// at swizzled_chunk(c); with the chunk sums (stage_acts<true>: Q6_K's
// pipelined matvec, whose unit reads chunks c + 2 g) at summed_chunk(c), a
// 128-byte row's chunks permuted by 2 × (row mod 4), so that the eight lanes
// of a quarter warp — four rows, two neighbouring chunks each — read eight
// distinct 16-byte places for every group g (swizzled_chunk leaves Q6_K's
// reads two to a place); and then in.ds holds each Q8 block's d alone
// (floats: Q6_K reads no d × Σq), the four of a unit one 16-byte read (as
// float2 they were four reads four to a bank). summed_d gives them. (Both
// places: weight_layout.h.)
template <bool kWithSums>
struct StagedActs {
  static constexpr bool kSums = kWithSums;
  __device__ static int place(int c) { return kWithSums ? summed_chunk(c) : swizzled_chunk(c); }
  __device__ int4 operator()(const DotInput& in, int c) const { return reinterpret_cast<const int4*>(in.q)[place(c)]; }
  __device__ int4 quad(const DotInput& in, int c, int i) const {
    return reinterpret_cast<const int4*>(in.q)[place(c) ^ i];
  }
  __device__ int4 every2(const DotInput& in, int c, int g) const {
    return reinterpret_cast<const int4*>(in.q)[place(c) ^ (2 * g)];
  }
};
using SwizzledActs = StagedActs<false>;
using SummedSwizzledActs = StagedActs<true>;
__device__ __forceinline__ const float* summed_d(const DotInput& in) { return reinterpret_cast<const float*>(in.ds); }

// Every plane of w 16-byte aligned: the kernels that copy weights into
// shared memory (matvec_stream.cu, matvec_piped.cu) move whole pieces.
inline bool planes_aligned(const DeviceWeight& w) {
  for (const void* p : {w.q, w.qh, w.meta, w.d}) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// Order-preserving key of (value, row): the float's bits mapped so that
// unsigned order is numeric order, then ~row so that ties favour the lowest
// row. NaN maps to 0 and never wins.
__device__ __forceinline__ unsigned long long argmax_pack(float v, int row) {
  if (isnan(v)) return 0ull;
  const uint32_t b = __float_as_uint(v);
  const uint32_t ord = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<unsigned long long>(ord) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(row));
}

// Folds a row's key into *argmax (MatvecTask::argmax). Every row of the
// output head (~150,000) doing an atomicMax on one word serializes them in
// the L2: the 0.5B head took 142 µs a step instead of 57 (H200, CUPTI
// timeline, 2026-12-01). A key not above the value already there cannot win,
// so it skips the atomic; a stale read only costs an atomic that was not
// needed, never a wrong result (atomicMax keeps the largest).
__device__ __forceinline__ void argmax_fold(unsigned long long* argmax, unsigned long long key) {
  if (key > *reinterpret_cast<volatile const unsigned long long*>(argmax)) atomicMax(argmax, key);
}

// A lane's running sum of unit values: an explicitly rounded add, so that the
// compiler cannot contract it with the unit's last product into an FMA in one
// kernel and not in another (the plain and streamed matvecs must agree to
// the bit).
__device__ __forceinline__ float add_rn(float acc, float v) { return __fadd_rn(acc, v); }

// Row r of every plane of w into L2 (prefetch: no registers, nothing waits
// for it). Decode kernels call it before their PDL wait: weights are
// constant, so the first DRAM round trip of a row overlaps the previous kernel.
// `lanes` lanes share the row (lane: 0 .. lanes - 1).
__device__ __forceinline__ void prefetch_plane_row(const void* plane, size_t row_bytes, int r, int lane, int lanes) {
  if (plane == nullptr || row_bytes == 0) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(plane) + static_cast<size_t>(r) * row_bytes;
  const uintptr_t step = static_cast<uintptr_t>(lanes) * 128;
  for (uintptr_t a = (begin & ~uintptr_t{127}) + static_cast<uintptr_t>(lane) * 128; a < begin + row_bytes; a += step) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
  }
}
__device__ __forceinline__ void prefetch_row(const DeviceWeight& w, int r, int lane, int lanes = kWarp) {
  const PlaneSizes ps = plane_sizes(w.type, w.k);
  prefetch_plane_row(w.q, ps.q_row, r, lane, lanes);
  prefetch_plane_row(w.qh, ps.qh_row, r, lane, lanes);
  prefetch_plane_row(w.meta, ps.meta_row, r, lane, lanes);
  prefetch_plane_row(w.d, ps.d_row, r, lane, lanes);
}

// dp4a with unsigned bytes in a and signed bytes in b (no intrinsic has
// the mixed form).
__device__ __forceinline__ int dp4a_us(int a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

__device__ __forceinline__ int dot_q8x16(int4 w, int4 x, int acc) {
  acc = __dp4a(w.x, x.x, acc);
  acc = __dp4a(w.y, x.y, acc);
  acc = __dp4a(w.z, x.z, acc);
  return __dp4a(w.w, x.w, acc);
}

// 16 bytes of nibbles: low nibbles are elements 0..15, high nibbles 16..31
// (ggml order); x0/x1 hold the activations of those two halves.
__device__ __forceinline__ int dot_nibbles(int4 w, int4 x0, int4 x1, int acc) {
  constexpr int kLo = 0x0F0F0F0F;
  acc = __dp4a(w.x & kLo, x0.x, acc);
  acc = __dp4a(w.y & kLo, x0.y, acc);
  acc = __dp4a(w.z & kLo, x0.z, acc);
  acc = __dp4a(w.w & kLo, x0.w, acc);
  acc = __dp4a((w.x >> 4) & kLo, x1.x, acc);
  acc = __dp4a((w.y >> 4) & kLo, x1.y, acc);
  acc = __dp4a((w.z >> 4) & kLo, x1.z, acc);
  return __dp4a((w.w >> 4) & kLo, x1.w, acc);
}

// Spreads 4 bits to bit 4 of 4 bytes: bit i of h → byte i, value 16.
// (the four shifted copies of 4 bits do not overlap: no carries)
__device__ __forceinline__ int spread_bits4(uint32_t h) {
  return static_cast<int>((((h & 0xFu) * 0x00204081u) & 0x01010101u) << 4);
}

// 16 bytes of nibbles plus their 5th bits from the block's 32-bit qh.
__device__ __forceinline__ int dot_nibbles5(int4 w, uint32_t qh, int4 x0, int4 x1, int acc) {
  constexpr int kLo = 0x0F0F0F0F;
  acc = __dp4a((w.x & kLo) | spread_bits4(qh >> 0), x0.x, acc);
  acc = __dp4a((w.y & kLo) | spread_bits4(qh >> 4), x0.y, acc);
  acc = __dp4a((w.z & kLo) | spread_bits4(qh >> 8), x0.z, acc);
  acc = __dp4a((w.w & kLo) | spread_bits4(qh >> 12), x0.w, acc);
  acc = __dp4a(((w.x >> 4) & kLo) | spread_bits4(qh >> 16), x1.x, acc);
  acc = __dp4a(((w.y >> 4) & kLo) | spread_bits4(qh >> 20), x1.y, acc);
  acc = __dp4a(((w.z >> 4) & kLo) | spread_bits4(qh >> 24), x1.z, acc);
  return __dp4a(((w.w >> 4) & kLo) | spread_bits4(qh >> 28), x1.w, acc);
}

// ggml's get_scale_min_k4 for sub-blocks 2p and 2p + 1 of a K-quant meta
// block held in registers (bytes 4..15 are the 12 scale bytes s). Sub-block j
// < 4 has scale s[j] & 63 and min s[j + 4] & 63; j ≥ 4 has scale
// (s[j + 4] & 15) | (s[j - 4] >> 6) << 4 and min (s[j + 4] >> 4) |
// (s[j] >> 6) << 4. Computed for four sub-blocks at once, a byte each, with
// word operations, then the pair's two bytes taken out. Both halves' words
// are computed and one is kept by a mask, without a branch: the lanes of a
// warp hold every p, and a branch on it would run both sides one after the
// other.
__device__ __forceinline__ void scale_min_k4_pair(int p, const int4& meta, int* sc0, int* m0, int* sc1, int* m1) {
  const uint32_t s0 = static_cast<uint32_t>(meta.y), s4 = static_cast<uint32_t>(meta.z), s8 = static_cast<uint32_t>(meta.w);
  const uint32_t high = 0u - static_cast<uint32_t>(p >= 2);  // all ones for sub-blocks 4..7
  const uint32_t sc = (high & ((s8 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u))) | (~high & s0 & 0x3F3F3F3Fu);
  const uint32_t m = (high & (((s8 >> 4) & 0x0F0F0F0Fu) | ((s4 >> 2) & 0x30303030u))) | (~high & s4 & 0x3F3F3F3Fu);
  // Bytes 2 (p & 1) and 2 (p & 1) + 1, each alone in a word (one byte
  // permute each; selector 4 takes a zero byte of the second operand).
  const uint32_t b0 = 0x4440u + 2u * static_cast<uint32_t>(p & 1);
  *sc0 = static_cast<int>(__byte_perm(sc, 0u, b0));
  *sc1 = static_cast<int>(__byte_perm(sc, 0u, b0 + 1));
  *m0 = static_cast<int>(__byte_perm(m, 0u, b0));
  *m1 = static_cast<int>(__byte_perm(m, 0u, b0 + 1));
}

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7).
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// One unit's contribution to row r's dot product.
template <WType T>
struct Unit;

// Offsets in a row's q plane of the two 16-byte halves of 32-byte unit u
// (split halves, weight_layout.h; split_offset with b = 0 and 16).
__device__ __forceinline__ uint2 split_halves_at(unsigned u, unsigned n_units) {
  const unsigned first = u & ~31u, size = min(32u, n_units - first);
  const unsigned a = 32u * first + 16u * (u - first);
  return make_uint2(a, a + 16u * size);
}

// The same for the unit a lane takes in step e of a row (pipe.cuh: units
// lane + 32 e), from q, its first unit's offset: its group is e's.
__device__ __forceinline__ uint2 split_halves_step(unsigned q, int e, int n_units) {
  const unsigned a = q + 1024u * static_cast<unsigned>(e);
  return make_uint2(a, a + 16u * static_cast<unsigned>(min(kWarp, n_units - kWarp * e)));
}

// Units with a Raw (below: Q8_0, Q4_K, Q5_K, Q6_K) also split their dot
// product: Unit::acts(u, in, a) takes the unit's activations (Acts), and
// Unit::dot(raw, acts, u) the rest, so that two weights of one row (gate and
// up) read them once; that dot uses u only for the unit's place in its
// super-block (u % 4). Unit::dot(raw, u, in, a) is the two together.
template <>
struct Unit<WType::kQ8_0> {
  static constexpr int kElems = 32;
  struct Raw {
    int4 q0, q1;
    uint16_t d;
  };
  struct Acts {
    int4 x0, x1;
    float d;
  };
  template <class F = GlobalFetch>
  __device__ static Raw load(const DeviceWeight& w, int r, int u, F&& f = F{}) {
    const unsigned uu = static_cast<unsigned>(u), row = static_cast<unsigned>(r), nu = static_cast<unsigned>(w.k) / 32;
    const unsigned q_row = row * static_cast<unsigned>(w.k);
    const uint2 at = split_halves_at(uu, nu);
    Raw raw;
    raw.q0 = f(plane_at(w.q, q_row + at.x));
    raw.q1 = f(plane_at(w.q, q_row + at.y));
    raw.d = f.u16(reinterpret_cast<const uint16_t*>(plane_at(w.meta, 2 * (row * nu + uu))));
    return raw;
  }
  // The same pieces in the same order from where they lie (Places: its
  // quants' two halves, its scale), for the pipelined kernels, which find
  // them by strides (Walk). (load does not go through them: with the places
  // worked out first and fetched after, ptxas (CUDA 13.0) gave dozens of the
  // plain kernels other register counts, up and down, and 7B's attn_output
  // lost its preloading kernel: bench/results/2026-12-03-h200-session23.)
  struct Places {
    const uint8_t *q0, *q1;
    const uint16_t* d;
  };
  template <class F>
  __device__ static Raw fetch(const Places& p, F&& f) {
    Raw raw;
    raw.q0 = f(p.q0);
    raw.q1 = f(p.q1);
    raw.d = f.u16(p.d);
    return raw;
  }
  // A lane's units lane + 32 e of one row (pipe.cuh): its first unit's
  // offsets in the planes; each step 32 units on, the last group's second
  // halves right after its own units (split halves).
  struct Walk {
    unsigned q, d;
    __device__ Places at(const DeviceWeight& w, int, int e, int n_units) const {
      const uint2 h = split_halves_step(q, e, n_units);
      return Places{plane_at(w.q, h.x), plane_at(w.q, h.y), reinterpret_cast<const uint16_t*>(plane_at(w.meta, d + 64u * e))};
    }
  };
  __device__ static Walk walk(const DeviceWeight& w, int r, int lane) {
    const unsigned row = static_cast<unsigned>(r), l = static_cast<unsigned>(lane);
    return Walk{row * static_cast<unsigned>(w.k) + 16 * l, 2 * (row * (static_cast<unsigned>(w.k) / 32) + l)};
  }
  // Whether a lane's scale is the high half of its 4-byte word (the same at
  // every step of a row: the units move by 32).
  __device__ static bool d_high(const DeviceWeight& w, int r, int lane) {
    return ((static_cast<unsigned>(r) * (static_cast<unsigned>(w.k) / 32) + static_cast<unsigned>(lane)) & 1u) != 0;
  }
  template <class A = PlainActs>
  __device__ static Acts acts(int u, const DotInput& in, A a = A{}) {
    return Acts{a(in, 2 * u), a(in, 2 * u + 1), in.ds[u].x};
  }
  __device__ static float dot(const Raw& raw, const Acts& x, int) {
    const int sumi = dot_q8x16(raw.q0, x.x0, dot_q8x16(raw.q1, x.x1, 0));
    return h2f(raw.d) * x.d * static_cast<float>(sumi);
  }
  template <class A = PlainActs>
  __device__ static float dot(const Raw& raw, int u, const DotInput& in, A a = A{}) { return dot(raw, acts(u, in, a), u); }
  __device__ static float dot(const DeviceWeight& w, int r, int u, const DotInput& in) { return dot(load(w, r, u), u, in); }
};

template <>
struct Unit<WType::kQ4_0> {
  static constexpr int kElems = 32;
  __device__ static float dot(const DeviceWeight& w, int r, int u, const DotInput& in) {
    const uint8_t* q = static_cast<const uint8_t*>(w.q) + static_cast<size_t>(r) * (w.k / 2) + u * 16;
    const int sumi = dot_nibbles(ld16(q), ld16a(in.q + u * 32), ld16a(in.q + u * 32 + 16), 0);
    const float d = h2f(static_cast<const uint16_t*>(w.meta)[static_cast<size_t>(r) * (w.k / 32) + u]);
    const float2 ds = in.ds[u];
    return d * (ds.x * static_cast<float>(sumi) - 8.0f * ds.y);  // values are (nibble - 8) * d
  }
};

template <>
struct Unit<WType::kQ4_1> {
  static constexpr int kElems = 32;
  __device__ static float dot(const DeviceWeight& w, int r, int u, const DotInput& in) {
    const uint8_t* q = static_cast<const uint8_t*>(w.q) + static_cast<size_t>(r) * (w.k / 2) + u * 16;
    const int sumi = dot_nibbles(ld16(q), ld16a(in.q + u * 32), ld16a(in.q + u * 32 + 16), 0);
    const uint32_t dm = static_cast<const uint32_t*>(w.meta)[static_cast<size_t>(r) * (w.k / 32) + u];
    const float2 ds = in.ds[u];
    return h2f(dm & 0xFFFF) * ds.x * static_cast<float>(sumi) + h2f(dm >> 16) * ds.y;  // nibble * d + m
  }
};

template <>
struct Unit<WType::kQ5_0> {
  static constexpr int kElems = 32;
  __device__ static float dot(const DeviceWeight& w, int r, int u, const DotInput& in) {
    const size_t blk = static_cast<size_t>(r) * (w.k / 32) + u;
    const uint8_t* q = static_cast<const uint8_t*>(w.q) + static_cast<size_t>(r) * (w.k / 2) + u * 16;
    const uint32_t qh = static_cast<const uint32_t*>(w.qh)[blk];
    const int sumi = dot_nibbles5(ld16(q), qh, ld16a(in.q + u * 32), ld16a(in.q + u * 32 + 16), 0);
    const float d = h2f(static_cast<const uint16_t*>(w.meta)[blk]);
    const float2 ds = in.ds[u];
    return d * (ds.x * static_cast<float>(sumi) - 16.0f * ds.y);  // values are (q5 - 16) * d
  }
};

template <>
struct Unit<WType::kQ5_1> {
  static constexpr int kElems = 32;
  __device__ static float dot(const DeviceWeight& w, int r, int u, const DotInput& in) {
    const size_t blk = static_cast<size_t>(r) * (w.k / 32) + u;
    const uint8_t* q = static_cast<const uint8_t*>(w.q) + static_cast<size_t>(r) * (w.k / 2) + u * 16;
    const uint32_t qh = static_cast<const uint32_t*>(w.qh)[blk];
    const int sumi = dot_nibbles5(ld16(q), qh, ld16a(in.q + u * 32), ld16a(in.q + u * 32 + 16), 0);
    const uint32_t dm = static_cast<const uint32_t*>(w.meta)[blk];
    const float2 ds = in.ds[u];
    return h2f(dm & 0xFFFF) * ds.x * static_cast<float>(sumi) + h2f(dm >> 16) * ds.y;
  }
};

// Q4_K / Q5_K unit: part p (0..3) of super-block sb: 32 bytes of quants
// holding elements 64p..64p+31 (low nibbles, sub-block 2p) and 64p+32..64p+63
// (high nibbles, sub-block 2p+1).
// The weight bytes of one unit, loaded (load) apart from their use (dot):
// row_dot_t issues a group's loads before its first dot product.
struct RawQK45 {
  int4 w0, w1, meta, h0, h1;  // h0, h1: Q5_K's 5th bits
};
template <bool kFive, class F>
__device__ __forceinline__ RawQK45 load_qk45(const DeviceWeight& w, int r, int u, F&& f) {
  // Unit indices are never negative: unsigned division and remainder are
  // shifts and masks (signed ones need a rounding fix-up).
  const unsigned uu = static_cast<unsigned>(u), sb = uu / 4, row = static_cast<unsigned>(r), k = static_cast<unsigned>(w.k);
  const unsigned q_row = row * (k / 2);
  const uint2 at = split_halves_at(uu, k / 64);
  RawQK45 raw;
  raw.meta = f.quad16(plane_at(w.meta, 16 * (row * (k / 256) + sb)));
  raw.w0 = f(plane_at(w.q, q_row + at.x));
  raw.w1 = f(plane_at(w.q, q_row + at.y));
  if constexpr (kFive) {
    const uint8_t* qh = plane_at(w.qh, row * (k / 8) + sb * 32);
    raw.h0 = f(qh);
    raw.h1 = f(qh + 16);
  }
  return raw;
}
// The same pieces in the same order from where they lie (PlacesQK45: its
// super-block's meta, its quants' two halves, its fifth bits for Q5_K), for
// the pipelined kernels, which find them by strides (UnitQK45::Walk).
struct PlacesQK45 {
  const uint8_t *meta, *q0, *q1, *qh0, *qh1;
};
template <bool kFive, class F>
__device__ __forceinline__ RawQK45 fetch_qk45(const PlacesQK45& p, F&& f) {
  RawQK45 raw;
  raw.meta = f.quad16(p.meta);
  raw.w0 = f(p.q0);
  raw.w1 = f(p.q1);
  if constexpr (kFive) {
    raw.h0 = f(p.qh0);
    raw.h1 = f(p.qh1);
  }
  return raw;
}

// A unit's activations: Q8 blocks 2p and 2p + 1 of its super-block (chunks a,
// b and c, d) and their scales and sums.
struct ActsQK45 {
  int4 a, b, c, d;
  float2 ds0, ds1;
};
template <class A>
__device__ __forceinline__ ActsQK45 acts_qk45(int u, const DotInput& in, A acts) {
  const unsigned uu = static_cast<unsigned>(u);
  const int xb = static_cast<int>((uu / 4) * 8 + 2 * (uu % 4));  // Q8 block of sub-block 2p
  const int c = 2 * xb;                                            // its first chunk, a multiple of 4
  return ActsQK45{acts.quad(in, c, 0), acts.quad(in, c, 1), acts.quad(in, c, 2), acts.quad(in, c, 3), in.ds[xb], in.ds[xb + 1]};
}

// The scales and mins by word operations (scale_min_k4_pair). Byte by byte,
// with a branch on the sub-block, they cost 141 instructions a unit in the
// matvec loop (PTX) against 113, and 7B q/k/v took 9.0 µs a launch instead
// of 7.5 (H200, bench/results/2026-12-01-h200-session6).
// Each sub-block's integer sum is multiplied by its 6-bit scale before the
// conversion (exact: |scale × sum| ≤ 63 × 32 × 31 × 127 < 2^24), one
// conversion and one float multiply fewer a sub-block than scaling in floats.
// kWhole (Q4_K): the high nibbles' sum from whole bytes (below), the
// pipelined products' form. The plain kernels keep the mask: the other form
// moved 37 of their register counts (ptxas, CUDA 13.0; tests/gpu/
// register_diff.sh), 7B Q4_K_M's q/k/v kernel among them (56 → 64, the
// change that once put its blocks into a second wave: session 21).
template <bool kFive, bool kWhole = false>
__device__ __forceinline__ float dot_qk45(const RawQK45& raw, const ActsQK45& x, int u) {
  const int p = static_cast<int>(static_cast<unsigned>(u) % 4);
  const int4 meta4 = raw.meta;
  const float d = h2f(static_cast<uint16_t>(meta4.x & 0xFFFF));
  const float dmin = h2f(static_cast<uint16_t>(static_cast<uint32_t>(meta4.x) >> 16));
  int sc0, m0, sc1, m1;
  scale_min_k4_pair(p, meta4, &sc0, &m0, &sc1, &m1);
  const int4 w0 = raw.w0, w1 = raw.w1;
  const int4 xa = x.a, xb4 = x.b, xc = x.c, xd = x.d;
  constexpr int kLo = 0x0F0F0F0F;
  int lo0 = w0.x & kLo, lo1 = w0.y & kLo, lo2 = w0.z & kLo, lo3 = w0.w & kLo;
  int lo4 = w1.x & kLo, lo5 = w1.y & kLo, lo6 = w1.z & kLo, lo7 = w1.w & kLo;
  int shi;
  if constexpr (!kFive && !kWhole) {
    // The high nibbles where they are, bytes of 16 × nibble (one mask a
    // word, not a shift and a mask): their dot product is 16 times the
    // nibbles' (exact, |Σ| < 2^19), so a shift by 4 gives the same integer.
    constexpr int kHi = static_cast<int>(0xF0F0F0F0u);
    shi = dp4a_us(w0.x & kHi, xc.x, 0);
    shi = dp4a_us(w0.y & kHi, xc.y, shi); shi = dp4a_us(w0.z & kHi, xc.z, shi); shi = dp4a_us(w0.w & kHi, xc.w, shi);
    shi = dp4a_us(w1.x & kHi, xd.x, shi); shi = dp4a_us(w1.y & kHi, xd.y, shi); shi = dp4a_us(w1.z & kHi, xd.z, shi);
    shi = dp4a_us(w1.w & kHi, xd.w, shi) >> 4;
  } else if constexpr (!kFive) {
    // The high nibbles without a mask: the whole bytes (low + 16 × high)
    // against the high half's activations, less the low nibbles (masked
    // once, for the low half) against them, is 16 times the high nibbles'
    // sum (exact, |Σ| < 2^20), so a shift by 4 gives the same integer as
    // masking the high nibbles would. One logic op a word fewer, one dp4a
    // more: in the pipelined gate/up Nsight Compute had the ALU pipe (the
    // logic ops) at 44% of its peak, the heavy FMA pipe at 31% (H200,
    // 2026-12-03). Same run, with the paired warp sums and SwiGLU after the
    // rows (pipe.cuh, matvec_piped.cu) against none of the three: kernel
    // bench 7B gate/up Q4_K 20.5 → 19.8 µs, Q8_0 34.7 → 34.4; in a decode
    // step (CUPTI) gate/up's share 21.28 → 20.99 µs a layer and the step
    // 1,694.6 → 1,693.0 µs; tg128 7B Q4_K_M 577 → 583 and 586 tok/s, Q8_0
    // 439 → 436 and 436 (bench/results/2026-12-03-h200-session27, run 3).
    int whole = dp4a_us(w0.x, xc.x, 0), low = __dp4a(lo0, xc.x, 0);
    whole = dp4a_us(w0.y, xc.y, whole); low = __dp4a(lo1, xc.y, low);
    whole = dp4a_us(w0.z, xc.z, whole); low = __dp4a(lo2, xc.z, low);
    whole = dp4a_us(w0.w, xc.w, whole); low = __dp4a(lo3, xc.w, low);
    whole = dp4a_us(w1.x, xd.x, whole); low = __dp4a(lo4, xd.x, low);
    whole = dp4a_us(w1.y, xd.y, whole); low = __dp4a(lo5, xd.y, low);
    whole = dp4a_us(w1.z, xd.z, whole); low = __dp4a(lo6, xd.z, low);
    whole = dp4a_us(w1.w, xd.w, whole); low = __dp4a(lo7, xd.w, low);
    shi = (whole - low) >> 4;
  } else {
    int hi0 = (w0.x >> 4) & kLo, hi1 = (w0.y >> 4) & kLo, hi2 = (w0.z >> 4) & kLo, hi3 = (w0.w >> 4) & kLo;
    int hi4 = (w1.x >> 4) & kLo, hi5 = (w1.y >> 4) & kLo, hi6 = (w1.z >> 4) & kLo, hi7 = (w1.w >> 4) & kLo;
    // qh[l] bit 2p: 5th bit of element 64p + l; bit 2p + 1: of 64p + 32 + l.
    const int4 h0 = raw.h0, h1 = raw.h1;
    const int s0 = 2 * p, s1 = 2 * p + 1;
    auto bits = [](int h, int s) { return ((h >> s) & 0x01010101) << 4; };
    lo0 |= bits(h0.x, s0); lo1 |= bits(h0.y, s0); lo2 |= bits(h0.z, s0); lo3 |= bits(h0.w, s0);
    lo4 |= bits(h1.x, s0); lo5 |= bits(h1.y, s0); lo6 |= bits(h1.z, s0); lo7 |= bits(h1.w, s0);
    hi0 |= bits(h0.x, s1); hi1 |= bits(h0.y, s1); hi2 |= bits(h0.z, s1); hi3 |= bits(h0.w, s1);
    hi4 |= bits(h1.x, s1); hi5 |= bits(h1.y, s1); hi6 |= bits(h1.z, s1); hi7 |= bits(h1.w, s1);
    shi = __dp4a(hi0, xc.x, 0);
    shi = __dp4a(hi1, xc.y, shi); shi = __dp4a(hi2, xc.z, shi); shi = __dp4a(hi3, xc.w, shi);
    shi = __dp4a(hi4, xd.x, shi); shi = __dp4a(hi5, xd.y, shi); shi = __dp4a(hi6, xd.z, shi); shi = __dp4a(hi7, xd.w, shi);
  }
  int slo = __dp4a(lo0, xa.x, 0);
  slo = __dp4a(lo1, xa.y, slo); slo = __dp4a(lo2, xa.z, slo); slo = __dp4a(lo3, xa.w, slo);
  slo = __dp4a(lo4, xb4.x, slo); slo = __dp4a(lo5, xb4.y, slo); slo = __dp4a(lo6, xb4.z, slo); slo = __dp4a(lo7, xb4.w, slo);
  return d * (x.ds0.x * static_cast<float>(sc0 * slo) + x.ds1.x * static_cast<float>(sc1 * shi)) -
         dmin * (x.ds0.y * static_cast<float>(m0) + x.ds1.y * static_cast<float>(m1));
}

// Q4_K and Q5_K units (kQ5: the fifth bits' plane too).
template <bool kQ5>
struct UnitQK45 {
  static constexpr int kElems = 64;
  using Raw = RawQK45;
  using Acts = ActsQK45;
  using Places = PlacesQK45;
  template <class F = GlobalFetch>
  __device__ static Raw load(const DeviceWeight& w, int r, int u, F&& f = F{}) { return load_qk45<kQ5>(w, r, u, f); }
  template <class F>
  __device__ static Raw fetch(const Places& p, F&& f) { return fetch_qk45<kQ5>(p, f); }
  // A lane's units lane + 32 e of one row: its first unit's offsets in the
  // planes (the fifth bits' at 2 × the meta's); each step 8 super-blocks on.
  struct Walk {
    unsigned q, meta;
    __device__ Places at(const DeviceWeight& w, int, int e, int n_units) const {
      const uint2 h = split_halves_step(q, e, n_units);
      const unsigned m = meta + 128u * e;
      const uint8_t* qh = kQ5 ? plane_at(w.qh, 2 * m) : nullptr;
      return Places{plane_at(w.meta, m), plane_at(w.q, h.x), plane_at(w.q, h.y), qh, kQ5 ? qh + 16 : nullptr};
    }
  };
  __device__ static Walk walk(const DeviceWeight& w, int r, int lane) {
    const unsigned row = static_cast<unsigned>(r), l = static_cast<unsigned>(lane), k = static_cast<unsigned>(w.k);
    return Walk{row * (k / 2) + 16 * l, 16 * (row * (k / 256) + l / 4)};
  }
  __device__ static bool d_high(const DeviceWeight&, int, int) { return false; }  // (no 2-byte reads)
  template <class A = PlainActs>
  __device__ static Acts acts(int u, const DotInput& in, A a = A{}) { return acts_qk45(u, in, a); }
  __device__ static float dot(const Raw& raw, const Acts& x, int u) { return dot_qk45<kQ5>(raw, x, u); }
  template <class A = PlainActs>
  __device__ static float dot(const Raw& raw, int u, const DotInput& in, A a = A{}) { return dot(raw, acts(u, in, a), u); }
  __device__ static float dot(const DeviceWeight& w, int r, int u, const DotInput& in) { return dot(load(w, r, u), u, in); }
};
template <>
struct Unit<WType::kQ4_K> : UnitQK45<false> {};
template <>
struct Unit<WType::kQ5_K> : UnitQK45<true> {};

// Q6_K unit: a quarter of a super-block, 64 elements: half n (0/1) of the
// super-block, lanes l in [16 q, 16 q + 16) (q = 0/1) of it. For those l:
//   element 128n + l      = (ql[l] & 15)     | (qh[l] & 3) << 4,        scale sc[8n + l/16]
//   element 128n + l + 32 = (ql[l+32] & 15)  | (qh[l] >> 2 & 3) << 4,   scale sc[8n + l/16 + 2]
//   element 128n + l + 64 = (ql[l] >> 4)     | (qh[l] >> 4 & 3) << 4,   scale sc[8n + l/16 + 4]
//   element 128n + l + 96 = (ql[l+32] >> 4)  | (qh[l] >> 6 & 3) << 4,   scale sc[8n + l/16 + 6]
// each minus 32, times d (ggml's dequantize_row_q6_K with ql, qh advanced by 64, 32 per half).
// A quarter, not a half, per unit: 109 registers a thread became ~64.
template <>
struct Unit<WType::kQ6_K> {
  static constexpr int kElems = 64;
  struct Raw {
    int4 l0, l1, h;  // ql[l], ql[l + 32], qh[l]
    int2 sc;         // the half's scales: words 2n, 2n + 1 of the super-block's 16
    uint16_t d;
  };
  struct Acts {
    int4 x[4];   // the element groups' 16 activations
    float d[4];  // their Q8 blocks' scales
    int sum[4];  // the sums of their activations
  };
  template <class F = GlobalFetch>
  __device__ static Raw load(const DeviceWeight& w, int r, int u, F&& f = F{}) {
    // u = 4 sb + 2 n + q (unsigned: shifts and masks): ql at sb * 128 + n * 64
    // + 16 q = 32 u - 16 q, qh at sb * 64 + n * 32 + 16 q = 16 u.
    const unsigned uu = static_cast<unsigned>(u), sb = uu / 4, n = (uu / 2) % 2, q = uu % 2;
    const unsigned row = static_cast<unsigned>(r), k = static_cast<unsigned>(w.k), blk = row * (k / 256) + sb;
    const uint8_t* ql = plane_at(w.q, row * (k / 2) + (32 * uu - 16 * q));
    Raw raw;
    raw.sc = f.pair8(plane_at(w.meta, 16 * blk + 8 * n));
    raw.d = f.quad_u16(reinterpret_cast<const uint16_t*>(plane_at(w.d, 2 * blk)));
    raw.l0 = f(ql);
    raw.l1 = f(ql + 32);
    raw.h = f(plane_at(w.qh, row * (k / 4) + 16 * uu));
    return raw;
  }
  // The same pieces in the same order from where they lie (Places: its low
  // quants, ql[l] and ql[l + 32], its high bits, its half's scales, its
  // super-block's d), for the pipelined kernels, which find them by strides
  // (Walk).
  struct Places {
    const uint8_t *ql0, *ql1, *qh, *sc;
    const uint16_t* d;
  };
  template <class F>
  __device__ static Raw fetch(const Places& p, F&& f) {
    Raw raw;
    raw.sc = f.pair8(p.sc);
    raw.d = f.quad_u16(p.d);
    raw.l0 = f(p.ql0);
    raw.l1 = f(p.ql1);
    raw.h = f(p.qh);
    return raw;
  }
  // A lane's units lane + 32 e of one row: its super-block (every plane's
  // offset is a multiple of it plus the lane's place in it); each step 8
  // super-blocks on.
  struct Walk {
    unsigned blk;
    __device__ Places at(const DeviceWeight& w, int lane, int e, int) const {
      const unsigned b = blk + 8u * e, l = static_cast<unsigned>(lane), n = (l / 2) % 2, q = l % 2;
      const uint8_t* ql = plane_at(w.q, 128 * b + 64 * n + 16 * q);  // 32 u - 16 q
      return Places{ql, ql + 32, plane_at(w.qh, 64 * b + 32 * n + 16 * q), plane_at(w.meta, 16 * b + 8 * n),
                    reinterpret_cast<const uint16_t*>(plane_at(w.d, 2 * b))};
    }
  };
  __device__ static Walk walk(const DeviceWeight& w, int r, int lane) {
    return Walk{static_cast<unsigned>(r) * (static_cast<unsigned>(w.k) / 256) + static_cast<unsigned>(lane) / 4};
  }
  // Whether a lane's d is the high half of its 4-byte word (the same at every
  // step of a row: the super-block moves by 8).
  __device__ static bool d_high(const DeviceWeight& w, int r, int lane) {
    return ((static_cast<unsigned>(r) * (static_cast<unsigned>(w.k) / 256) + static_cast<unsigned>(lane) / 4) & 1u) != 0;
  }
  // Element group g's activations: its 16 values, its Q8 block's scale and
  // the values' sum (x + 2g: the chunk of sb * 256 + n * 128 + 16 q, then
  // every 32 values).
  struct Group {
    int4 x;
    float d;
    int sum;
  };
  template <class A>
  __device__ static Group group(unsigned uu, int g, const DotInput& in, A a) {
    const unsigned q = uu % 2;
    const int x = static_cast<int>(4 * uu - 3 * q);
    const float2* ds = in.ds + (2 * uu - 2 * q);  // sb * 8 + n * 4
    const int4 xv = a(in, x + 2 * g);
    const int4 ones = make_int4(0x01010101, 0x01010101, 0x01010101, 0x01010101);
    return Group{xv, ds[g].x, dot_q8x16(ones, xv, 0)};  // (the staged sums are for acts)
  }
  template <class A = PlainActs>
  __device__ static Acts acts(int u, const DotInput& in, A a = A{}) {
    const unsigned uu = static_cast<unsigned>(u), q = uu % 2;
    const int x = static_cast<int>(4 * uu - 3 * q);
    const float2* ds = in.ds + (2 * uu - 2 * q);
    Acts acts;
    // x = 4 u - 3 q = 8 (u / 2) + q: the four groups lie in one aligned group
    // of eight chunks (A::every2: the pipelined kernels' swizzled chunks
    // found once). group() reads them as the plain kernels were tuned with.
#pragma unroll
    for (int g = 0; g < 4; ++g) acts.x[g] = a.every2(in, x, g);
    if constexpr (A::kSums) {  // blocks 2 u - 2 q + g: one aligned 16-byte read (SummedSwizzledActs)
      const float4 d4 = *reinterpret_cast<const float4*>(summed_d(in) + (2 * uu - 2 * q));
      acts.d[0] = d4.x, acts.d[1] = d4.y, acts.d[2] = d4.z, acts.d[3] = d4.w;
    } else {
#pragma unroll
      for (int g = 0; g < 4; ++g) acts.d[g] = ds[g].x;
    }
    if (A::kSums || in.csum != nullptr) {  // chunks x + 2g: chunk_sum_slot 8 (u / 2) + 4 q + g, one 16-byte read
      const int4 s4 = *reinterpret_cast<const int4*>(in.csum + 8 * (uu / 2) + 4 * q);
      acts.sum[0] = s4.x, acts.sum[1] = s4.y, acts.sum[2] = s4.z, acts.sum[3] = s4.w;
    } else {
#pragma unroll
      for (int g = 0; g < 4; ++g) acts.sum[g] = dot_q8x16(make_int4(0x01010101, 0x01010101, 0x01010101, 0x01010101), acts.x[g], 0);
    }
    return acts;
  }
  __device__ static float dot(const Raw& raw, const Acts& xa, int u) {
    return dot_groups(raw, u, [&](int g) { return Group{xa.x[g], xa.d[g], xa.sum[g]}; });
  }
  // Each group's activations read where they are used, not all four first
  // (acts): a plain kernel's lanes hold several units' weights at once, and
  // with the four groups' too ptxas gave 7B's q/k/v kernel 104 registers
  // instead of 64 (H200, 2026-12-02).
  template <class A = PlainActs>
  __device__ static float dot(const Raw& raw, int u, const DotInput& in, A a = A{}) {
    return dot_groups(raw, u, [&](int g) { return group(static_cast<unsigned>(u), g, in, a); });
  }
  __device__ static float dot(const DeviceWeight& w, int r, int u, const DotInput& in) { return dot(load(w, r, u), u, in); }

 private:
  template <class G>
  __device__ static float dot_groups(const Raw& raw, int u, G&& group_of) {
    const unsigned q = static_cast<unsigned>(u) % 2;
    const float d = h2f(raw.d);
    const int4 l0 = raw.l0, l1 = raw.l1, h = raw.h;
    const int l0v[4] = {l0.x, l0.y, l0.z, l0.w};
    const int l1v[4] = {l1.x, l1.y, l1.z, l1.w};
    const int hv[4] = {h.x, h.y, h.z, h.w};
    // The group's scales are bytes 8n + q + 2g of the super-block's: bytes q
    // and q + 2 of word 2n (g = 0, 1) and of word 2n + 1 (g = 2, 3), which
    // the load took (8 bytes, not the 16 the four units of a super-block
    // share: a pipelined lane's slots hold what it reads, matvec_piped.cu).
    const uint32_t sc_lo = static_cast<uint32_t>(raw.sc.x), sc_hi = static_cast<uint32_t>(raw.sc.y);
    float acc = 0.0f;
#pragma unroll
    for (int g = 0; g < 4; ++g) {  // the four element groups 0, 32, 64, 96
      const Group gr = group_of(g);
      const int xs[4] = {gr.x.x, gr.x.y, gr.x.z, gr.x.w};
      // Σ (v - 32) x as Σ v x - 32 Σ x: the same integer, without a per-byte
      // subtraction (__vsubss4 is a dozen instructions on sm_90); Σ x from
      // the activations' chunk sums where they are staged (a quarter of the
      // unit's dp4a), else added up (Group).
      int sum = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int lo = (g == 0 || g == 2) ? l0v[i] : l1v[i];
        const int nib = g < 2 ? (lo & 0x0F0F0F0F) : ((lo >> 4) & 0x0F0F0F0F);
        const int hi = ((hv[i] >> (2 * g)) & 0x03030303) << 4;
        sum = __dp4a(nib | hi, xs[i], sum);
      }
      sum -= 32 * gr.sum;
      const uint32_t word = g < 2 ? sc_lo : sc_hi;
      const int sc = static_cast<int>(static_cast<int8_t>((word >> (8 * q + 16 * (g & 1))) & 0xFF));
      acc += gr.d * static_cast<float>(sc * sum);  // exact: |sc × sum| ≤ 128 × 16 × 32 × 127 < 2^24
    }
    return d * acc;
  }
};

// Float weights: 16 bytes of weights per unit against f32 activations.
template <>
struct Unit<WType::kF16> {
  static constexpr int kElems = 8;
  __device__ static float dot(const DeviceWeight& w, int r, int u, const DotInput& in) {
    const int4 v = ld16(static_cast<const uint16_t*>(w.q) + static_cast<size_t>(r) * w.k + u * 8);
    const float4 a = ld16fa(in.x + u * 8), b = ld16fa(in.x + u * 8 + 4);
    const __half2* h = reinterpret_cast<const __half2*>(&v);
    const float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]), f2 = __half22float2(h[2]), f3 = __half22float2(h[3]);
    return f0.x * a.x + f0.y * a.y + f1.x * a.z + f1.y * a.w + f2.x * b.x + f2.y * b.y + f3.x * b.z + f3.y * b.w;
  }
};
template <>
struct Unit<WType::kBF16> {
  static constexpr int kElems = 8;
  __device__ static float dot(const DeviceWeight& w, int r, int u, const DotInput& in) {
    const int4 v = ld16(static_cast<const uint16_t*>(w.q) + static_cast<size_t>(r) * w.k + u * 8);
    const float4 a = ld16fa(in.x + u * 8), b = ld16fa(in.x + u * 8 + 4);
    const uint32_t p[4] = {static_cast<uint32_t>(v.x), static_cast<uint32_t>(v.y), static_cast<uint32_t>(v.z), static_cast<uint32_t>(v.w)};
    auto lo = [](uint32_t x) { return __uint_as_float(x << 16); };
    auto hi = [](uint32_t x) { return __uint_as_float(x & 0xFFFF0000u); };
    return lo(p[0]) * a.x + hi(p[0]) * a.y + lo(p[1]) * a.z + hi(p[1]) * a.w + lo(p[2]) * b.x + hi(p[2]) * b.y +
           lo(p[3]) * b.z + hi(p[3]) * b.w;
  }
};
template <>
struct Unit<WType::kF32> {
  static constexpr int kElems = 4;
  __device__ static float dot(const DeviceWeight& w, int r, int u, const DotInput& in) {
    const float4 v = ld16f(static_cast<const float*>(w.q) + static_cast<size_t>(r) * w.k + u * 4);
    const float4 a = ld16fa(in.x + u * 4);
    return v.x * a.x + v.y * a.y + v.z * a.z + v.w * a.w;
  }
};

// Units whose weight loads can be issued apart from their use (Unit::Raw,
// Unit::load, Unit::dot(raw)): the K-quants, whose loads the compiler would
// otherwise interleave with the previous unit's unpacking, and Q8_0.
template <WType T>
constexpr bool kHasRaw = T == WType::kQ4_K || T == WType::kQ5_K || T == WType::kQ6_K || T == WType::kQ8_0;
// Units a lane has in flight at once in schedule 1: their loads are issued
// before any of their dot products (the registers they take bound it).
template <WType T>
constexpr int kUnitDepth = (T == WType::kQ4_K || T == WType::kQ5_K || T == WType::kQ6_K) ? 2 : 4;

// Row r's dot product, reduced over the warp (every lane gets it). Float
// weights whose rows are not 16-byte aligned (k % 8 for 16-bit, k % 4 for
// f32) take the scalar path.
//
// Schedules (kSched; the launchers pick one, matvec_kernels.cuh schedule_for):
//  0  units lane, lane + 32, ... one at a time, the loop unrolled 4 times:
//     rows of fewer than 4 units a lane run in the loop's remainder, one
//     unit's loads in flight (7B's Q4_K rows are 56 units, under two a lane).
//  1  groups of kUnitDepth units: indices past the row's end are clamped to
//     its last unit (a repeated load, its value dropped), so every load of a
//     group is unconditional and can be issued before the first dot product.
//  2  groups of twice that.
// The sum order is unit order in each: all three give the same bits.
//
// row_units: lane's units from `first` on (first, first + 32, ...) added
// into acc, not yet reduced over the warp (row_dot_preloaded starts past
// the units it holds).
template <WType T, int kSched>
__device__ __forceinline__ float row_units(const DeviceWeight& w, int r, const DotInput& in, int first, float acc) {
  const int n_units = w.k / Unit<T>::kElems;
  if constexpr (kSched == 0) {
#pragma unroll 4
    for (int u = first; u < n_units; u += kWarp) acc = add_rn(acc, Unit<T>::dot(w, r, u, in));
  } else {
    constexpr int D = kUnitDepth<T> * kSched;
    for (int u0 = first; u0 < n_units; u0 += kWarp * D) {
      float part[D];
      if constexpr (kHasRaw<T>) {
        typename Unit<T>::Raw raw[D];
#pragma unroll
        for (int j = 0; j < D; ++j) raw[j] = Unit<T>::load(w, r, min(u0 + kWarp * j, n_units - 1));
#pragma unroll
        for (int j = 0; j < D; ++j) part[j] = Unit<T>::dot(raw[j], min(u0 + kWarp * j, n_units - 1), in);
      } else {
#pragma unroll
        for (int j = 0; j < D; ++j) part[j] = Unit<T>::dot(w, r, min(u0 + kWarp * j, n_units - 1), in);
      }
#pragma unroll
      for (int j = 0; j < D; ++j) {
        if (u0 + kWarp * j < n_units) acc = add_rn(acc, part[j]);
      }
    }
  }
  return acc;
}
template <WType T, int kSched>
__device__ __forceinline__ float row_dot_t(const DeviceWeight& w, int r, const DotInput& in, int lane) {
  return warp_sum(row_units<T, kSched>(w, r, in, lane, 0.0f));
}

// Two rows of the same shape and type in one pass (gate and up): both rows'
// loads are issued together, halving the round trips of a warp.
template <WType T, int kSched>
__device__ __forceinline__ float2 row_dot_pair_t(const DeviceWeight& a, const DeviceWeight& b, int r, const DotInput& in,
                                                 int lane) {
  float acc_a = 0.0f, acc_b = 0.0f;
  const int n_units = a.k / Unit<T>::kElems;
  if constexpr (kSched == 0) {
#pragma unroll 2
    for (int u = lane; u < n_units; u += kWarp) {
      acc_a = add_rn(acc_a, Unit<T>::dot(a, r, u, in));
      acc_b = add_rn(acc_b, Unit<T>::dot(b, r, u, in));
    }
  } else {
    constexpr int D = kUnitDepth<T> * kSched / 2;
    for (int u0 = lane; u0 < n_units; u0 += kWarp * D) {
      float pa[D], pb[D];
      if constexpr (kHasRaw<T>) {
        typename Unit<T>::Raw ra[D], rb[D];
#pragma unroll
        for (int j = 0; j < D; ++j) {
          const int u = min(u0 + kWarp * j, n_units - 1);
          ra[j] = Unit<T>::load(a, r, u);
          rb[j] = Unit<T>::load(b, r, u);
        }
#pragma unroll
        for (int j = 0; j < D; ++j) {
          const int u = min(u0 + kWarp * j, n_units - 1);
          pa[j] = Unit<T>::dot(ra[j], u, in);
          pb[j] = Unit<T>::dot(rb[j], u, in);
        }
      } else {
#pragma unroll
        for (int j = 0; j < D; ++j) {
          const int u = min(u0 + kWarp * j, n_units - 1);
          pa[j] = Unit<T>::dot(a, r, u, in);
          pb[j] = Unit<T>::dot(b, r, u, in);
        }
      }
#pragma unroll
      for (int j = 0; j < D; ++j) {
        if (u0 + kWarp * j < n_units) {
          acc_a = add_rn(acc_a, pa[j]);
          acc_b = add_rn(acc_b, pb[j]);
        }
      }
    }
  }
  return make_float2(warp_sum(acc_a), warp_sum(acc_b));
}

// A row a quarter-warp: kQuarter lanes a row, four rows a warp, the same bits
// as row_dot_t. With 32 lanes a row, a 7B gate/up row (56 Q4_K units) keeps
// 8 lanes at one unit while 24 do two, and every lane reads its units'
// activations for itself (64 bytes for each 32 bytes of weights); with 8,
// every lane has 7 units, and the four rows of a warp read the same
// activations at once (one load serves four lanes).
//
// Lane s of the quarter plays row_dot_t's lanes s, s + 8, s + 16 and s + 24:
// those take units s + 8m for m = 0, 4, 8, ..., for m = 1, 5, 9, ..., and so
// on, so lane s adds unit s + 8m into acc[m % 4], in unit order. The warp
// sum's butterfly then runs as it would: its steps across 16 and 8 lanes are
// additions inside a lane (acc[0] + acc[2], acc[1] + acc[3], then the two),
// its steps across 4, 2 and 1 lane shuffles inside the quarter. (Each step
// adds two lanes' values; addition commutes, so the order of the two does
// not matter.)
constexpr int kQuarter = 8;

// acc[4] as warp_sum would reduce the 32 lanes they stand for; every lane of
// the quarter gets it. All 32 lanes of the warp must call it.
__device__ __forceinline__ float quarter_sum(const float (&acc)[4]) {
  float v = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v;
}

// Units a lane loads before its first dot product, by kDepth (0, 1, 2: the
// load schedule, kernels.h): 1, 2 or 4.
template <int kDepth>
constexpr int kQuarterGroup = kDepth == 0 ? 1 : kDepth == 1 ? 2 : 4;

// Lane s's units of row r of a (and of b when kPair) into acc_a (acc_b).
// Groups of kQuarterGroup units: their loads first (an index past the row
// clamped to its last unit, its value dropped), then their dot products.
template <WType T, int kDepth, bool kPair>
__device__ __forceinline__ void quarter_units(const DeviceWeight& a, const DeviceWeight& b, int r, const DotInput& in, int s,
                                              float (&acc_a)[4], float (&acc_b)[4]) {
  constexpr int G = kQuarterGroup<kDepth>;
  const int n_units = a.k / Unit<T>::kElems;
  for (int m0 = 0; s + kQuarter * m0 < n_units; m0 += 4) {
#pragma unroll
    for (int t0 = 0; t0 < 4; t0 += G) {
      if (s + kQuarter * (m0 + t0) >= n_units) break;
      float pa[G], pb[G];
      if constexpr (kHasRaw<T>) {
        typename Unit<T>::Raw ra[G], rb[G];
#pragma unroll
        for (int j = 0; j < G; ++j) {
          const int u = min(s + kQuarter * (m0 + t0 + j), n_units - 1);
          ra[j] = Unit<T>::load(a, r, u);
          if constexpr (kPair) rb[j] = Unit<T>::load(b, r, u);
        }
#pragma unroll
        for (int j = 0; j < G; ++j) {
          const int u = min(s + kQuarter * (m0 + t0 + j), n_units - 1);
          pa[j] = Unit<T>::dot(ra[j], u, in);
          if constexpr (kPair) pb[j] = Unit<T>::dot(rb[j], u, in);
        }
      } else {
#pragma unroll
        for (int j = 0; j < G; ++j) {
          const int u = min(s + kQuarter * (m0 + t0 + j), n_units - 1);
          pa[j] = Unit<T>::dot(a, r, u, in);
          if constexpr (kPair) pb[j] = Unit<T>::dot(b, r, u, in);
        }
      }
#pragma unroll
      for (int j = 0; j < G; ++j) {
        if (s + kQuarter * (m0 + t0 + j) < n_units) {
          acc_a[t0 + j] = add_rn(acc_a[t0 + j], pa[j]);
          if constexpr (kPair) acc_b[t0 + j] = add_rn(acc_b[t0 + j], pb[j]);
        }
      }
    }
  }
}

// Row r of a (and b) by the quarter of lane s; `valid` false: no loads, but
// the quarter still takes part in the warp's shuffles (every lane must).
// Quantized types only (the float types' unaligned rows take a scalar path).
template <int kType, int kDepth>
__device__ __forceinline__ float quarter_dot(const DeviceWeight& w, int r, bool valid, const DotInput& in, int s) {
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, unused[4];
  if (valid) quarter_units<static_cast<WType>(kType), kDepth, false>(w, w, r, in, s, acc, unused);
  return quarter_sum(acc);
}
template <int kType, int kDepth>
__device__ __forceinline__ float2 quarter_dot_pair(const DeviceWeight& a, const DeviceWeight& b, int r, bool valid,
                                                   const DotInput& in, int s) {
  float acc_a[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc_b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (valid) quarter_units<static_cast<WType>(kType), kDepth, true>(a, b, r, in, s, acc_a, acc_b);
  return make_float2(quarter_sum(acc_a), quarter_sum(acc_b));
}

// A quarter's units of row r all in registers at once: rows of at most
// kQuarterPreloadUnits units (lane s has units s, s + 8, s + 16, s + 24 —
// quarter_units's one group of 4, schedule 2). The weights are constant, so
// a kernel can load them before its PDL wait and have them when its input
// is ready (quarter_dot_loaded: the same bits as quarter_dot).
constexpr int kQuarterPreloadUnits = 4 * kQuarter;
template <WType T>
struct QuarterRaw {
  typename Unit<T>::Raw raw[4];
};
template <WType T>
__device__ __forceinline__ QuarterRaw<T> quarter_load(const DeviceWeight& w, int r, int s) {
  QuarterRaw<T> q;
  const int n_units = w.k / Unit<T>::kElems;
#pragma unroll
  for (int j = 0; j < 4; ++j) q.raw[j] = Unit<T>::load(w, r, min(s + kQuarter * j, n_units - 1));
  return q;
}
// `valid` false: no dot products, but the quarter still takes part in the
// warp's shuffles (every lane must).
template <WType T>
__device__ __forceinline__ float quarter_dot_loaded(const QuarterRaw<T>& q, const DeviceWeight& w, bool valid, const DotInput& in,
                                                    int s) {
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int n_units = w.k / Unit<T>::kElems;
  if (valid) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float p = Unit<T>::dot(q.raw[j], min(s + kQuarter * j, n_units - 1), in);
      if (s + kQuarter * j < n_units) acc[j] = add_rn(acc[j], p);
    }
  }
  return quarter_sum(acc);
}

// A warp a row, its first units in registers before the input is there:
// lane's units lane, lane + 32, ... up to kWarpPreloadUnits of them (the
// weights are constant: a kernel loads them before its PDL wait), then the
// rest of the row (row_units, any schedule). Each lane adds its units in unit
// order either way: the same bits as row_dot_t.
template <WType T>
constexpr int kWarpPreloadUnits = kUnitDepth<T>;
template <WType T>
struct WarpRaw {
  typename Unit<T>::Raw raw[kWarpPreloadUnits<T>];
};
template <WType T>
__device__ __forceinline__ WarpRaw<T> warp_load(const DeviceWeight& w, int r, int lane) {
  WarpRaw<T> q;
  const int n_units = w.k / Unit<T>::kElems;
#pragma unroll
  for (int j = 0; j < kWarpPreloadUnits<T>; ++j) q.raw[j] = Unit<T>::load(w, r, min(lane + kWarp * j, n_units - 1));
  return q;
}
template <WType T, int kSched>
__device__ __forceinline__ float row_dot_preloaded(const WarpRaw<T>& q, const DeviceWeight& w, int r, const DotInput& in,
                                                   int lane) {
  float acc = 0.0f;
  const int n_units = w.k / Unit<T>::kElems;
#pragma unroll
  for (int j = 0; j < kWarpPreloadUnits<T>; ++j) {
    const float p = Unit<T>::dot(q.raw[j], min(lane + kWarp * j, n_units - 1), in);
    if (lane + kWarp * j < n_units) acc = add_rn(acc, p);
  }
  return warp_sum(row_units<T, kSched>(w, r, in, lane + kWarp * kWarpPreloadUnits<T>, acc));
}

__device__ __forceinline__ float row_dot_float_scalar(const DeviceWeight& w, int r, const DotInput& in, int lane) {
  float acc = 0.0f;
  for (int i = lane; i < w.k; i += kWarp) {
    const size_t idx = static_cast<size_t>(r) * w.k + i;
    float v;
    if (w.type == WType::kF32) v = static_cast<const float*>(w.q)[idx];
    else if (w.type == WType::kF16) v = h2f(static_cast<const uint16_t*>(w.q)[idx]);
    else v = bf2f(static_cast<const uint16_t*>(w.q)[idx]);
    acc += v * in.x[i];
  }
  return warp_sum(acc);
}

__device__ __forceinline__ bool float_rows_aligned(const DeviceWeight& w) {
  return w.type == WType::kF32 ? (w.k % 4 == 0) : (w.k % 8 == 0);
}

template <int kSched>
__device__ __forceinline__ float row_dot(const DeviceWeight& w, int r, const DotInput& in, int lane) {
  switch (w.type) {
    case WType::kQ8_0: return row_dot_t<WType::kQ8_0, kSched>(w, r, in, lane);
    case WType::kQ4_0: return row_dot_t<WType::kQ4_0, kSched>(w, r, in, lane);
    case WType::kQ4_1: return row_dot_t<WType::kQ4_1, kSched>(w, r, in, lane);
    case WType::kQ5_0: return row_dot_t<WType::kQ5_0, kSched>(w, r, in, lane);
    case WType::kQ5_1: return row_dot_t<WType::kQ5_1, kSched>(w, r, in, lane);
    case WType::kQ4_K: return row_dot_t<WType::kQ4_K, kSched>(w, r, in, lane);
    case WType::kQ5_K: return row_dot_t<WType::kQ5_K, kSched>(w, r, in, lane);
    case WType::kQ6_K: return row_dot_t<WType::kQ6_K, kSched>(w, r, in, lane);
    case WType::kF16: return float_rows_aligned(w) ? row_dot_t<WType::kF16, kSched>(w, r, in, lane) : row_dot_float_scalar(w, r, in, lane);
    case WType::kBF16: return float_rows_aligned(w) ? row_dot_t<WType::kBF16, kSched>(w, r, in, lane) : row_dot_float_scalar(w, r, in, lane);
    case WType::kF32: return float_rows_aligned(w) ? row_dot_t<WType::kF32, kSched>(w, r, in, lane) : row_dot_float_scalar(w, r, in, lane);
  }
  return 0.0f;
}

// row_dot of two weights for the same row; one pass when their types match.
template <int kSched>
__device__ __forceinline__ float2 row_dot_pair(const DeviceWeight& a, const DeviceWeight& b, int r, const DotInput& in,
                                               int lane) {
  if (a.type == b.type) {
    switch (a.type) {
      case WType::kQ8_0: return row_dot_pair_t<WType::kQ8_0, kSched>(a, b, r, in, lane);
      case WType::kQ4_0: return row_dot_pair_t<WType::kQ4_0, kSched>(a, b, r, in, lane);
      case WType::kQ4_1: return row_dot_pair_t<WType::kQ4_1, kSched>(a, b, r, in, lane);
      case WType::kQ5_0: return row_dot_pair_t<WType::kQ5_0, kSched>(a, b, r, in, lane);
      case WType::kQ5_1: return row_dot_pair_t<WType::kQ5_1, kSched>(a, b, r, in, lane);
      case WType::kQ4_K: return row_dot_pair_t<WType::kQ4_K, kSched>(a, b, r, in, lane);
      case WType::kQ5_K: return row_dot_pair_t<WType::kQ5_K, kSched>(a, b, r, in, lane);
      case WType::kQ6_K: return row_dot_pair_t<WType::kQ6_K, kSched>(a, b, r, in, lane);
      default: break;
    }
  }
  return make_float2(row_dot<kSched>(a, r, in, lane), row_dot<kSched>(b, r, in, lane));
}

// row_dot and row_dot_pair with the type fixed at compile time (kType ≥ 0, a
// WType), or chosen at run time (kType < 0). A kernel instantiated for one
// type gets that type's register count, not the largest of all (46 for Q8_0
// instead of 109), and so more resident warps and more bytes in flight.
template <int kType, int kSched>
__device__ __forceinline__ float row_dot_k(const DeviceWeight& w, int r, const DotInput& in, int lane) {
  constexpr WType T = static_cast<WType>(kType);
  if constexpr (kType < 0) {
    return row_dot<kSched>(w, r, in, lane);
  } else if constexpr (T == WType::kF32 || T == WType::kF16 || T == WType::kBF16) {
    return float_rows_aligned(w) ? row_dot_t<T, kSched>(w, r, in, lane) : row_dot_float_scalar(w, r, in, lane);
  } else {
    return row_dot_t<T, kSched>(w, r, in, lane);
  }
}
template <int kType, int kSched>
__device__ __forceinline__ float2 row_dot_pair_k(const DeviceWeight& a, const DeviceWeight& b, int r, const DotInput& in,
                                                 int lane) {
  constexpr WType T = static_cast<WType>(kType);
  if constexpr (kType < 0) {
    return row_dot_pair<kSched>(a, b, r, in, lane);
  } else if constexpr (T == WType::kF32 || T == WType::kF16 || T == WType::kBF16) {
    if (float_rows_aligned(a)) return row_dot_pair_t<T, kSched>(a, b, r, in, lane);
    return make_float2(row_dot_float_scalar(a, r, in, lane), row_dot_float_scalar(b, r, in, lane));
  } else {
    return row_dot_pair_t<T, kSched>(a, b, r, in, lane);
  }
}

// Calls f(std::integral_constant<int, T>) with T the WType of `t`: picks a
// kernel instantiation (every launch of the kernel uses one of these).
template <class F>
auto dispatch_wtype(WType t, F&& f) {
  switch (t) {
    case WType::kF32: return f(std::integral_constant<int, static_cast<int>(WType::kF32)>{});
    case WType::kF16: return f(std::integral_constant<int, static_cast<int>(WType::kF16)>{});
    case WType::kBF16: return f(std::integral_constant<int, static_cast<int>(WType::kBF16)>{});
    case WType::kQ8_0: return f(std::integral_constant<int, static_cast<int>(WType::kQ8_0)>{});
    case WType::kQ4_0: return f(std::integral_constant<int, static_cast<int>(WType::kQ4_0)>{});
    case WType::kQ4_1: return f(std::integral_constant<int, static_cast<int>(WType::kQ4_1)>{});
    case WType::kQ5_0: return f(std::integral_constant<int, static_cast<int>(WType::kQ5_0)>{});
    case WType::kQ5_1: return f(std::integral_constant<int, static_cast<int>(WType::kQ5_1)>{});
    case WType::kQ4_K: return f(std::integral_constant<int, static_cast<int>(WType::kQ4_K)>{});
    case WType::kQ5_K: return f(std::integral_constant<int, static_cast<int>(WType::kQ5_K)>{});
    case WType::kQ6_K: return f(std::integral_constant<int, static_cast<int>(WType::kQ6_K)>{});
  }
  return f(std::integral_constant<int, -1>{});
}

__device__ __host__ inline bool wtype_is_quantized(WType t) {
  return t != WType::kF32 && t != WType::kF16 && t != WType::kBF16;
}

}  // namespace minfer::kernels

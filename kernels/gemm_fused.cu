// The prefill product of a step of few tokens: y[t] (+)= W · x[t] on tensor
// cores, the quantized weight read once and dequantized in registers.
//
// The other prefill product (the CUDA backend's gemm) expands the whole
// weight to f16 in global memory and hands it to cuBLAS: for 7B that is
// 4.4 GB read, 15 GB written and 15 GB read again at every step whatever its
// tokens, so a 2-token step took 17.5 ms on an H100 and a 64-token one 18
// (session 45, run 1). Here the operands are the same f16 values — the
// weight dequantized in f32 and rounded to f16 (dequant.cuh's formulas), x
// as the backend converted it — multiplied with f32 accumulation: what
// cuBLAS computes, with the sums in another order.
//
// mma.sync m16n8k16: the weight is the A operand (16 rows × 16 of k), the
// tokens the B operand (16 of k × 8 tokens). A dot product does not care in
// which order it meets k, so each lane takes its A elements not where the
// fragment layout puts them but from 32 elements of its row that one or two
// 16-byte loads bring (two runs of 16, per type below), and reads x at the
// same places: lane (g, t) of the warp holds rows g and g + 8 and runs
// Runs(t) of a 128-element chunk of k, and its slots 2t, 2t + 1, 2t + 8,
// 2t + 9 of k step s are elements 4s .. 4s + 3 of its runs. x in
// X16Order::kLanes (kernels.h) has each run's values where a warp's loads of
// them take whole sectors (the same values, the same bits). No barrier in
// the loop: each warp streams its own bytes, into registers four chunks at a
// time (gemm_fused_kernel) or, up to 8 tokens, through stages in shared
// memory seven chunks ahead (gemm_piped_kernel, below).
//
// The unpacking makes its integers floats without conversion instructions
// (magic_float; Q8_0 by HMUL2), which on Hopper issue at a fraction of the
// FP32 rate: the first form's I2F bounded it — 7B's Q6_K ffn_down took 85.7
// µs for 2 tokens, 53.8 without them (H100, session 53, run 2).
//
// A block: 16 weight rows, kWarps warps each taking every kWarps-th chunk
// of k, up to 32 tokens (4 tiles of 8) or, in steps of more than 32 tokens
// where the rows fill the GPU, 64 (8 tiles, which each chunk's unpacked
// values serve: launch_gemm_fused); the warps' sums are added in warp order
// through shared memory (the same bits at every run, and whatever the
// tiles a block). More tokens: blocks of the next 32 or 64 (grid y) read the
// weight again.
#include <algorithm>
#include <atomic>
#include <type_traits>

#include "kernels/common.cuh"
#include "kernels/dequant.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/pipe.cuh"

namespace minfer::kernels {
namespace {

constexpr int kRows = 16;      // weight rows a block
constexpr int kWarps = 4;      // warps a block, splitting k
constexpr int kChunk = 128;    // k a warp's step: 8 mma k-steps
constexpr int kMaxTiles = 8;   // token tiles of 8 a block
constexpr int kGemmStages = 8; // the pipelined form's stages a warp

// Q4_0, Q4_1, Q5_0, Q5_1: blocks of 32 (16 bytes of nibbles: elements j and
// 16 + j in byte j; Q5's fifth bits a 32-bit word; d, or d and m, a block).
template <WType T>
constexpr bool kLegacy = T == WType::kQ4_0 || T == WType::kQ4_1 || T == WType::kQ5_0 || T == WType::kQ5_1;
// The types unpacked from 16-byte loads; the others go through dequant8.
template <WType T>
constexpr bool kUnpacked =
    T == WType::kQ8_0 || T == WType::kQ4_K || T == WType::kQ5_K || T == WType::kQ6_K || kLegacy<T>;

std::atomic<uint64_t> g_launches{0};
std::atomic<uint64_t> g_piped_launches{0};
std::atomic<uint64_t> g_lanes_launches{0};

__device__ __forceinline__ void mma_16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                          uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Where lane t's two runs of 16 start in a 128-element chunk.
template <WType T>
__device__ __forceinline__ int run0(int t) {
  if constexpr (T == WType::kQ4_K || T == WType::kQ5_K) return 64 * (t / 2) + 16 * (t % 2);  // one 32-byte unit: low, then high nibbles
  if constexpr (T == WType::kQ6_K) return 32 * (t / 2) + 16 * (t % 2);  // ql bytes: low nibbles, then high
  return 32 * t;                                                          // 32 consecutive elements
}
template <WType T>
__device__ __forceinline__ int run1(int t) {
  if constexpr (T == WType::kQ4_K || T == WType::kQ5_K) return run0<T>(t) + 32;
  if constexpr (T == WType::kQ6_K) return run0<T>(t) + 64;
  return 32 * t + 16;
}

__device__ __forceinline__ uint8_t byte_of(const int4& v, int i) {
  const int word = i / 4 == 0 ? v.x : i / 4 == 1 ? v.y : i / 4 == 2 ? v.z : v.w;
  return static_cast<uint8_t>(static_cast<uint32_t>(word) >> (8 * (i % 4)));
}

// A lane's raw bytes of one row's chunk, loaded ahead of their use.
struct Raw {
  int4 a = {}, b = {};
  uint32_t s = 0;  // scales: Q8_0 d; Q6_K d and the runs' two int8 scales
  int4 h = {};     // Q5_K's fifth bits (the bytes of both runs)
};

// Where a lane's raw bytes come from (load_raw's loads, in one order for
// every policy): each 16-byte piece its own (operator()), the 16 bytes the four
// lanes of a row share (`quad16`: a K-quant super-block's scales), a 2-byte
// scale (`u16`). DirectLoads reads them from global memory into registers.
// The pipelined kernel below sends them as cp.async into the lane's slots of
// a stage and takes them from there again: the decode pipeline's IssueFetch
// and ReadFetch (pipe.cuh).
struct DirectLoads {
  __device__ int4 operator()(const void* p) { return __ldg(static_cast<const int4*>(p)); }
  __device__ int4 quad16(const void* p) { return __ldg(static_cast<const int4*>(p)); }
  __device__ uint32_t u16(const uint16_t* p) { return __ldg(p); }
  __device__ uint32_t u32(const uint32_t* p) { return __ldg(p); }  // the legacy types' (registers only)
};

template <WType T, class Loads>
__device__ __forceinline__ void load_raw(const DeviceWeight& w, int row, int chunk, int t, Raw& r, Loads& ld) {
  const size_t rw = static_cast<size_t>(row);
  if constexpr (T == WType::kQ8_0) {
    const uint32_t units = static_cast<uint32_t>(w.k / 32), u = static_cast<uint32_t>(4 * chunk + t);
    const int8_t* q = static_cast<const int8_t*>(w.q) + rw * w.k;
    r.a = ld(q + split_offset(u, 0, units));
    r.b = ld(q + split_offset(u, 16, units));
    r.s = ld.u16(static_cast<const uint16_t*>(w.meta) + rw * units + u);
  } else if constexpr (T == WType::kQ4_K || T == WType::kQ5_K) {
    const uint32_t units = static_cast<uint32_t>(w.k / 64), u = static_cast<uint32_t>(2 * chunk + t / 2);
    const uint8_t* q = static_cast<const uint8_t*>(w.q) + rw * (w.k / 2);
    r.a = ld(q + split_offset(u, 16 * (t % 2), units));
    r.b = ld.quad16(static_cast<const uint8_t*>(w.meta) + (rw * (w.k / 256) + u / 4) * 16);
    // Q5_K: byte l of a super-block's 32 holds the fifth bits of its elements
    // l + 32 i (bit i); the lane's bytes are its nibbles' l.
    if constexpr (T == WType::kQ5_K) r.h = ld(static_cast<const uint8_t*>(w.qh) + rw * (w.k / 8) + (u / 4) * 32 + 16 * (t % 2));
  } else if constexpr (T == WType::kQ6_K) {
    const int sb = chunk / 2, n = chunk % 2, l0 = 16 * (t % 2), j = t / 2;
    const uint8_t* ql = static_cast<const uint8_t*>(w.q) + rw * (w.k / 2) + sb * 128 + n * 64;
    const uint8_t* qh = static_cast<const uint8_t*>(w.qh) + rw * (w.k / 4) + sb * 64 + n * 32;
    r.a = ld(ql + l0 + 32 * j);
    r.b = ld(qh + l0);
    // The super-block's 16 int8 scales; this chunk's are its half n.
    const int4 sc = ld.quad16(static_cast<const uint8_t*>(w.meta) + (rw * (w.k / 256) + sb) * 16);
    const uint32_t d = ld.u16(static_cast<const uint16_t*>(w.d) + rw * (w.k / 256) + sb);
    const uint32_t s0 = byte_of(sc, 8 * n + (t % 2) + 2 * j);
    const uint32_t s1 = byte_of(sc, 8 * n + (t % 2) + 2 * (2 + j));
    r.s = d | (s0 << 16) | (s1 << 24);
  } else if constexpr (kLegacy<T>) {
    // Lane t: block t of the chunk, its 16 bytes; r.s its d (and m), r.b.x
    // its fifth bits.
    const size_t blk = rw * static_cast<size_t>(w.k / 32) + static_cast<size_t>(4 * chunk + t);
    r.a = ld(static_cast<const uint8_t*>(w.q) + blk * 16);
    if constexpr (T == WType::kQ5_0 || T == WType::kQ5_1) r.b.x = static_cast<int>(ld.u32(static_cast<const uint32_t*>(w.qh) + blk));
    if constexpr (T == WType::kQ4_0 || T == WType::kQ5_0) {
      r.s = ld.u16(static_cast<const uint16_t*>(w.meta) + blk);
    } else {
      r.s = ld.u32(static_cast<const uint32_t*>(w.meta) + blk);
    }
  }
}

// The f32 value of an integer 0 <= v < 2^22 that sits in the low bits of
// `word` (the rest zero, or 0x4B000000 already in): 2^23 + v as a float's bits,
// less 2^23 — exact, on the integer and FP32 pipes instead of a conversion
// (I2F), which on Hopper issues at a fraction of their rate. `bias`: more to
// take off (32 for Q6_K's q - 32), exact too (Sterbenz).
__device__ __forceinline__ float magic_float(uint32_t word, float bias = 0.0f) {
  return __uint_as_float(word | 0x4B000000u) - (8388608.0f + bias);
}
// Byte k of `bytes` as magic_float's word (byte 0, under 0x4B in byte 3).
__device__ __forceinline__ float byte_float(uint32_t bytes, int k, float bias = 0.0f) {
  return magic_float(__byte_perm(bytes, 0x4B000000u, static_cast<uint32_t>(k) | 0x7440u), bias);
}

// The lane's 32 elements of one row, as 16 pairs of f16 in run order, each
// dequant.cuh's value rounded to f16 (what launch_dequantize_f16 writes), by
// the same f32 arithmetic with the integers made floats by magic_float, so
// that no value passes a conversion unit but the final rounding to f16:
// Q8_0 not even that — its int8 values become f16 integers under a biased
// exponent and HMUL2 rounds q·d once, as the f32 product's rounding does
// (an int8 times an f16 is exact in f32).
template <WType T>
__device__ __forceinline__ void unpack(const DeviceWeight& w, int row, int chunk, int t, const Raw& r, uint32_t (&p)[16]) {
  if constexpr (T == WType::kQ8_0) {
    const __half2 d = __half2half2(__ushort_as_half(static_cast<uint16_t>(r.s)));
    const __half2 bias = __float2half2_rn(1152.0f);  // 1024 + the 128 the xor adds
    const uint32_t words[8] = {static_cast<uint32_t>(r.a.x), static_cast<uint32_t>(r.a.y), static_cast<uint32_t>(r.a.z),
                               static_cast<uint32_t>(r.a.w), static_cast<uint32_t>(r.b.x), static_cast<uint32_t>(r.b.y),
                               static_cast<uint32_t>(r.b.z), static_cast<uint32_t>(r.b.w)};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t u = words[j] ^ 0x80808080u;  // q + 128 a byte
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // Bytes 2h and 2h + 1 under 0x64: f16 1024 + q + 128.
        const uint32_t biased = __byte_perm(u, 0x64646464u, h == 0 ? 0x4140u : 0x4342u);
        const __half2 q = __hsub2(*reinterpret_cast<const __half2*>(&biased), bias);
        const __half2 v = __hmul2(q, d);
        p[2 * j + h] = *reinterpret_cast<const uint32_t*>(&v);
      }
    }
  } else if constexpr (T == WType::kQ4_K || T == WType::kQ5_K) {
    const float d = h2f(static_cast<uint16_t>(r.b.x)), dmin = h2f(static_cast<uint16_t>(static_cast<uint32_t>(r.b.x) >> 16));
    const int quarter = (2 * chunk + t / 2) % 4;
    int sc0, m0, sc1, m1;
    scale_min_k4_pair(quarter, r.b, &sc0, &m0, &sc1, &m1);
    const float ds0 = d * static_cast<float>(sc0), dm0 = dmin * static_cast<float>(m0);
    const float ds1 = d * static_cast<float>(sc1), dm1 = dmin * static_cast<float>(m1);
    // Q4_K's high nibbles stay in place: 16 q, times ds1 / 16 (exact: a power
    // of two). Q5_K's are shifted down under their fifth bits, bits 2·quarter
    // and 2·quarter + 1 of the lane's bytes of qh.
    const float ds1_hi = T == WType::kQ4_K ? ds1 * 0.0625f : ds1;
    const uint32_t words[4] = {static_cast<uint32_t>(r.a.x), static_cast<uint32_t>(r.a.y), static_cast<uint32_t>(r.a.z),
                               static_cast<uint32_t>(r.a.w)};
    const uint32_t bits[4] = {static_cast<uint32_t>(r.h.x), static_cast<uint32_t>(r.h.y), static_cast<uint32_t>(r.h.z),
                              static_cast<uint32_t>(r.h.w)};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t lo = words[j] & 0x0F0F0F0Fu, hi = words[j] & 0xF0F0F0F0u;
      if constexpr (T == WType::kQ5_K) {
        lo |= ((bits[j] >> (2 * quarter)) & 0x01010101u) << 4;
        hi = ((words[j] >> 4) & 0x0F0F0F0Fu) | (((bits[j] >> (2 * quarter + 1)) & 0x01010101u) << 4);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // bytes 2h, 2h + 1 of the word: pair i = 2j + h
        p[2 * j + h] = pack_h2(ds0 * byte_float(lo, 2 * h) - dm0, ds0 * byte_float(lo, 2 * h + 1) - dm0);
        p[8 + 2 * j + h] = pack_h2(ds1_hi * byte_float(hi, 2 * h) - dm1, ds1_hi * byte_float(hi, 2 * h + 1) - dm1);
      }
    }
  } else if constexpr (T == WType::kQ6_K) {
    const float d = h2f(static_cast<uint16_t>(r.s));
    const float d0 = d * static_cast<float>(static_cast<int8_t>(r.s >> 16));
    const float d1 = d * static_cast<float>(static_cast<int8_t>(r.s >> 24));
    const int j2 = 2 * (t / 2);
    const uint32_t la[4] = {static_cast<uint32_t>(r.a.x), static_cast<uint32_t>(r.a.y), static_cast<uint32_t>(r.a.z),
                            static_cast<uint32_t>(r.a.w)};
    const uint32_t hb[4] = {static_cast<uint32_t>(r.b.x), static_cast<uint32_t>(r.b.y), static_cast<uint32_t>(r.b.z),
                            static_cast<uint32_t>(r.b.w)};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      // Four 6-bit values a word: the nibbles of ql with their two bits of qh.
      const uint32_t q0 = (la[j] & 0x0F0F0F0Fu) | (((hb[j] >> j2) & 0x03030303u) << 4);
      const uint32_t q1 = ((la[j] >> 4) & 0x0F0F0F0Fu) | (((hb[j] >> (4 + j2)) & 0x03030303u) << 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        p[2 * j + h] = pack_h2(d0 * byte_float(q0, 2 * h, 32.0f), d0 * byte_float(q0, 2 * h + 1, 32.0f));
        p[8 + 2 * j + h] = pack_h2(d1 * byte_float(q1, 2 * h, 32.0f), d1 * byte_float(q1, 2 * h + 1, 32.0f));
      }
    }
  } else if constexpr (kLegacy<T>) {
    // dequant_element's d (v - 8 | v - 16) or d v + m, v under magic_float.
    const float d = h2f(static_cast<uint16_t>(r.s)), m = h2f(static_cast<uint16_t>(r.s >> 16));
    constexpr float kBias = T == WType::kQ4_0 ? 8.0f : T == WType::kQ5_0 ? 16.0f : 0.0f;
    const uint32_t qh = static_cast<uint32_t>(r.b.x);
    // Four fifth bits to bit 4 of four bytes (the shifted copies of x do not
    // overlap: no carries).
    auto spread = [](uint32_t x) { return (((x & 0xFu) * 0x00204081u) & 0x01010101u) << 4; };
    auto value = [&](uint32_t q, int k) {
      if constexpr (T == WType::kQ4_0 || T == WType::kQ5_0) return d * byte_float(q, k, kBias);
      return d * byte_float(q, k) + m;
    };
    const uint32_t words[4] = {static_cast<uint32_t>(r.a.x), static_cast<uint32_t>(r.a.y), static_cast<uint32_t>(r.a.z),
                               static_cast<uint32_t>(r.a.w)};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t lo = words[j] & 0x0F0F0F0Fu, hi = (words[j] >> 4) & 0x0F0F0F0Fu;  // elements 4j.., 16 + 4j..
      if constexpr (T == WType::kQ5_0 || T == WType::kQ5_1) {
        lo |= spread(qh >> (4 * j));
        hi |= spread(qh >> (16 + 4 * j));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        p[2 * j + h] = pack_h2(value(lo, 2 * h), value(lo, 2 * h + 1));
        p[8 + 2 * j + h] = pack_h2(value(hi, 2 * h), value(hi, 2 * h + 1));
      }
    }
  } else {
    // Every other type: dequant8's values, 32 consecutive elements.
    (void)r;
    const int i0 = chunk * kChunk + 32 * t;
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      float f[8];
      dequant8(w, row, i0 + 8 * h, f);
#pragma unroll
      for (int i = 0; i < 4; ++i) p[4 * h + i] = pack_h2(f[2 * i], f[2 * i + 1]);
    }
  }
}

// A group of kUnroll chunks of a warp: their raw bytes of both rows, then
// unpacked and multiplied into c.
template <int kUnroll>
struct Group {
  Raw a[kUnroll], b[kUnroll];
};

template <WType T, int kUnroll>
__device__ __forceinline__ void load_group(const DeviceWeight& w, int ra, int rb, int first, int chunks, int t,
                                           Group<kUnroll>& gr) {
  if constexpr (kUnpacked<T>) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int ch = first + u * kWarps;
      if (ch < chunks) {
        DirectLoads ld;
        load_raw<T>(w, ra, ch, t, gr.a[u], ld);
        load_raw<T>(w, rb, ch, t, gr.b[u], ld);
      }
    }
  }
}

// Chunk ch of rows ra and rb (their raw bytes a and b) unpacked and
// multiplied into c, token tile after tile.
template <WType T, int kTiles>
__device__ __forceinline__ void multiply_chunk(const DeviceWeight& w, int ra, int rb, int ch, int g, int t, const __half* x,
                                               int ldx, bool x_lanes, int tokens, int tok0, const Raw& a, const Raw& b,
                                               float (&c)[kTiles][4]) {
  // A run's two 8-value pieces: where its elements are, or where
  // X16Order::kLanes puts them, 32 apart (Q4_K's and Q5_K's runs: at 8t and
  // 64 + 8t, a token's four lanes reading 64 consecutive bytes).
  const int r0 = run0<T>(t), r1 = run1<T>(t);
  const int at0 = x_lanes ? x16_lanes_pos(r0) : r0, at1 = x_lanes ? x16_lanes_pos(r1) : r1, apart = x_lanes ? 32 : 8;
  uint32_t pa[16], pb[16];
  unpack<T>(w, ra, ch, t, a, pa);
  unpack<T>(w, rb, ch, t, b, pb);
  // The tokens' values of the lane's first run (k-steps 0-3), then of its
  // second (4-7); each k-step goes to every tile in turn, so that a tile's
  // mma does not wait on its own last one: each tile's sum takes its steps
  // in the same order as one tile at a time would (the same bits).
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    uint32_t xb[kTiles][8];
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      const int n = tok0 + tile * 8 + g;
      if (n < tokens) {
        const __half* xr = x + static_cast<size_t>(n) * ldx + ch * kChunk + (half == 0 ? at0 : at1);
        const int4 v0 = *reinterpret_cast<const int4*>(xr), v1 = *reinterpret_cast<const int4*>(xr + apart);
        xb[tile][0] = v0.x; xb[tile][1] = v0.y; xb[tile][2] = v0.z; xb[tile][3] = v0.w;
        xb[tile][4] = v1.x; xb[tile][5] = v1.y; xb[tile][6] = v1.z; xb[tile][7] = v1.w;
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) xb[tile][i] = 0u;
      }
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int k = 4 * half + s;
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        mma_16816(c[tile], pa[2 * k], pb[2 * k], pa[2 * k + 1], pb[2 * k + 1], xb[tile][2 * s], xb[tile][2 * s + 1]);
      }
    }
  }
}

template <WType T, int kUnroll, int kTiles>
__device__ __forceinline__ void multiply_group(const DeviceWeight& w, int ra, int rb, int first, int chunks, int g, int t,
                                               const __half* x, int ldx, bool x_lanes, int tokens, int tok0,
                                               const Group<kUnroll>& gr, float (&c)[kTiles][4]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int ch = first + u * kWarps;
    if (ch >= chunks) break;
    multiply_chunk<T, kTiles>(w, ra, rb, ch, g, t, x, ldx, x_lanes, tokens, tok0, gr.a[u], gr.b[u], c);
  }
}

// The warps' sums of a block, added in warp order through shared memory
// (`sums`: kWarps × kTiles × 4 × 32 floats) and written to y (+ y). c[tile]:
// rows g (0, 1) and g + 8 (2, 3), tokens 2t and 2t + 1 of the tile.
template <int kTiles>
__device__ __forceinline__ void write_sums(float* sums, const float (&c)[kTiles][4], int row0, int n_rows, int tok0, int tokens,
                                           float* y, int ldy, bool accumulate) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  auto at = [&](int wp, int tile, int i, int l) -> float& { return sums[((wp * kTiles + tile) * 4 + i) * kWarp + l]; };
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
    for (int i = 0; i < 4; ++i) at(warp, tile, i, lane) = c[tile][i];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kTiles * 4 * kWarp; e += kWarps * kWarp) {
    const int tile = e / (4 * kWarp), i = (e / kWarp) % 4, l = e % kWarp;
    const int row = row0 + l / 4 + (i >= 2 ? 8 : 0), n = tok0 + tile * 8 + 2 * (l % 4) + (i & 1);
    if (row >= n_rows || n >= tokens) continue;
    float v = at(0, tile, i, l);
#pragma unroll
    for (int k = 1; k < kWarps; ++k) v += at(k, tile, i, l);
    float* out = y + static_cast<size_t>(n) * ldy + row;
    *out = accumulate ? *out + v : v;
  }
}

// A warp loads four chunks of k (both rows), then multiplies them; at most
// 168 registers, three blocks an SM. H100, session 45 (pp2 .. pp64): loading
// the next two chunks while multiplying the last two was slower at every size
// (run 3: 7B Q4_K_M pp16 2,235 against 2,457 tok/s, pp64 3,431 against
// 3,990); against ptxas's own 128-180 registers (two blocks an SM) the bound
// won by 1-8% in nine of ten cells on 7B Q4_K_M and 0.5B Q8_0 (run 4: 7B pp2
// 377 / 350, pp64 4,036 / 3,983; 0.5B pp8 6,450 / 6,033; 7B pp8 1,308 /
// 1,320); two chunks a group in at most 128 registers (four blocks) was
// mixed.
template <WType T, int kTiles>
__global__ void __launch_bounds__(kWarps * kWarp, 3)
    gemm_fused_kernel(DeviceWeight w, const __half* x, int ldx, bool x_lanes, int tokens, float* y, int ldy, bool accumulate) {
  __shared__ float sums[kWarps * kTiles * 4 * kWarp];
  pdl_begin();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kRows;
  // Rows past the matrix load its last row; their results are not written.
  const int ra = min(row0 + g, w.n_rows - 1), rb = min(row0 + g + 8, w.n_rows - 1);
  const int tok0 = blockIdx.y * kTiles * 8;
  const int chunks = w.k / kChunk;
  float c[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;

  // 8 tiles: two chunks a group (xb and c take the registers four held).
  constexpr int kUnroll = kTiles > 4 ? 2 : 4;
  for (int first = warp; first < chunks; first += kWarps * kUnroll) {
    Group<kUnroll> gr;
    load_group<T, kUnroll>(w, ra, rb, first, chunks, t, gr);
    multiply_group<T, kUnroll, kTiles>(w, ra, rb, first, chunks, g, t, x, ldx, x_lanes, tokens, tok0, gr, c);
  }

  write_sums<kTiles>(sums, c, row0, w.n_rows, tok0, tokens, y, ldy, accumulate);
}

// ---- The pipelined form: each warp's loads kGemmStages - 1 chunks ahead ----
//
// The kernel above holds a group's raw bytes in registers from their loads
// to their use, so a warp has at most four chunks in flight and none while it
// multiplies: twelve warps an SM kept ~0.8 TB/s of weights coming (a 2-token
// 7B Q4_K_M step 5.3-5.8 ms on an H100, where a decode step reads the same
// bytes in 2.1). Here each lane sends its loads as cp.async into slots of its
// own in shared memory, kGemmStages - 1 chunks ahead of the one it multiplies
// (the first of them before the PDL wait: weights are constants), and takes
// them back from there: the same bytes, unpacked and multiplied in the same
// order — the same bits as the kernel above.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
// A warp's stage: one chunk of both its rows. The lanes' 16-byte pieces
// (piece i of lane l at 16 (32 i + l): a warp's reads of one piece hit
// distinct banks), then their 4-byte words (a 2-byte scale's aligned word; a
// quarter of the 16 scale bytes the four lanes of a row share).
template <WType T>
struct GemmStage {
  static constexpr int kPieces = T == WType::kQ4_K ? 2 : 4;  // a lane's, both rows
  static constexpr int kWords = T == WType::kQ6_K ? 4 : 2;
  static constexpr int kOff4 = kPieces * kWarp * 16;
  static constexpr int kBytes = kOff4 + kWords * kWarp * 4;
};

// The decode pipeline's fetch policies (pipe.cuh) with the 2-byte scale's
// half taken from its address, which load_raw gives them.
template <class S>
using IssueLoads = piped::IssueFetch<S>;
template <class S>
struct ReadLoads : piped::ReadFetch<S> {
  __device__ uint16_t u16(const uint16_t* p) {
    this->high = (reinterpret_cast<uintptr_t>(p) & 2) != 0;
    return piped::ReadFetch<S>::u16(p);
  }
};
#endif

// Its dynamic shared memory: the warps' rings.
template <WType T>
constexpr size_t piped_smem_bytes(int tiles) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  const size_t ring = static_cast<size_t>(kWarps) * kGemmStages * GemmStage<T>::kBytes;
#else
  const size_t ring = 0;
#endif
  const size_t sums = sizeof(float) * kWarps * tiles * 4 * kWarp;  // write_sums's, over the ring once it is done
  return ring > sums ? ring : sums;
}

template <WType T, int kTiles>
__global__ void __launch_bounds__(kWarps * kWarp, 3)
    gemm_piped_kernel(DeviceWeight w, const __half* x, int ldx, bool x_lanes, int tokens, float* y, int ldy, bool accumulate) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using S = GemmStage<T>;
  extern __shared__ __align__(16) unsigned char gemm_ring[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kRows;
  const int ra = min(row0 + g, w.n_rows - 1), rb = min(row0 + g + 8, w.n_rows - 1);
  const int tok0 = blockIdx.y * kTiles * 8;
  const int chunks = w.k / kChunk;
  const int n = chunks > warp ? (chunks - warp + kWarps - 1) / kWarps : 0;  // chunks warp, warp + kWarps, ...
  unsigned char* ring = gemm_ring + static_cast<size_t>(warp) * kGemmStages * S::kBytes;
  auto issue = [&](int i) {
    IssueLoads<S> ld{ring + (i % kGemmStages) * S::kBytes, lane};
    Raw unused;
    load_raw<T>(w, ra, warp + i * kWarps, t, unused, ld);
    load_raw<T>(w, rb, warp + i * kWarps, t, unused, ld);
  };
#pragma unroll
  for (int i = 0; i < kGemmStages - 1; ++i) {
    if (i < n) issue(i);
    piped::cp_async_commit();
  }
  pdl_begin();
  float c[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
  for (int i = 0; i < n; ++i) {
    __syncwarp();  // every lane is done with the stage refilled now (read at i - 1)
    if (i + kGemmStages - 1 < n) issue(i + kGemmStages - 1);
    piped::cp_async_commit();
    piped::cp_async_wait<kGemmStages - 1>();
    __syncwarp();  // the words a row's quad shares have landed for all four
    ReadLoads<S> ld{{ring + (i % kGemmStages) * S::kBytes, lane, false}};
    Raw a, b;
    const int ch = warp + i * kWarps;
    load_raw<T>(w, ra, ch, t, a, ld);
    load_raw<T>(w, rb, ch, t, b, ld);
    multiply_chunk<T, kTiles>(w, ra, rb, ch, g, t, x, ldx, x_lanes, tokens, tok0, a, b, c);
  }
  __syncthreads();  // every warp is done with its stages: the sums go over them
  write_sums<kTiles>(reinterpret_cast<float*>(gemm_ring), c, row0, w.n_rows, tok0, tokens, y, ldy, accumulate);
#endif
}

int g_stages = 0;        // set_gemm_fused_stages
bool g_generic = false;  // set_gemm_fused_generic
int g_tiles = 0;         // set_gemm_fused_tiles
template <WType T>
using Tag = std::integral_constant<WType, T>;

template <int kTiles>
cudaError_t launch_tiles(const DeviceWeight& w, const __half* x, int ldx, bool x_lanes, int tokens, float* y, int ldy,
                         bool accumulate, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((w.n_rows + kRows - 1) / kRows),
                  static_cast<unsigned>((tokens + kTiles * 8 - 1) / (kTiles * 8)));
  const dim3 block(kWarps * kWarp);
  auto go = [&](auto kernel) { return launch_kernel(kernel, grid, block, 0, stream, w, x, ldx, x_lanes, tokens, y, ldy, accumulate); };
  // The pipelined kernel: its ring of kGemmStages stages a warp in dynamic
  // shared memory. By default up to 8 tokens (one tile; kTiles 1), where it
  // won in session 53's run 2 (H100: 0.5B Q8_0 pp2 .. pp8 +19-21% over the
  // first form, the register loads with the same unpacking +10-11%); from 9
  // tokens each lane's reads of
  // the tokens (a tile of 8 a 16-byte load each, from L1) fare worse beside
  // the shared memory the stages take (7B Q4_K_M pp16 2,406 against 2,668
  // tok/s, pp32 3,339 against 3,697).
  if (g_generic) return go(gemm_fused_kernel<WType::kF32, kTiles>);
  const bool piped = device_limits().cc_major >= 8 && (g_stages == 0 ? kTiles == 1 : g_stages > 1);
  auto typed = [&](auto tag, auto direct, auto pipelined) {
    if (!piped) return go(direct);
    const size_t smem = piped_smem_bytes<decltype(tag)::value>(kTiles);
    if (const cudaError_t st = allow_dynamic_smem(reinterpret_cast<const void*>(pipelined), smem); st != cudaSuccess) return st;
    const cudaError_t st = launch_kernel(pipelined, grid, block, smem, stream, w, x, ldx, x_lanes, tokens, y, ldy, accumulate);
    if (st == cudaSuccess) g_piped_launches.fetch_add(1, std::memory_order_relaxed);
    return st;
  };
  switch (w.type) {
    case WType::kQ8_0: return typed(Tag<WType::kQ8_0>{}, gemm_fused_kernel<WType::kQ8_0, kTiles>, gemm_piped_kernel<WType::kQ8_0, kTiles>);
    case WType::kQ4_K: return typed(Tag<WType::kQ4_K>{}, gemm_fused_kernel<WType::kQ4_K, kTiles>, gemm_piped_kernel<WType::kQ4_K, kTiles>);
    case WType::kQ6_K: return typed(Tag<WType::kQ6_K>{}, gemm_fused_kernel<WType::kQ6_K, kTiles>, gemm_piped_kernel<WType::kQ6_K, kTiles>);
    // The legacy types' 4-byte words and Q5_K's fifth bits have no place in
    // the stages: registers.
    case WType::kQ5_K: return go(gemm_fused_kernel<WType::kQ5_K, kTiles>);
    case WType::kQ4_0: return go(gemm_fused_kernel<WType::kQ4_0, kTiles>);
    case WType::kQ4_1: return go(gemm_fused_kernel<WType::kQ4_1, kTiles>);
    case WType::kQ5_0: return go(gemm_fused_kernel<WType::kQ5_0, kTiles>);
    case WType::kQ5_1: return go(gemm_fused_kernel<WType::kQ5_1, kTiles>);
    default: return go(gemm_fused_kernel<WType::kF32, kTiles>);  // dequant8 reads w.type
  }
}

}  // namespace

bool gemm_fused_supported(const DeviceWeight& w, int ldx) {
  return w.n_rows > 0 && w.k > 0 && w.k % kChunk == 0 && ldx % 8 == 0 && ldx >= w.k;
}

uint64_t gemm_fused_launches() { return g_launches.load(std::memory_order_relaxed); }
uint64_t gemm_fused_lanes_launches() { return g_lanes_launches.load(std::memory_order_relaxed); }
uint64_t gemm_fused_piped_launches() { return g_piped_launches.load(std::memory_order_relaxed); }

void set_gemm_fused_stages(int stages) { g_stages = std::max(0, stages); }
void set_gemm_fused_generic(bool on) { g_generic = on; }
void set_gemm_fused_tiles(int tiles) { g_tiles = tiles == 4 || tiles == 8 ? tiles : 0; }

cudaError_t launch_gemm_fused(const DeviceWeight& w, const void* x16, int ldx, int tokens, float* y, int ldy,
                              bool accumulate, cudaStream_t stream, X16Order x_order) {
  if (tokens <= 0) return cudaSuccess;
  if (!gemm_fused_supported(w, ldx) || ldy < w.n_rows || reinterpret_cast<uintptr_t>(x16) % 16 != 0 ||
      tokens > 65535 * 4 * 8 || (x_order == X16Order::kLanes && ldx % kChunk != 0)) {
    return cudaErrorInvalidValue;
  }
  g_launches.fetch_add(1, std::memory_order_relaxed);
  const __half* x = static_cast<const __half*>(x16);
  const bool x_lanes = x_order == X16Order::kLanes;
  if (x_lanes) g_lanes_launches.fetch_add(1, std::memory_order_relaxed);
  if (tokens <= 8) return launch_tiles<1>(w, x, ldx, x_lanes, tokens, y, ldy, accumulate, stream);
  if (tokens <= 16) return launch_tiles<2>(w, x, ldx, x_lanes, tokens, y, ldy, accumulate, stream);
  // More than 32 tokens: blocks of 8 tiles unpack each chunk of the weight
  // once for 64 tokens instead of twice for two blocks of 32, where the
  // row blocks alone fill the SMs; with fewer rows the two blocks of 4 tiles
  // keep twice the SMs busy. H100, session 56 run 1, the product alone at
  // 48 / 64 tokens, 4 → 8 tiles: 7B gate/up Q4_K 175.9 → 148.8 / 200.8 →
  // 182.2 µs, ffn_down Q6_K (224 row blocks) 125.5 → 95.3 / 130.8 → 101.6;
  // end to end 7B Q4_K_M pp48 3,948 → 4,490 tok/s, pp64 4,697 → 5,012. With
  // 8 tiles everywhere 0.5B Q8_0 lost (pp64 28,690 → 25,296): its q/k/v,
  // attn_output and ffn_down have 56-72 row blocks.
  if (tokens <= 32) return launch_tiles<4>(w, x, ldx, x_lanes, tokens, y, ldy, accumulate, stream);
  const bool wide = g_tiles != 0 ? g_tiles == 8 : (w.n_rows + kRows - 1) / kRows >= device_limits().sms;
  if (wide) return launch_tiles<kMaxTiles>(w, x, ldx, x_lanes, tokens, y, ldy, accumulate, stream);
  return launch_tiles<4>(w, x, ldx, x_lanes, tokens, y, ldy, accumulate, stream);
}

}  // namespace minfer::kernels

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
// 2t + 9 of k step s are elements 4s .. 4s + 3 of its runs. No shared
// memory, no barrier in the loop: each warp streams its own bytes.
//
// A block: 16 weight rows, kWarps warps each taking every kWarps-th chunk
// of k, up to 32 tokens (4 tiles of 8); the warps' sums are added in warp
// order through shared memory (the same bits at every run). More tokens:
// blocks of the next 32 (grid y) read the weight again.
#include <algorithm>
#include <atomic>

#include "kernels/common.cuh"
#include "kernels/dequant.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels {
namespace {

constexpr int kRows = 16;      // weight rows a block
constexpr int kWarps = 4;      // warps a block, splitting k
constexpr int kChunk = 128;    // k a warp's step: 8 mma k-steps
constexpr int kMaxTiles = 4;   // token tiles of 8 a block

std::atomic<uint64_t> g_launches{0};

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
  if constexpr (T == WType::kQ4_K) return 64 * (t / 2) + 16 * (t % 2);  // one 32-byte unit: low, then high nibbles
  if constexpr (T == WType::kQ6_K) return 32 * (t / 2) + 16 * (t % 2);  // ql bytes: low nibbles, then high
  return 32 * t;                                                          // 32 consecutive elements
}
template <WType T>
__device__ __forceinline__ int run1(int t) {
  if constexpr (T == WType::kQ4_K) return run0<T>(t) + 32;
  if constexpr (T == WType::kQ6_K) return run0<T>(t) + 64;
  return 32 * t + 16;
}

// A lane's raw bytes of one row's chunk, loaded ahead of their use.
struct Raw {
  int4 a = {}, b = {};
  uint32_t s = 0;  // scales: Q8_0 d; Q6_K d and the runs' two int8 scales
};

template <WType T>
__device__ __forceinline__ void load_raw(const DeviceWeight& w, int row, int chunk, int t, Raw& r) {
  const size_t rw = static_cast<size_t>(row);
  if constexpr (T == WType::kQ8_0) {
    const uint32_t units = static_cast<uint32_t>(w.k / 32), u = static_cast<uint32_t>(4 * chunk + t);
    const int8_t* q = static_cast<const int8_t*>(w.q) + rw * w.k;
    r.a = __ldg(reinterpret_cast<const int4*>(q + split_offset(u, 0, units)));
    r.b = __ldg(reinterpret_cast<const int4*>(q + split_offset(u, 16, units)));
    r.s = __ldg(static_cast<const uint16_t*>(w.meta) + rw * units + u);
  } else if constexpr (T == WType::kQ4_K) {
    const uint32_t units = static_cast<uint32_t>(w.k / 64), u = static_cast<uint32_t>(2 * chunk + t / 2);
    const uint8_t* q = static_cast<const uint8_t*>(w.q) + rw * (w.k / 2);
    r.a = __ldg(reinterpret_cast<const int4*>(q + split_offset(u, 16 * (t % 2), units)));
    r.b = __ldg(reinterpret_cast<const int4*>(static_cast<const uint8_t*>(w.meta) + (rw * (w.k / 256) + u / 4) * 16));
  } else if constexpr (T == WType::kQ6_K) {
    const int sb = chunk / 2, n = chunk % 2, l0 = 16 * (t % 2), j = t / 2;
    const uint8_t* ql = static_cast<const uint8_t*>(w.q) + rw * (w.k / 2) + sb * 128 + n * 64;
    const uint8_t* qh = static_cast<const uint8_t*>(w.qh) + rw * (w.k / 4) + sb * 64 + n * 32;
    const int8_t* sc = reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(w.meta) + (rw * (w.k / 256) + sb) * 16) + 8 * n;
    r.a = __ldg(reinterpret_cast<const int4*>(ql + l0 + 32 * j));
    r.b = __ldg(reinterpret_cast<const int4*>(qh + l0));
    const uint32_t d = __ldg(static_cast<const uint16_t*>(w.d) + rw * (w.k / 256) + sb);
    const uint32_t s0 = static_cast<uint8_t>(__ldg(sc + (t % 2) + 2 * j));
    const uint32_t s1 = static_cast<uint8_t>(__ldg(sc + (t % 2) + 2 * (2 + j)));
    r.s = d | (s0 << 16) | (s1 << 24);
  }
}

__device__ __forceinline__ uint8_t byte_of(const int4& v, int i) {
  const int word = i / 4 == 0 ? v.x : i / 4 == 1 ? v.y : i / 4 == 2 ? v.z : v.w;
  return static_cast<uint8_t>(static_cast<uint32_t>(word) >> (8 * (i % 4)));
}

// The lane's 32 elements of one row, as 16 pairs of f16 in run order, each
// dequant.cuh's value rounded to f16 (what launch_dequantize_f16 writes).
template <WType T>
__device__ __forceinline__ void unpack(const DeviceWeight& w, int row, int chunk, int t, const Raw& r, uint32_t (&p)[16]) {
  if constexpr (T == WType::kQ8_0) {
    const float d = h2f(static_cast<uint16_t>(r.s));
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int4& v = i < 8 ? r.a : r.b;
      const int b = 2 * (i % 8);
      p[i] = pack_h2(d * static_cast<float>(static_cast<int8_t>(byte_of(v, b))),
                     d * static_cast<float>(static_cast<int8_t>(byte_of(v, b + 1))));
    }
  } else if constexpr (T == WType::kQ4_K) {
    const float d = h2f(static_cast<uint16_t>(r.b.x)), dmin = h2f(static_cast<uint16_t>(static_cast<uint32_t>(r.b.x) >> 16));
    const int quarter = (2 * chunk + t / 2) % 4;
    int sc0, m0, sc1, m1;
    scale_min_k4_pair(quarter, r.b, &sc0, &m0, &sc1, &m1);
    const float ds0 = d * static_cast<float>(sc0), dm0 = dmin * static_cast<float>(m0);
    const float ds1 = d * static_cast<float>(sc1), dm1 = dmin * static_cast<float>(m1);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint8_t b0 = byte_of(r.a, 2 * i), b1 = byte_of(r.a, 2 * i + 1);
      p[i] = pack_h2(ds0 * static_cast<float>(b0 & 0xF) - dm0, ds0 * static_cast<float>(b1 & 0xF) - dm0);
      p[8 + i] = pack_h2(ds1 * static_cast<float>(b0 >> 4) - dm1, ds1 * static_cast<float>(b1 >> 4) - dm1);
    }
  } else if constexpr (T == WType::kQ6_K) {
    const float d = h2f(static_cast<uint16_t>(r.s));
    const float d0 = d * static_cast<float>(static_cast<int8_t>(r.s >> 16));
    const float d1 = d * static_cast<float>(static_cast<int8_t>(r.s >> 24));
    const int j = t / 2;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint8_t l0 = byte_of(r.a, 2 * i), l1 = byte_of(r.a, 2 * i + 1);
      const uint8_t h0 = byte_of(r.b, 2 * i), h1 = byte_of(r.b, 2 * i + 1);
      const int q00 = ((l0 & 0xF) | (((h0 >> (2 * j)) & 3) << 4)) - 32, q01 = ((l1 & 0xF) | (((h1 >> (2 * j)) & 3) << 4)) - 32;
      const int q10 = ((l0 >> 4) | (((h0 >> (4 + 2 * j)) & 3) << 4)) - 32, q11 = ((l1 >> 4) | (((h1 >> (4 + 2 * j)) & 3) << 4)) - 32;
      p[i] = pack_h2(d0 * static_cast<float>(q00), d0 * static_cast<float>(q01));
      p[8 + i] = pack_h2(d1 * static_cast<float>(q10), d1 * static_cast<float>(q11));
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
  if constexpr (T == WType::kQ8_0 || T == WType::kQ4_K || T == WType::kQ6_K) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int ch = first + u * kWarps;
      if (ch < chunks) {
        load_raw<T>(w, ra, ch, t, gr.a[u]);
        load_raw<T>(w, rb, ch, t, gr.b[u]);
      }
    }
  }
}

template <WType T, int kUnroll, int kTiles>
__device__ __forceinline__ void multiply_group(const DeviceWeight& w, int ra, int rb, int first, int chunks, int g, int t,
                                               const __half* x, int ldx, int tokens, int tok0,
                                               const Group<kUnroll>& gr, float (&c)[kTiles][4]) {
  const int r0 = run0<T>(t), r1 = run1<T>(t);
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int ch = first + u * kWarps;
    if (ch >= chunks) break;
    uint32_t pa[16], pb[16];
    unpack<T>(w, ra, ch, t, gr.a[u], pa);
    unpack<T>(w, rb, ch, t, gr.b[u], pb);
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      const int n = tok0 + tile * 8 + g;
      uint32_t xb[16];
      if (n < tokens) {
        const __half* xr = x + static_cast<size_t>(n) * ldx + ch * kChunk;
        const int4 v0 = *reinterpret_cast<const int4*>(xr + r0), v1 = *reinterpret_cast<const int4*>(xr + r0 + 8);
        const int4 v2 = *reinterpret_cast<const int4*>(xr + r1), v3 = *reinterpret_cast<const int4*>(xr + r1 + 8);
        xb[0] = v0.x; xb[1] = v0.y; xb[2] = v0.z; xb[3] = v0.w;
        xb[4] = v1.x; xb[5] = v1.y; xb[6] = v1.z; xb[7] = v1.w;
        xb[8] = v2.x; xb[9] = v2.y; xb[10] = v2.z; xb[11] = v2.w;
        xb[12] = v3.x; xb[13] = v3.y; xb[14] = v3.z; xb[15] = v3.w;
      } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) xb[i] = 0u;
      }
#pragma unroll
      for (int s = 0; s < 8; ++s) mma_16816(c[tile], pa[2 * s], pb[2 * s], pa[2 * s + 1], pb[2 * s + 1], xb[2 * s], xb[2 * s + 1]);
    }
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
    gemm_fused_kernel(DeviceWeight w, const __half* x, int ldx, int tokens, float* y, int ldy, bool accumulate) {
  __shared__ float sums[kWarps][kTiles][4][kWarp];
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

  constexpr int kUnroll = 4;
  for (int first = warp; first < chunks; first += kWarps * kUnroll) {
    Group<kUnroll> gr;
    load_group<T, kUnroll>(w, ra, rb, first, chunks, t, gr);
    multiply_group<T, kUnroll, kTiles>(w, ra, rb, first, chunks, g, t, x, ldx, tokens, tok0, gr, c);
  }

  // c[tile]: rows g (0, 1) and g + 8 (2, 3), tokens 2t and 2t + 1 of the tile.
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
    for (int i = 0; i < 4; ++i) sums[warp][tile][i][lane] = c[tile][i];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kTiles * 4 * kWarp; e += kWarps * kWarp) {
    const int tile = e / (4 * kWarp), i = (e / kWarp) % 4, l = e % kWarp;
    const int row = row0 + l / 4 + (i >= 2 ? 8 : 0), n = tok0 + tile * 8 + 2 * (l % 4) + (i & 1);
    if (row >= w.n_rows || n >= tokens) continue;
    float v = sums[0][tile][i][l];
#pragma unroll
    for (int k = 1; k < kWarps; ++k) v += sums[k][tile][i][l];
    float* out = y + static_cast<size_t>(n) * ldy + row;
    *out = accumulate ? *out + v : v;
  }
}

template <int kTiles>
cudaError_t launch_tiles(const DeviceWeight& w, const __half* x, int ldx, int tokens, float* y, int ldy, bool accumulate,
                         cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((w.n_rows + kRows - 1) / kRows),
                  static_cast<unsigned>((tokens + kTiles * 8 - 1) / (kTiles * 8)));
  const dim3 block(kWarps * kWarp);
  auto go = [&](auto kernel) { return launch_kernel(kernel, grid, block, 0, stream, w, x, ldx, tokens, y, ldy, accumulate); };
  switch (w.type) {
    case WType::kQ8_0: return go(gemm_fused_kernel<WType::kQ8_0, kTiles>);
    case WType::kQ4_K: return go(gemm_fused_kernel<WType::kQ4_K, kTiles>);
    case WType::kQ6_K: return go(gemm_fused_kernel<WType::kQ6_K, kTiles>);
    default: return go(gemm_fused_kernel<WType::kF32, kTiles>);  // dequant8 reads w.type
  }
}

}  // namespace

bool gemm_fused_supported(const DeviceWeight& w, int ldx) {
  return w.n_rows > 0 && w.k > 0 && w.k % kChunk == 0 && ldx % 8 == 0 && ldx >= w.k;
}

uint64_t gemm_fused_launches() { return g_launches.load(std::memory_order_relaxed); }

cudaError_t launch_gemm_fused(const DeviceWeight& w, const void* x16, int ldx, int tokens, float* y, int ldy,
                              bool accumulate, cudaStream_t stream) {
  if (tokens <= 0) return cudaSuccess;
  if (!gemm_fused_supported(w, ldx) || ldy < w.n_rows || reinterpret_cast<uintptr_t>(x16) % 16 != 0 ||
      tokens > 65535 * kMaxTiles * 8) {
    return cudaErrorInvalidValue;
  }
  g_launches.fetch_add(1, std::memory_order_relaxed);
  const __half* x = static_cast<const __half*>(x16);
  if (tokens <= 8) return launch_tiles<1>(w, x, ldx, tokens, y, ldy, accumulate, stream);
  if (tokens <= 16) return launch_tiles<2>(w, x, ldx, tokens, y, ldy, accumulate, stream);
  return launch_tiles<kMaxTiles>(w, x, ldx, tokens, y, ldy, accumulate, stream);
}

}  // namespace minfer::kernels

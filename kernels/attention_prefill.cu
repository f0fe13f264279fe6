// Prefill attention, flash-attention style (FlashAttention-2 layout):
// a block takes 64 queries of one head (16 per warp), streams the sequence's
// K/V in tiles of 64 cells through padded shared memory, computes S = QKᵀ and
// O += PV with mma.sync m16n8k16 (f16 in, f32 accumulate) and keeps an online
// softmax per query row. Causal masking compares the cells' stored positions
// with the queries' positions (device data); tiles that start past the
// block's last query position are skipped — this relies on the sequence's
// cells being listed in increasing position order, as the runner lists them.
// Instantiated for head_dim 64 and 128.
#include <cuda_fp16.h>

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels {
namespace {

constexpr int kTileQ = 64;   // queries per block
constexpr int kTileK = 64;   // cells per K/V tile
constexpr int kWarps = 4;    // 16 query rows each
constexpr int kPad = 8;      // halves of padding per smem row: breaks bank conflicts of the column reads

__device__ __forceinline__ uint32_t pack_half2(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// The f16 copy of out's values i and i + 1 (i even: one 8-value piece of
// X16Order::kLanes holds both).
__device__ __forceinline__ void store_f16_pair(const AttentionArgs& a, int64_t i, float v0, float v1) {
  *reinterpret_cast<uint32_t*>(static_cast<__half*>(a.out_f16) + x16_index(i, a.out_f16_order)) = pack_half2(v0, v1);
}

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t lds32(const __half* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Copies `rows` rows of `hd` values into shared f16 rows of stride hd + kPad.
// Rows past `valid` are zero.
template <int HD>
__device__ __forceinline__ void load_tile(__half* dst, const void* src, bool src_f16, const int32_t* cells, int valid,
                                          size_t row_stride, size_t col_offset) {
  constexpr int kVec = 8;  // halves per 16-byte store
  for (int i = threadIdx.x; i < kTileK * (HD / kVec); i += blockDim.x) {
    const int r = i / (HD / kVec), c = (i % (HD / kVec)) * kVec;
    __half* out = dst + r * (HD + kPad) + c;
    if (r >= valid) {
      *reinterpret_cast<int4*>(out) = make_int4(0, 0, 0, 0);
      continue;
    }
    const size_t off = static_cast<size_t>(cells[r]) * row_stride + col_offset + c;
    if (src_f16) {
      *reinterpret_cast<int4*>(out) = *reinterpret_cast<const int4*>(static_cast<const __half*>(src) + off);
    } else {
      const float4 a = *reinterpret_cast<const float4*>(static_cast<const float*>(src) + off);
      const float4 b = *reinterpret_cast<const float4*>(static_cast<const float*>(src) + off + 4);
      uint4 v;
      v.x = pack_half2(a.x, a.y);
      v.y = pack_half2(a.z, a.w);
      v.z = pack_half2(b.x, b.y);
      v.w = pack_half2(b.z, b.w);
      *reinterpret_cast<uint4*>(out) = v;
    }
  }
}

template <int HD>
__global__ void __launch_bounds__(kWarps * kWarp) attention_prefill_kernel(AttentionArgs a) {
  pdl_begin();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int kStride = HD + kPad;
  __half* sq = reinterpret_cast<__half*>(smem_raw);  // [kTileQ][kStride]
  __half* sk = sq + kTileQ * kStride;                 // [kTileK][kStride]
  __half* sv = sk + kTileK * kStride;                 // [kTileK][kStride]
  __shared__ int32_t key_pos[kTileK];
  __shared__ int32_t key_cell[kTileK];

  const int h = blockIdx.y, q0 = blockIdx.x * kTileQ;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = a.n_heads / a.n_kv_heads, kvh = h / group;
  const int q_dim = a.n_heads * HD, kv_dim = a.n_kv_heads * HD;
  const int n_seq = *a.n_seq;
  const float scale = rsqrtf(static_cast<float>(HD));

  // Q tile → f16 shared.
  for (int i = threadIdx.x; i < kTileQ * HD; i += blockDim.x) {
    const int r = i / HD, c = i % HD;
    const int t = q0 + r;
    sq[r * kStride + c] = __float2half_rn(t < a.n_tokens ? a.q[static_cast<size_t>(t) * q_dim + h * HD + c] : 0.0f);
  }
  // Positions of this thread's two query rows (C fragment rows g and g + 8).
  const int g = lane / 4, tq = lane % 4;
  const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;
  const int pos0 = row0 < a.n_tokens ? a.q_pos[row0] : -1;
  const int pos1 = row1 < a.n_tokens ? a.q_pos[row1] : -1;
  int max_pos = -1;
  for (int t = q0; t < min(q0 + kTileQ, a.n_tokens); ++t) max_pos = max(max_pos, a.q_pos[t]);
  __syncthreads();

  // Q fragments for the whole head dimension stay in registers.
  uint32_t qf[HD / 16][4];
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    const __half* base = sq + (warp * 16 + g) * kStride + kk * 16 + 2 * tq;
    qf[kk][0] = lds32(base);
    qf[kk][1] = lds32(base + 8 * kStride);
    qf[kk][2] = lds32(base + 8);
    qf[kk][3] = lds32(base + 8 * kStride + 8);
  }

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  for (int j0 = 0; j0 < n_seq; j0 += kTileK) {
    const int valid = min(kTileK, n_seq - j0);
    __syncthreads();  // the previous tile is no longer read
    if (threadIdx.x < kTileK) {
      const int j = j0 + threadIdx.x;
      const int cell = j < n_seq ? a.seq_cells[j] : 0;
      key_cell[threadIdx.x] = cell;
      key_pos[threadIdx.x] = j < n_seq ? a.cell_pos[cell] : 0x7fffffff;
    }
    __syncthreads();
    if (key_pos[0] > max_pos) break;  // cells are in position order: the rest is in the future
    load_tile<HD>(sk, a.k_cache, a.cache_f16, key_cell, valid, kv_dim, static_cast<size_t>(kvh) * HD);
    load_tile<HD>(sv, a.v_cache, a.cache_f16, key_cell, valid, kv_dim, static_cast<size_t>(kvh) * HD);
    __syncthreads();

    // S = Q Kᵀ for this warp's 16 rows × 64 cells.
    float s[kTileK / 8][4];
#pragma unroll
    for (int n = 0; n < kTileK / 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        const __half* kb = sk + (n * 8 + g) * kStride + kk * 16 + 2 * tq;
        mma_16816(s[n], qf[kk], lds32(kb), lds32(kb + 8));
      }
    }
    // Mask, scale, online softmax.
    float tile_m0 = -INFINITY, tile_m1 = -INFINITY;
#pragma unroll
    for (int n = 0; n < kTileK / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = n * 8 + 2 * tq + e;
        const int kp = key_pos[col];
        s[n][e] = (col < valid && kp <= pos0) ? s[n][e] * scale : -INFINITY;
        s[n][2 + e] = (col < valid && kp <= pos1) ? s[n][2 + e] * scale : -INFINITY;
        tile_m0 = fmaxf(tile_m0, s[n][e]);
        tile_m1 = fmaxf(tile_m1, s[n][2 + e]);
      }
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      tile_m0 = fmaxf(tile_m0, __shfl_xor_sync(0xffffffffu, tile_m0, off));
      tile_m1 = fmaxf(tile_m1, __shfl_xor_sync(0xffffffffu, tile_m1, off));
    }
    const float new_m0 = fmaxf(m0, tile_m0), new_m1 = fmaxf(m1, tile_m1);
    // Rows with nothing visible yet keep m = -inf; their factors are 0.
    const float alpha0 = new_m0 == -INFINITY ? 1.0f : expf(m0 - new_m0);
    const float alpha1 = new_m1 == -INFINITY ? 1.0f : expf(m1 - new_m1);
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int n = 0; n < kTileK / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[n][e] = new_m0 == -INFINITY ? 0.0f : expf(s[n][e] - new_m0);
        s[n][2 + e] = new_m1 == -INFINITY ? 0.0f : expf(s[n][2 + e] - new_m1);
        sum0 += s[n][e];
        sum1 += s[n][2 + e];
      }
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      sum0 += __shfl_xor_sync(0xffffffffu, sum0, off);
      sum1 += __shfl_xor_sync(0xffffffffu, sum1, off);
    }
    l0 = l0 * alpha0 + sum0;
    l1 = l1 * alpha1 + sum1;
    m0 = new_m0;
    m1 = new_m1;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      o[n][0] *= alpha0;
      o[n][1] *= alpha0;
      o[n][2] *= alpha1;
      o[n][3] *= alpha1;
    }
    // O += P V: the S accumulators of n-tiles 2i, 2i+1 are the A fragment of
    // k-step i (FlashAttention-2's register reuse).
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = pack_half2(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = pack_half2(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      const int k0 = kk * 16 + 2 * tq;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) {
        // B fragment: V[k][d] for k = k0, k0+1 (and +8), d = n*8 + g.
        const int d = n * 8 + g;
        const __half* v0 = sv + k0 * kStride + d;
        __half2 b0 = __halves2half2(v0[0], v0[kStride]);
        __half2 b1 = __halves2half2(v0[8 * kStride], v0[9 * kStride]);
        mma_16816(o[n], pa, *reinterpret_cast<uint32_t*>(&b0), *reinterpret_cast<uint32_t*>(&b1));
      }
    }
  }

  // Normalise and store this thread's elements: rows g, g + 8; columns n*8 + 2tq + {0,1}.
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) {
    const int col = h * HD + n * 8 + 2 * tq;
    if (row0 < a.n_tokens) {
      float* out = a.out + static_cast<size_t>(row0) * q_dim + col;
      out[0] = o[n][0] * inv0;
      out[1] = o[n][1] * inv0;
      if (a.out_f16) store_f16_pair(a, static_cast<int64_t>(row0) * q_dim + col, out[0], out[1]);
    }
    if (row1 < a.n_tokens) {
      float* out = a.out + static_cast<size_t>(row1) * q_dim + col;
      out[0] = o[n][2] * inv1;
      out[1] = o[n][3] * inv1;
      if (a.out_f16) store_f16_pair(a, static_cast<int64_t>(row1) * q_dim + col, out[0], out[1]);
    }
  }
}

template <int HD>
cudaError_t launch_hd(const AttentionArgs& a, cudaStream_t stream) {
  const size_t smem = sizeof(__half) * static_cast<size_t>(kTileQ + 2 * kTileK) * (HD + kPad);
  static const cudaError_t attr =
      cudaFuncSetAttribute(attention_prefill_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (attr != cudaSuccess) return attr;
  dim3 grid((a.n_tokens + kTileQ - 1) / kTileQ, a.n_heads);
  return launch_kernel(attention_prefill_kernel<HD>, grid, dim3(kWarps * kWarp), smem, stream, a);
}

}  // namespace

bool attention_prefill_supported(int head_dim) { return head_dim == 64 || head_dim == 128; }

cudaError_t launch_attention_prefill(const AttentionArgs& a, cudaStream_t stream) {
  if (a.n_tokens < 1 || a.n_kv_heads < 1 || a.n_heads % a.n_kv_heads != 0) return cudaErrorInvalidValue;
  if (a.out_f16 != nullptr && a.out_f16_order == X16Order::kLanes && a.n_heads * a.head_dim % 128 != 0) return cudaErrorInvalidValue;
  if (a.head_dim == 64) return launch_hd<64>(a, stream);
  if (a.head_dim == 128) return launch_hd<128>(a, stream);
  return cudaErrorInvalidValue;
}

}  // namespace minfer::kernels

// Decode attention, split-K ("flash-decoding"). The sequence's cells are cut
// into chunks of one block's width; block (KV head, chunk) scores its chunk
// for every query head of the GQA group (each K/V row is read once for the
// group), keeps the chunk's softmax max and sum, and writes an unnormalised
// partial output. A second launch combines the chunks per head. The cell
// count is read from device memory, so the grid (sized for the largest
// context) stays fixed across steps and a captured graph can be replayed.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels {
namespace {

constexpr int kMaxGroup = 16;     // query heads per KV head
constexpr int kMaxHeadDim = 256;

int block_threads(int head_dim) { return head_dim < 64 ? 64 : (head_dim + 31) / 32 * 32; }

__device__ __forceinline__ float load_kv(const void* cache, bool f16, size_t i) {
  return f16 ? __half2float(static_cast<const __half*>(cache)[i]) : static_cast<const float*>(cache)[i];
}

// partials: [split][head][head_dim + 2]: the output sum, then max and sum of exp.
//
// Block (KV head, split) takes kSplitCells cells; its 4 warps take every 4th
// cell. Lanes split the head dimension (lane holds dims lane + 32 i), so each
// K and V row is read coalesced, once for the whole query group; a cell's
// scores are warp sums. kDims = ceil(head_dim / 32).
constexpr int kSplitWarps = 4;
constexpr int kSplitCells = 64;
// Cells a warp loads before it computes: their K (or V) rows are in flight
// together, so a warp waits for memory once per batch, not once per cell.
constexpr int kCellBatch = 4;

template <int kDims>
__global__ void __launch_bounds__(kSplitWarps * kWarp) attention_split_kernel(AttentionArgs a) {
  pdl_begin();
  extern __shared__ float smem[];
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, kvh = blockIdx.x, split = blockIdx.y;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int n_seq = *a.n_seq;
  const int j0 = split * kSplitCells;
  if (j0 >= n_seq) return;  // past the sequence: the combine reads only used chunks
  const int n_here = min(kSplitCells, n_seq - j0);
  float* p = smem;                         // [group][kSplitCells] scores, then weights
  float* stats = p + group * kSplitCells;  // [group][2]
  float* red = stats + 2 * group;          // [kSplitWarps][group][hd] partial outputs
  const int kv_dim = a.n_kv_heads * hd;
  const float scale = rsqrtf(static_cast<float>(hd));
  const int qpos = a.q_pos[0];

  // This lane's query values for the group, scaled once.
  float q[kMaxGroup][kDims];
  const float* qbase = a.q + static_cast<size_t>(kvh) * group * hd;
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g)
#pragma unroll
    for (int i = 0; i < kDims; ++i) {
      const int d = lane + 32 * i;
      q[g][i] = (g < group && d < hd) ? qbase[g * hd + d] * scale : 0.0f;
    }

  // Scores: warp w takes batches of kCellBatch cells, w-th of every 4.
  for (int jb = warp * kCellBatch; jb < n_here; jb += kSplitWarps * kCellBatch) {
    float k[kCellBatch][kDims];
    bool visible[kCellBatch];
#pragma unroll
    for (int c = 0; c < kCellBatch; ++c) {
      const int jj = jb + c;
      const int cell = jj < n_here ? a.seq_cells[j0 + jj] : 0;
      visible[c] = jj < n_here && a.cell_pos[cell] <= qpos;
      const size_t base = static_cast<size_t>(cell) * kv_dim + static_cast<size_t>(kvh) * hd;
#pragma unroll
      for (int i = 0; i < kDims; ++i) {
        const int d = lane + 32 * i;
        k[c][i] = (visible[c] && d < hd) ? load_kv(a.k_cache, a.cache_f16, base + d) : 0.0f;
      }
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= group) break;
#pragma unroll
      for (int c = 0; c < kCellBatch; ++c) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < kDims; ++i) s += q[g][i] * k[c][i];
        s = warp_sum(s);
        if (lane == 0 && jb + c < n_here) p[g * kSplitCells + jb + c] = visible[c] ? s : -INFINITY;
      }
    }
  }
  __syncthreads();

  // Softmax statistics of the chunk, one warp per query head.
  for (int g = warp; g < group; g += kSplitWarps) {
    float m = -INFINITY;
    for (int i = lane; i < n_here; i += kWarp) m = fmaxf(m, p[g * kSplitCells + i]);
    m = warp_max(m);
    float l = 0.0f;
    for (int i = lane; i < n_here; i += kWarp) {
      const float e = m == -INFINITY ? 0.0f : expf(p[g * kSplitCells + i] - m);
      p[g * kSplitCells + i] = e;
      l += e;
    }
    l = warp_sum(l);
    if (lane == 0) {
      stats[2 * g] = m;
      stats[2 * g + 1] = l;
    }
  }
  __syncthreads();

  // Weighted V sum: the same cell split as the scores, lanes over dims.
  float acc[kMaxGroup][kDims];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g)
#pragma unroll
    for (int i = 0; i < kDims; ++i) acc[g][i] = 0.0f;
  for (int jb = warp * kCellBatch; jb < n_here; jb += kSplitWarps * kCellBatch) {
    float v[kCellBatch][kDims];
#pragma unroll
    for (int c = 0; c < kCellBatch; ++c) {
      const int jj = jb + c;
      const int cell = jj < n_here ? a.seq_cells[j0 + jj] : 0;
      const size_t base = static_cast<size_t>(cell) * kv_dim + static_cast<size_t>(kvh) * hd;
#pragma unroll
      for (int i = 0; i < kDims; ++i) {
        const int d = lane + 32 * i;
        v[c][i] = (jj < n_here && d < hd) ? load_kv(a.v_cache, a.cache_f16, base + d) : 0.0f;
      }
    }
#pragma unroll
    for (int c = 0; c < kCellBatch; ++c) {
      if (jb + c >= n_here) break;
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= group) break;
        const float w = p[g * kSplitCells + jb + c];
#pragma unroll
        for (int i = 0; i < kDims; ++i) acc[g][i] += w * v[c][i];
      }
    }
  }
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= group) break;
#pragma unroll
    for (int i = 0; i < kDims; ++i) {
      const int d = lane + 32 * i;
      if (d < hd) red[(warp * group + g) * hd + d] = acc[g][i];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < group * hd; idx += blockDim.x) {
    const int g = idx / hd, d = idx % hd;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kSplitWarps; ++w) sum += red[(w * group + g) * hd + d];
    const int h = kvh * group + g;
    a.partials[(static_cast<size_t>(split) * a.n_heads + h) * (hd + 2) + d] = sum;
  }
  if (threadIdx.x < group) {
    const int h = kvh * group + threadIdx.x;
    float* st = a.partials + (static_cast<size_t>(split) * a.n_heads + h) * (hd + 2) + hd;
    st[0] = stats[2 * threadIdx.x];
    st[1] = stats[2 * threadIdx.x + 1];
  }
}

__global__ void attention_combine_kernel(AttentionArgs a, int chunk, bool quantize) {
  pdl_begin();
  const int h = blockIdx.x, hd = a.head_dim;
  const int n_splits = (*a.n_seq + chunk - 1) / chunk;
  float m = -INFINITY;
  for (int s = 0; s < n_splits; ++s) {
    const float* st = a.partials + (static_cast<size_t>(s) * a.n_heads + h) * (hd + 2) + hd;
    if (st[1] > 0.0f) m = fmaxf(m, st[0]);
  }
  float denom = 0.0f;
  for (int s = 0; s < n_splits; ++s) {
    const float* st = a.partials + (static_cast<size_t>(s) * a.n_heads + h) * (hd + 2) + hd;
    if (st[1] > 0.0f) denom += expf(st[0] - m) * st[1];
  }
  const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < n_splits; ++s) {
      const float* part = a.partials + (static_cast<size_t>(s) * a.n_heads + h) * (hd + 2);
      if (part[hd + 1] > 0.0f) acc += expf(part[hd] - m) * part[d];
    }
    const float v = acc * inv;
    a.out[static_cast<size_t>(h) * hd + d] = v;
    if (quantize) {
      // hd % 32 == 0 and blockDim == hd: each warp holds one Q8 block.
      quantize_block_q8(v, d % kWarp, (h * hd + d) / 32, a.out_q.q, static_cast<float2*>(a.out_q.ds));
    }
  }
}

// Generic attention: block (KV head, token) walks the history in chunks of
// blockDim cells with an online softmax, for the whole query group.
__global__ void attention_generic_kernel(AttentionArgs a) {
  pdl_begin();
  extern __shared__ float smem[];
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, kvh = blockIdx.x, tok = blockIdx.y;
  const int chunk = blockDim.x, t = threadIdx.x;
  const int n_seq = *a.n_seq;
  const int kv_dim = a.n_kv_heads * hd;
  const float scale = rsqrtf(static_cast<float>(hd));
  float* q = smem;              // [group][hd]
  float* p = q + group * hd;    // [group][chunk]
  float* run = p + group * chunk;  // [group][2]: running max, running sum
  float* corr = run + 2 * group;   // [group]: rescale factor of this chunk
  const float* qrow = a.q + static_cast<size_t>(tok) * a.n_heads * hd + static_cast<size_t>(kvh) * group * hd;
  for (int i = t; i < group * hd; i += blockDim.x) q[i] = qrow[i];
  if (t < group) {
    run[2 * t] = -INFINITY;
    run[2 * t + 1] = 0.0f;
  }
  const int qpos = a.q_pos[tok];
  float acc[kMaxGroup][(kMaxHeadDim + 63) / 64];  // dims t, t + chunk, ... (chunk >= 64)
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g)
#pragma unroll
    for (int i = 0; i < (kMaxHeadDim + 63) / 64; ++i) acc[g][i] = 0.0f;
  __syncthreads();
  const int lane = t % kWarp, warp = t / kWarp, n_warps = blockDim.x / kWarp;
  for (int j0 = 0; j0 < n_seq; j0 += chunk) {
    const int j = j0 + t;
    bool valid = false;
    int cell = 0;
    if (j < n_seq) {
      cell = a.seq_cells[j];
      valid = a.cell_pos[cell] <= qpos;
    }
    float s[kMaxGroup];
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) s[g] = 0.0f;
    if (valid) {
      const size_t base = static_cast<size_t>(cell) * kv_dim + static_cast<size_t>(kvh) * hd;
      for (int d = 0; d < hd; ++d) {
        const float kd = load_kv(a.k_cache, a.cache_f16, base + d);
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g)
          if (g < group) s[g] += q[g * hd + d] * kd;
      }
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g)
      if (g < group) p[g * chunk + t] = valid ? s[g] * scale : -INFINITY;
    __syncthreads();
    for (int g = warp; g < group; g += n_warps) {
      float m = -INFINITY;
      for (int i = lane; i < chunk; i += kWarp) m = fmaxf(m, p[g * chunk + i]);
      m = warp_max(m);
      const float m_old = run[2 * g];
      const float m_new = fmaxf(m_old, m);
      float l = 0.0f;
      for (int i = lane; i < chunk; i += kWarp) {
        const float e = m_new == -INFINITY ? 0.0f : expf(p[g * chunk + i] - m_new);
        p[g * chunk + i] = e;
        l += e;
      }
      l = warp_sum(l);
      if (lane == 0) {
        const float c = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
        corr[g] = c;
        run[2 * g] = m_new;
        run[2 * g + 1] = run[2 * g + 1] * c + l;
      }
    }
    __syncthreads();
    const int n_here = min(chunk, n_seq - j0);
#pragma unroll
    for (int i = 0; i < (kMaxHeadDim + 63) / 64; ++i) {
      const int d = t + i * chunk;
      if (d >= hd) break;
      float vsum[kMaxGroup];
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) vsum[g] = 0.0f;
      for (int jj = 0; jj < n_here; ++jj) {
        const int c = a.seq_cells[j0 + jj];
        const float vd = load_kv(a.v_cache, a.cache_f16, static_cast<size_t>(c) * kv_dim + static_cast<size_t>(kvh) * hd + d);
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g)
          if (g < group) vsum[g] += p[g * chunk + jj] * vd;
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g)
        if (g < group) acc[g][i] = acc[g][i] * corr[g] + vsum[g];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < (kMaxHeadDim + 63) / 64; ++i) {
    const int d = t + i * chunk;
    if (d >= hd) break;
    for (int g = 0; g < group; ++g) {
      const float l = run[2 * g + 1];
      const float v = l > 0.0f ? acc[g][i] / l : 0.0f;
      const size_t idx = static_cast<size_t>(tok) * a.n_heads * hd + static_cast<size_t>(kvh * group + g) * hd + d;
      a.out[idx] = v;
      if (a.out_f16) static_cast<__half*>(a.out_f16)[idx] = __float2half_rn(v);
    }
  }
}

}  // namespace

cudaError_t launch_attention_generic(const AttentionArgs& a, cudaStream_t stream) {
  const int group = a.n_kv_heads > 0 ? a.n_heads / a.n_kv_heads : 0;
  if (a.n_tokens < 1 || group < 1 || group > kMaxGroup || a.n_heads % a.n_kv_heads != 0 || a.head_dim < 1 ||
      a.head_dim > kMaxHeadDim) {
    return cudaErrorInvalidValue;
  }
  constexpr int chunk = 64;  // cells per pass and threads; each thread keeps dims t, t + 64, ... (≤ 4)
  const size_t smem = sizeof(float) * (static_cast<size_t>(group) * a.head_dim + static_cast<size_t>(group) * chunk + 3 * group);
  cudaError_t e = launch_kernel(attention_generic_kernel, dim3(a.n_kv_heads, a.n_tokens), dim3(chunk), smem, stream, a);
  if (e != cudaSuccess || a.out_q.q == nullptr) return e;
  return launch_quantize_q8(a.out, a.n_tokens, a.n_heads * a.head_dim, a.out_q, stream);
}

size_t attention_partials_floats(int n_heads, int head_dim, int max_cells) {
  const size_t n_splits = static_cast<size_t>((max_cells + kSplitCells - 1) / kSplitCells);
  return n_splits * static_cast<size_t>(n_heads) * static_cast<size_t>(head_dim + 2);
}

cudaError_t launch_attention_decode(const AttentionArgs& a, cudaStream_t stream) {
  const int group = a.n_kv_heads > 0 ? a.n_heads / a.n_kv_heads : 0;
  if (a.n_tokens != 1 || group < 1 || group > kMaxGroup || a.n_heads % a.n_kv_heads != 0 || a.head_dim < 1 ||
      a.head_dim > kMaxHeadDim || a.max_cells < 1) {
    return cudaErrorInvalidValue;
  }
  const int chunk = kSplitCells;
  const int n_splits = (a.max_cells + chunk - 1) / chunk;
  const size_t smem = sizeof(float) * (static_cast<size_t>(group) * kSplitCells + 2 * group +
                                       static_cast<size_t>(kSplitWarps) * group * a.head_dim);
  const dim3 grid(a.n_kv_heads, n_splits);
  const int dims = (a.head_dim + kWarp - 1) / kWarp;
  auto launch = [&](auto kernel) {
    if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    return launch_kernel(kernel, grid, dim3(kSplitWarps * kWarp), smem, stream, a);
  };
  cudaError_t e = dims <= 1   ? launch(attention_split_kernel<1>)
                  : dims <= 2 ? launch(attention_split_kernel<2>)
                  : dims <= 4 ? launch(attention_split_kernel<4>)
                              : launch(attention_split_kernel<8>);
  if (e != cudaSuccess) return e;
  const bool fused_q = a.out_q.q != nullptr && a.head_dim % 32 == 0;
  e = launch_kernel(attention_combine_kernel, dim3(a.n_heads), dim3(fused_q ? a.head_dim : block_threads(a.head_dim)), 0, stream, a,
                    chunk, fused_q);
  if (e != cudaSuccess || a.out_q.q == nullptr || fused_q) return e;
  return launch_quantize_q8(a.out, 1, a.n_heads * a.head_dim, a.out_q, stream);
}

}  // namespace minfer::kernels

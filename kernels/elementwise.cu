// Small element-wise kernels: SwiGLU, residual and bias adds, embedding
// gather, whole-matrix dequantization to f16, argmax, a decode step's first
// kernel (the fed token and the argmax key).
#include "kernels/common.cuh"
#include "kernels/dequant.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels {
namespace {

__global__ void swiglu_kernel(const float* g, const float* u, int64_t n, float* y, __half* y16, X16Order y16_order) {
  pdl_begin();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = silu(g[i]) * u[i];
    y[i] = v;
    if (y16) y16[x16_index(i, y16_order)] = __float2half_rn(v);
  }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  pdl_begin();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += x[i];
  }
}

__global__ void add_bias_kernel(float* y, const float* b, int rows, int n) {
  pdl_begin();
  const int64_t total = static_cast<int64_t>(rows) * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += b[i % n];
  }
}

__global__ void step_start_kernel(int32_t* token, const int32_t* feed, unsigned long long* key, const int32_t* argmax) {
  pdl_begin();
  const int32_t mode = *feed;
  if (mode == 1) *token = argmax_unpack(*key);
  if (mode == 2) *token = argmax[0];
  *key = 0;
}

__global__ void embed_kernel(DeviceWeight table, const int32_t* tokens, float* x) {
  pdl_begin();
  const int t = blockIdx.y;
  const int token = tokens[t];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < table.k; i += gridDim.x * blockDim.x) {
    x[static_cast<size_t>(t) * table.k + i] = dequant_element(table, token, i);
  }
}

__global__ void dequantize_f16_kernel(DeviceWeight w, __half* out) {
  pdl_begin();
  const int64_t total = static_cast<int64_t>(w.n_rows) * w.k;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total; idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int r = static_cast<int>(idx / w.k), i = static_cast<int>(idx % w.k);
    out[idx] = __float2half_rn(dequant_element(w, r, i));
  }
}

// Rows of a multiple of 8 (every model's): a thread expands 8 consecutive
// elements, which always share one quantization block, and stores 16 bytes;
// 32-bit index arithmetic (n_rows * k / 8 < 2^31). The per-element kernel
// above spent its time in 64-bit divisions and 2-byte stores.
__global__ void dequantize_f16_x8_kernel(DeviceWeight w, __half* out, int chunks) {
  pdl_begin();
  const int per_row = w.k / 8;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += gridDim.x * blockDim.x) {
    const int r = c / per_row, i0 = (c - r * per_row) * 8;
    float f[8];
    dequant8(w, r, i0, f);
    __align__(16) __half v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = __float2half_rn(f[j]);
    *reinterpret_cast<int4*>(out + static_cast<size_t>(c) * 8) = *reinterpret_cast<const int4*>(v);
  }
}

// One block per row; ties go to the lowest index (like the CPU reference).
__global__ void argmax_kernel(const float* x, int n, int32_t* out) {
  pdl_begin();
  __shared__ float best_v[32];
  __shared__ int best_i[32];
  const float* row = x + static_cast<size_t>(blockIdx.x) * n;
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = row[i];
    if (v > bv) {  // strided: the first hit per thread has the lowest index of equal values
      bv = v;
      bi = i;
    }
  }
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
  if (lane == 0) {
    best_v[warp] = bv;
    best_i[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x) / kWarp; ++w) {
      if (best_v[w] > bv || (best_v[w] == bv && best_i[w] < bi)) {
        bv = best_v[w];
        bi = best_i[w];
      }
    }
    // All NaN or -inf rows: index 0, as the reference's max_element gives.
    out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
  }
}

}  // namespace

cudaError_t launch_swiglu(const float* g, const float* u, int64_t n, float* y, void* y_f16, Q8Rows hq, int row_n,
                          cudaStream_t stream, X16Order y_f16_order) {
  if (n <= 0) return cudaSuccess;
  if (y_f16 == nullptr) y_f16_order = X16Order::kNatural;
  if (y_f16_order == X16Order::kLanes && (row_n <= 0 || row_n % 128 != 0 || n % row_n != 0)) return cudaErrorInvalidValue;
  cudaError_t e = launch_kernel(swiglu_kernel, dim3(grid_for(n, 256)), dim3(256), 0, stream, g, u, n, y, static_cast<__half*>(y_f16),
                                y_f16_order);
  if (e != cudaSuccess || hq.q == nullptr) return e;
  return launch_quantize_q8(y, static_cast<int>(n / row_n), row_n, hq, stream);
}

cudaError_t launch_add(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return launch_kernel(add_kernel, dim3(grid_for(n, 256)), dim3(256), 0, stream, y, x, n);
}

cudaError_t launch_add_bias(float* y, const float* b, int rows, int n, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  return launch_kernel(add_bias_kernel, dim3(grid_for(static_cast<int64_t>(rows) * n, 256)), dim3(256), 0, stream, y, b, rows, n);
}

cudaError_t launch_argmax(const float* x, int rows, int n, int32_t* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  return launch_kernel(argmax_kernel, dim3(rows), dim3(1024), 0, stream, x, n, out);
}

cudaError_t launch_step_start(int32_t* token, const int32_t* feed, unsigned long long* key, const int32_t* argmax,
                              cudaStream_t stream) {
  return launch_kernel(step_start_kernel, dim3(1), dim3(1), 0, stream, token, feed, key, argmax);
}

cudaError_t launch_embed(const DeviceWeight& table, const int32_t* tokens, int n_tokens, float* x, cudaStream_t stream) {
  if (n_tokens <= 0) return cudaSuccess;
  dim3 grid((table.k + 255) / 256, n_tokens);
  return launch_kernel(embed_kernel, grid, dim3(256), 0, stream, table, tokens, x);
}

cudaError_t launch_dequantize_f16(const DeviceWeight& w, void* out, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(w.n_rows) * w.k;
  if (total <= 0) return cudaSuccess;
  if (w.k % 8 == 0 && total / 8 < (int64_t{1} << 31) && reinterpret_cast<uintptr_t>(out) % 16 == 0) {
    const int chunks = static_cast<int>(total / 8);
    return launch_kernel(dequantize_f16_x8_kernel, dim3(grid_for(chunks, 256)), dim3(256), 0, stream, w, static_cast<__half*>(out),
                         chunks);
  }
  return launch_kernel(dequantize_f16_kernel, dim3(grid_for(total, 256)), dim3(256), 0, stream, w, static_cast<__half*>(out));
}

}  // namespace minfer::kernels

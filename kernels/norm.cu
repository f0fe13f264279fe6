// RMSNorm and Q8 activation quantization, one block per row. The sum of
// squares has row_sum_squares's order (common.cuh) on every path, so this
// kernel, the norm-fused matvec prologue (the same rms_norm_quads) and the
// chain norm-then-quantize give the same bits.
#include "kernels/common.cuh"
#include "kernels/norm.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels {
namespace {

constexpr int kThreads = 256;

// The norm kernel: one block of 16 warps a row. Rows whose width is a
// multiple of 32 (every model's) up to kQuadMaxWidth take rms_norm_quads
// (norm.cuh), the matvec prologue's code; others the generic loop.
constexpr int kNormWarps = 16;
constexpr int kQuadMaxWidth = kSumPass * 32;

__device__ __forceinline__ void norm_store(float v, size_t i, float* y32, __half* y16) {
  if (y32) y32[i] = v;
  if (y16) y16[i] = __float2half_rn(v);
}

__global__ void __launch_bounds__(kNormWarps * kWarp) rms_norm_kernel(const float* x, const float* w, int n, float eps,
                                                                      float* y32, __half* y16, int8_t* q, float2* ds) {
  __shared__ float scratch[kSumPass + 1];
  const size_t row = blockIdx.x;
  const float* xr = x + row * n;
  if (n % 32 == 0 && n <= kQuadMaxWidth) {
    norm_quads_prefetch_weights(w, n);  // constant: before the wait
    pdl_begin();
    rms_norm_quads(xr, w, n, eps, scratch, y32 ? y32 + row * n : nullptr, y16 ? y16 + row * n : nullptr,
                   q ? q + row * n : nullptr, q ? ds + row * (n / 32) : nullptr);
    return;
  }
  pdl_begin();
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int nb = (n + kWarp - 1) / kWarp;
  const float scale = rsqrtf(row_sum_squares(xr, n, scratch) / static_cast<float>(n) + eps);
  for (int b = warp; b < nb; b += kNormWarps) {
    const int i = b * kWarp + lane;
    const float v = i < n ? xr[i] * scale * w[i] : 0.0f;
    if (i < n) norm_store(v, row * n + i, y32, y16);
    if (q != nullptr) quantize_block_q8(v, lane, b, q + row * n, ds + row * (n / 32));
  }
}

// The deferred-scale norm of one row (norm.cuh): a quad a 32-element block,
// no reduction over the row, so as many blocks as the row needs.
constexpr int kDeferThreads = 128;
__global__ void __launch_bounds__(kDeferThreads) deferred_norm_kernel(const float* x, const float* w, int n, int8_t* q,
                                                                      float2* ds, float* sq) {
  const int t = threadIdx.x % 4, b = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / 4);
  const bool here = b < n / 32;
  float xv[8], wv[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) wv[j] = here ? w[b * 32 + t + 4 * j] : 0.0f;  // constant: before the wait
  pdl_begin();
#pragma unroll
  for (int j = 0; j < 8; ++j) xv[j] = here ? x[b * 32 + t + 4 * j] : 0.0f;
  deferred_norm_quad(xv, wv, here, b, t, q, ds, sq);
}

__global__ void __launch_bounds__(kThreads) quantize_kernel(const float* x, int n, int8_t* q, float2* ds) {
  pdl_begin();
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const float* xr = x + static_cast<size_t>(blockIdx.x) * n;
  for (int blk = warp; blk < n / 32; blk += blockDim.x / kWarp) {
    quantize_block_q8(xr[blk * 32 + lane], lane, blk, q + static_cast<size_t>(blockIdx.x) * n,
                      ds + static_cast<size_t>(blockIdx.x) * (n / 32));
  }
}

__global__ void to_f16_kernel(const float* x, __half* y, int64_t n) {
  pdl_begin();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __float2half_rn(x[i]);
  }
}

int grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);
}

}  // namespace

cudaError_t launch_rms_norm(const float* x, const float* w, int rows, int n, float eps, float* y_f32, void* y_f16,
                            Q8Rows yq, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (yq.q != nullptr && n % 32 != 0) return cudaErrorInvalidValue;
  return launch_kernel(rms_norm_kernel, dim3(rows), dim3(kNormWarps * kWarp), 0, stream, x, w, n, eps, y_f32, static_cast<__half*>(y_f16),
                       yq.q, static_cast<float2*>(yq.ds));
}

cudaError_t launch_rms_norm_deferred(const float* x, const float* w, int n, Q8Rows yq, float* sq, cudaStream_t stream) {
  if (n <= 0 || n % 32 != 0 || yq.q == nullptr || sq == nullptr) return cudaErrorInvalidValue;
  const int quads = kDeferThreads / 4;
  return launch_kernel(deferred_norm_kernel, dim3((n / 32 + quads - 1) / quads), dim3(kDeferThreads), 0, stream, x, w, n, yq.q,
                       static_cast<float2*>(yq.ds), sq);
}

cudaError_t launch_quantize_q8(const float* x, int rows, int n, Q8Rows yq, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (n % 32 != 0) return cudaErrorInvalidValue;
  return launch_kernel(quantize_kernel, dim3(rows), dim3(kThreads), 0, stream, x, n, yq.q, static_cast<float2*>(yq.ds));
}

cudaError_t launch_to_f16(const float* x, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return launch_kernel(to_f16_kernel, dim3(grid_for(n, 256)), dim3(256), 0, stream, x, static_cast<__half*>(y), n);
}

}  // namespace minfer::kernels

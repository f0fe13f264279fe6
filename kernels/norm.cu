// RMSNorm and Q8 activation quantization, one block per row. The sum of
// squares is row_sum_squares (one warp, fixed order), so this kernel, the
// norm-fused matvec prologue and the chain norm-then-quantize give the same bits.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const float* x, const float* w, int n, float eps,
                                                            float* y32, __half* y16, int8_t* q, float2* ds) {
  pdl_begin();
  __shared__ float total;
  const float* xr = x + static_cast<size_t>(blockIdx.x) * n;
  if (threadIdx.x < kWarp) {
    const float ss = row_sum_squares(xr, n, static_cast<int>(threadIdx.x));
    if (threadIdx.x == 0) total = ss;
  }
  __syncthreads();
  const float scale = rsqrtf(total / static_cast<float>(n) + eps);
  if (q != nullptr) {
    // Each warp quantizes whole 32-element blocks.
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    for (int blk = warp; blk < n / 32; blk += blockDim.x / kWarp) {
      const int i = blk * 32 + lane;
      const float v = xr[i] * scale * w[i];
      if (y32) y32[static_cast<size_t>(blockIdx.x) * n + i] = v;
      if (y16) y16[static_cast<size_t>(blockIdx.x) * n + i] = __float2half_rn(v);
      quantize_block_q8(v, lane, blk, q + static_cast<size_t>(blockIdx.x) * n, ds + static_cast<size_t>(blockIdx.x) * (n / 32));
    }
    return;
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = xr[i] * scale * w[i];
    if (y32) y32[static_cast<size_t>(blockIdx.x) * n + i] = v;
    if (y16) y16[static_cast<size_t>(blockIdx.x) * n + i] = __float2half_rn(v);
  }
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
  return launch_kernel(rms_norm_kernel, dim3(rows), dim3(kThreads), 0, stream, x, w, n, eps, y_f32, static_cast<__half*>(y_f16),
                       yq.q, static_cast<float2*>(yq.ds));
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

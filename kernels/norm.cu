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

__device__ unsigned long long* g_norm_probe = nullptr;  // set_norm_probe

// The norm kernel: one block of 16 warps a row. Rows whose width is a
// multiple of 32 (every model's) up to kQuadMaxWidth take rms_norm_quads
// (norm.cuh), the matvec prologue's code; others the generic loop.
constexpr int kNormWarps = 16;
constexpr int kQuadMaxWidth = kSumPass * 32;

__device__ __forceinline__ void norm_store(float v, size_t i, float* y32, __half* y16, bool y16_lanes) {
  if (y32) y32[i] = v;
  if (y16) y16[y16_lanes ? x16_index(static_cast<int64_t>(i), X16Order::kLanes) : i] = __float2half_rn(v);
}

__global__ void __launch_bounds__(kNormWarps * kWarp) rms_norm_kernel(const float* x, const float* w, int n, float eps,
                                                                      float* y32, __half* y16, int8_t* q, float2* ds,
                                                                      bool y16_lanes) {
  __shared__ float scratch[kSumPass + 1];
  const size_t row = blockIdx.x;
  const float* xr = x + row * n;
  if (n % 32 == 0 && n <= kQuadMaxWidth) {
    norm_quads_prefetch_weights(w, n);  // constant: before the wait
    pdl_begin();
    rms_norm_quads(xr, w, n, eps, scratch, y32 ? y32 + row * n : nullptr, y16 ? y16 + row * n : nullptr,
                   q ? q + row * n : nullptr, q ? ds + row * (n / 32) : nullptr, y16_lanes);
    return;
  }
  pdl_begin();
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int nb = (n + kWarp - 1) / kWarp;
  const float scale = rsqrtf(row_sum_squares(xr, n, scratch) / static_cast<float>(n) + eps);
  for (int b = warp; b < nb; b += kNormWarps) {
    const int i = b * kWarp + lane;
    const float v = i < n ? xr[i] * scale * w[i] : 0.0f;
    if (i < n) norm_store(v, row * n + i, y32, y16, y16_lanes);
    if (q != nullptr) quantize_block_q8(v, lane, b, q + row * n, ds + row * (n / 32));
  }
}

// The deferred-scale norm of one row (norm.cuh): the norm kernel's block,
// one pass over x into Q8 blocks of x ⊙ w, then warp 0 writes the scale.
// smem: n / 32 floats (the block sums of squares).
__global__ void __launch_bounds__(kNormWarps * kWarp) deferred_norm_kernel(const float* x, const float* w, int n, float eps,
                                                                         int8_t* q, float2* ds, float* scale) {
  extern __shared__ float deferred_sums[];
  unsigned long long* probe = kPhaseProbes ? g_norm_probe : nullptr;
  const bool probing = probe != nullptr && threadIdx.x == 0;
  __shared__ long long stamp[5];  // thread 0's (shared: no registers held)
  if (probing) stamp[0] = clock64();
  norm_quads_prefetch_weights(w, n);  // constant: before the wait
  if (probing) stamp[1] = clock64();
  pdl_begin();
  if (probing) stamp[2] = clock64();
  deferred_norm_quads(x, w, n, q, ds, deferred_sums);
  if (probing) stamp[3] = clock64();
  if (threadIdx.x >= kWarp) return;
  const float s = norm_scale(deferred_sums, n, eps, static_cast<int>(threadIdx.x));
  if (threadIdx.x == 0) *scale = s;
  if (probing) {
    stamp[4] = clock64();
    phase_probe_add(probe, stamp);
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

__global__ void to_f16_kernel(const float* x, __half* y, int64_t n, X16Order order) {
  pdl_begin();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[x16_index(i, order)] = __float2half_rn(x[i]);
  }
}

}  // namespace

cudaError_t launch_rms_norm(const float* x, const float* w, int rows, int n, float eps, float* y_f32, void* y_f16,
                            Q8Rows yq, cudaStream_t stream, X16Order y_f16_order) {
  if (rows <= 0) return cudaSuccess;
  if (yq.q != nullptr && n % 32 != 0) return cudaErrorInvalidValue;
  const bool lanes = y_f16 != nullptr && y_f16_order == X16Order::kLanes;
  if (lanes && n % 128 != 0) return cudaErrorInvalidValue;
  return launch_kernel(rms_norm_kernel, dim3(rows), dim3(kNormWarps * kWarp), 0, stream, x, w, n, eps, y_f32, static_cast<__half*>(y_f16),
                       yq.q, static_cast<float2*>(yq.ds), lanes);
}

cudaError_t launch_rms_norm_deferred(const float* x, const float* w, int n, float eps, Q8Rows yq, float* scale,
                                     cudaStream_t stream) {
  if (n <= 0 || n % 32 != 0 || yq.q == nullptr || scale == nullptr) return cudaErrorInvalidValue;
  return launch_kernel(deferred_norm_kernel, dim3(1), dim3(kNormWarps * kWarp), sizeof(float) * static_cast<size_t>(n / 32),
                       stream, x, w, n, eps, yq.q, static_cast<float2*>(yq.ds), scale);
}

cudaError_t set_norm_probe(unsigned long long* fields) { return cudaMemcpyToSymbol(g_norm_probe, &fields, sizeof(fields)); }

cudaError_t launch_quantize_q8(const float* x, int rows, int n, Q8Rows yq, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (n % 32 != 0) return cudaErrorInvalidValue;
  return launch_kernel(quantize_kernel, dim3(rows), dim3(kThreads), 0, stream, x, n, yq.q, static_cast<float2*>(yq.ds));
}

cudaError_t launch_to_f16(const float* x, void* y, int64_t n, cudaStream_t stream, X16Order order, int row_n) {
  if (n <= 0) return cudaSuccess;
  if (order == X16Order::kLanes && (row_n <= 0 || row_n % 128 != 0 || n % row_n != 0)) return cudaErrorInvalidValue;
  return launch_kernel(to_f16_kernel, dim3(grid_for(n, 256)), dim3(256), 0, stream, x, static_cast<__half*>(y), n, order);
}

}  // namespace minfer::kernels

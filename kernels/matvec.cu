// Decode matrix-vector products: one warp per weight row, 16-byte loads of the
// plane layout, dequantization on the fly (dot.cuh). Memory bound: each weight
// byte is read once; the activations (a few KB) stay in L1/L2.
#include "kernels/dot.cuh"
#include "kernels/kernels.h"

namespace minfer::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

struct MatvecBatch {
  MatvecTask t[kMaxMatvecTasks];
  int block_begin[kMaxMatvecTasks + 1];  // first block of each task
  int n_tasks;
  DotInput in;
};

__global__ void __launch_bounds__(kWarpsPerBlock * kWarp) matvec_kernel(MatvecBatch b) {
  int ti = 0;
  while (ti + 1 < b.n_tasks && static_cast<int>(blockIdx.x) >= b.block_begin[ti + 1]) ++ti;
  const MatvecTask& t = b.t[ti];
  const int lane = threadIdx.x % kWarp;
  const int r = (static_cast<int>(blockIdx.x) - b.block_begin[ti]) * kWarpsPerBlock + static_cast<int>(threadIdx.x) / kWarp;
  if (r >= t.w.n_rows) return;
  float v = row_dot(t.w, r, b.in, lane);
  if (lane == 0) {
    if (t.bias != nullptr) v += t.bias[r];
    t.y[r] = t.accumulate ? t.y[r] + v : v;
  }
}

// Gate and up rows share an output index: 8 warps × 4 rows = 32 outputs per
// block, so the block also writes the Q8 block of h that the down projection
// reads (no extra launch).
constexpr int kGateUpWarps = 8;
constexpr int kGateUpRowsPerWarp = 4;

__global__ void __launch_bounds__(kGateUpWarps * kWarp)
    gate_up_kernel(DeviceWeight gate, DeviceWeight up, DotInput in, float* h, int8_t* hq, float2* hds) {
  __shared__ float out[kGateUpWarps * kGateUpRowsPerWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int base = blockIdx.x * 32;
#pragma unroll
  for (int i = 0; i < kGateUpRowsPerWarp; ++i) {
    const int local = warp * kGateUpRowsPerWarp + i;
    const int r = base + local;
    const float g = row_dot(gate, r, in, lane);
    const float u = row_dot(up, r, in, lane);
    if (lane == 0) {
      const float v = silu(g) * u;
      out[local] = v;
      h[r] = v;
    }
  }
  __syncthreads();
  if (warp == 0 && hq != nullptr) quantize_block_q8(out[lane], lane, blockIdx.x, hq, hds);
}

DotInput dot_input(const MatvecInput& in) {
  return DotInput{in.x, in.xq.q, static_cast<const float2*>(in.xq.ds)};
}

}  // namespace

cudaError_t launch_matvec(const MatvecTask* tasks, int n_tasks, MatvecInput in, cudaStream_t stream) {
  if (n_tasks < 1 || n_tasks > kMaxMatvecTasks) return cudaErrorInvalidValue;
  MatvecBatch b{};
  b.n_tasks = n_tasks;
  b.in = dot_input(in);
  int blocks = 0;
  for (int i = 0; i < n_tasks; ++i) {
    b.t[i] = tasks[i];
    b.block_begin[i] = blocks;
    blocks += (tasks[i].w.n_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  }
  b.block_begin[n_tasks] = blocks;
  matvec_kernel<<<blocks, kWarpsPerBlock * kWarp, 0, stream>>>(b);
  return cudaGetLastError();
}

cudaError_t launch_gate_up_swiglu(const DeviceWeight& gate, const DeviceWeight& up, MatvecInput in, float* h,
                                  Q8Rows hq, cudaStream_t stream) {
  if (gate.n_rows != up.n_rows || gate.n_rows % 32 != 0 || gate.k != up.k) return cudaErrorInvalidValue;
  gate_up_kernel<<<gate.n_rows / 32, kGateUpWarps * kWarp, 0, stream>>>(gate, up, dot_input(in), h, hq.q,
                                                                          static_cast<float2*>(hq.ds));
  return cudaGetLastError();
}

}  // namespace minfer::kernels

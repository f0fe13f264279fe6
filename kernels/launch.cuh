// One way to launch a kernel: with programmatic stream serialization when it
// is enabled (sm_90 devices; see pdl_wait in common.cuh), else a plain launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "kernels/kernels.h"

namespace minfer::kernels {

bool pdl_enabled();

// Blocks of `kernel` an SM holds with `threads` threads and `smem` bytes of
// dynamic shared memory, once the kernel is opted into `opt_in` bytes of it
// (0: left at the default 48 KB); 0 where it cannot be. On a shaped device
// (device_limits) no more than the shape's SM holds. Cached: eager decode
// asks at every launch.
int blocks_per_sm(const void* kernel, int threads, size_t smem, int opt_in);

// Opts `kernel` into `smem` bytes of dynamic shared memory where its static
// and dynamic shared memory together pass the 48 KB that a launch gets
// without opting in. The static part counts: decode attention's 512-thread
// block on head dim 64 (19 KB static, 32 KB of staged V rows) failed to
// launch (cudaErrorInvalidValue) while only dynamic sizes over 48 KB were
// opted in — unless a launch on head dim 128 had opted the kernel in before.
// Remembers what each kernel was allowed. On a shaped device more than the
// shape's block may opt into is cudaErrorInvalidValue, as on that device.
cudaError_t allow_dynamic_smem(const void* kernel, size_t smem);

// set_phase_probe's parts (kernels.h): each kernel file's own probe pointer.
cudaError_t set_attention_probe(unsigned long long* fields);
cudaError_t set_norm_probe(unsigned long long* fields);
cudaError_t set_gate_up_probe(unsigned long long* fields);
cudaError_t set_sample_probe(unsigned long long* fields);  // two kinds' fields

// Blocks of `threads` for a grid-stride loop over n elements, at most 65,535.
inline int grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);
}

template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t st = cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(std::forward<Args>(args))...);
  if (st != cudaSuccess) return st;
  return cudaGetLastError();
}

}  // namespace minfer::kernels

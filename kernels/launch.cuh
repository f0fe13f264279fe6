// One way to launch a kernel: with programmatic stream serialization when it
// is enabled (sm_90 devices; see pdl_wait in common.cuh), else a plain launch.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace minfer::kernels {

bool pdl_enabled();

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

// Fault injection for the bounded-wait and wedge tests: a kernel that spins
// until the host releases it (pinned host flag) or a time limit passes. Only
// tests launch it.
#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace minfer::kernels {
namespace {

__global__ void spin_kernel(const volatile int32_t* release, int64_t max_ns) {
  uint64_t start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    if (*release != 0) return;
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (max_ns > 0 && static_cast<int64_t>(now - start) > max_ns) return;
    __nanosleep(1000);
  }
}

}  // namespace

cudaError_t launch_spin(const volatile int32_t* release, int64_t max_ns, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(release, max_ns);
  return cudaGetLastError();
}

}  // namespace minfer::kernels

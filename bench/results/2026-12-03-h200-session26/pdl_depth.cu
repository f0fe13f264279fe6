// How far ahead programmatic dependent launch lets a chain run (H200
// question, 2026-12-03): A, B and C launched one after the other on a
// stream, each with programmatic stream serialization, each triggering its
// dependents at its very start. A spins 200 µs; B and C record the
// globaltimer at their start (before griddepcontrol.wait) and after the
// wait. If C may start while A still runs, C's start is a few µs after A's;
// if only the kernel right after a running one may, C starts once A is done.
// The second round gives C and D 100 KB of dynamic shared memory (opted
// in), as decode attention's staged rows take.
//   nvcc -O3 -arch=sm_90 -std=c++17 pdl_depth.cu -o pdl_depth && ./pdl_depth
#include <cuda_runtime.h>

#include <cstdio>

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long* t, long long ns) {
  asm volatile("griddepcontrol.launch_dependents;");
  t[0] = now_ns();
  while (static_cast<long long>(now_ns() - t[0]) < ns) __nanosleep(1000);
  t[1] = now_ns();
}

__global__ void stamp_kernel(unsigned long long* t) {
  extern __shared__ unsigned char big[];
  if (threadIdx.x == 1000) big[0] = 0;  // never: the memory is only reserved
  asm volatile("griddepcontrol.launch_dependents;");
  t[0] = now_ns();
  asm volatile("griddepcontrol.wait;" ::: "memory");
  t[1] = now_ns();
}

template <class... A>
void launch(void (*k)(A...), cudaStream_t s, size_t smem, A... a) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(32);
  cfg.stream = s;
  cfg.dynamicSmemBytes = smem;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, k, a...);
}

int main() {
  unsigned long long* t;
  cudaMalloc(&t, 8 * sizeof(unsigned long long));
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaFuncSetAttribute(stamp_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10);
  for (int rep = 0; rep < 6; ++rep) {
    const size_t big = rep < 3 ? 0 : 100 << 10;
    cudaMemset(t, 0, 8 * sizeof(unsigned long long));
    cudaDeviceSynchronize();
    launch(spin_kernel, s, 0, t, 200'000LL);
    launch(stamp_kernel, s, 0, t + 2);
    launch(stamp_kernel, s, big, t + 4);
    launch(stamp_kernel, s, big, t + 6);
    cudaStreamSynchronize(s);
    unsigned long long h[8];
    cudaMemcpy(h, t, sizeof(h), cudaMemcpyDeviceToHost);
    auto us = [&](int i) { return (static_cast<long long>(h[i]) - static_cast<long long>(h[0])) / 1000.0; };
    std::printf("rep %d, C and D %zu KB (µs from A's start): A ends %.1f | B starts %.1f, waited to %.1f | C starts %.1f, waited to %.1f | "
                "D starts %.1f, waited to %.1f  (%s)\n",
                rep, big >> 10, us(1), us(2), us(3), us(4), us(5), us(6), us(7), cudaGetErrorString(cudaGetLastError()));
  }
  return 0;
}

// What a kernel boundary costs in a decode step's chain, by how the next
// kernel learns that its input is complete (H200 question, 2026-12-03):
//   plain  stream order, no programmatic launch;
//   pdl    programmatic launch, griddepcontrol.wait (what the engine does);
//   flag   programmatic launch, the producer's last block (an atomic count
//          a kernel) publishes the step's epoch with a release store and
//          the consumer's thread 0 polls it with acquire loads;
//   count  programmatic launch, every producer block adds one to a
//          monotonic count (release) and the consumer polls for
//          epoch x blocks.
// Each kernel of the chain reads the previous one's 3,584 floats from L2
// (every block the whole vector, like a matvec's activations) and writes
// its own, in the grid sizes of a 7B layer's seven launches. The chain is
// captured as a graph and replayed; the figure is µs a kernel. Every mode
// must end with the same output bits (checked). Standalone:
//   nvcc -O3 -arch=sm_90 -std=c++17 seam_bench.cu -o seam_bench && ./seam_bench 28 200
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                                    \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

namespace {

enum Mode { kPlain = 0, kPdl = 1, kFlag = 2, kCount = 3 };
constexpr int kN = 3584;
constexpr int kThreads = 256;

struct Sync {
  unsigned* epoch;               // the step's epoch (written before the chain)
  unsigned* done;                // flag: the epoch a kernel last completed, a slot a kernel
  unsigned* blocks_in;           // flag: blocks of the kernel done this step
  unsigned long long* count;     // count: blocks ever done, a slot a kernel
};

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long ld_acquire64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

template <int kMode>
__global__ void __launch_bounds__(kThreads) chain_kernel(const float* x, float* y, Sync s, int slot, int prev_blocks) {
  __shared__ float part[kThreads / 32];
  if constexpr (kMode == kPdl) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
  } else if constexpr (kMode == kFlag || kMode == kCount) {
    if (threadIdx.x == 0 && slot > 0) {
      const unsigned e = *reinterpret_cast<volatile unsigned*>(s.epoch);
      if constexpr (kMode == kFlag) {
        while (ld_acquire(s.done + slot - 1) != e) {
        }
      } else {
        const unsigned long long want = static_cast<unsigned long long>(e) * prev_blocks;
        while (ld_acquire64(s.count + slot - 1) < want) {
        }
      }
    }
    __syncthreads();
    asm volatile("griddepcontrol.launch_dependents;");
  }
  float acc = 0.0f;
  for (int i = threadIdx.x; i < kN; i += kThreads) acc += __ldcg(x + i);
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
  __syncthreads();
  float sum = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) sum += part[w];
  const int per = (kN + gridDim.x - 1) / gridDim.x;
  for (int i = blockIdx.x * per + threadIdx.x; i < min(kN, (blockIdx.x + 1) * per); i += kThreads) {
    y[i] = __ldcg(x + i) * 0.5f + sum * 1e-6f;
  }
  if constexpr (kMode == kFlag) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      const unsigned e = *reinterpret_cast<volatile unsigned*>(s.epoch);
      if (atomicAdd(s.blocks_in + slot, 1u) == gridDim.x - 1) {
        s.blocks_in[slot] = 0;
        __threadfence();
        st_release(s.done + slot, e);
      }
    }
  } else if constexpr (kMode == kCount) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(s.count + slot, 1ull);
    }
  }
}

__global__ void bump_epoch(unsigned* epoch, unsigned* done0) {
  const unsigned e = *epoch + 1;
  *epoch = e;
  *done0 = e;  // slot 0: the chain's start
}

template <int kMode>
void launch(const float* x, float* y, const Sync& s, int slot, int prev_blocks, int blocks, cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = kMode == kPlain ? 0 : 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&cfg, chain_kernel<kMode>, x, y, s, slot, prev_blocks));
}

template <int kMode>
void run(const char* name, int layers, int reps, const std::vector<int>& pattern, float* bufs, const Sync& s,
         std::vector<float>* out) {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaMemset(bufs, 0, sizeof(float) * 2 * kN));
  std::vector<float> init(kN);
  for (int i = 0; i < kN; ++i) init[i] = static_cast<float>((i * 37) % 101) * 0.01f;
  CHECK(cudaMemcpy(bufs, init.data(), sizeof(float) * kN, cudaMemcpyHostToDevice));
  const int per_layer = static_cast<int>(pattern.size());
  const int n_kernels = layers * per_layer;
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  bump_epoch<<<1, 1, 0, stream>>>(s.epoch, s.done);
  for (int k = 0; k < n_kernels; ++k) {
    const float* x = bufs + (k % 2) * kN;
    float* y = bufs + ((k + 1) % 2) * kN;
    const int prev = k == 0 ? 1 : pattern[(k - 1) % per_layer];
    // Slot k + 1 is kernel k's; slot 0 the epoch bump's (flag mode).
    launch<kMode>(x, y, s, k + 1, kMode == kCount && k == 0 ? 0 : prev, pattern[k % per_layer], stream);
  }
  CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  // The count mode's first kernel has no predecessor count (prev_blocks 0):
  // it waits for want = 0, i.e. not at all, after the bump (stream order).
  CHECK(cudaGraphLaunch(exec, stream));  // warm-up
  CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a, stream));
  for (int r = 0; r < reps; ++r) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaEventRecord(b, stream));
  CHECK(cudaStreamSynchronize(stream));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  out->resize(kN);
  CHECK(cudaMemcpy(out->data(), bufs + (n_kernels % 2) * kN, sizeof(float) * kN, cudaMemcpyDeviceToHost));
  std::printf("%-6s %4d kernels a graph, %d replays: %8.2f us a graph, %6.3f us a kernel\n", name, n_kernels, reps,
              1000.0 * ms / reps, 1000.0 * ms / reps / n_kernels);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(stream));
}

}  // namespace

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 28;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 200;
  float* bufs;
  CHECK(cudaMalloc(&bufs, sizeof(float) * 2 * kN));
  const int max_kernels = 4096;
  Sync s{};
  CHECK(cudaMalloc(&s.epoch, sizeof(unsigned)));
  CHECK(cudaMalloc(&s.done, sizeof(unsigned) * (max_kernels + 1)));
  CHECK(cudaMalloc(&s.blocks_in, sizeof(unsigned) * (max_kernels + 1)));
  CHECK(cudaMalloc(&s.count, sizeof(unsigned long long) * (max_kernels + 1)));
  // A 7B layer's launches: norm, q/k/v, attention, attn_output, norm,
  // gate/up, ffn_down; then the same with every kernel one wave of 132.
  const std::vector<std::vector<int>> patterns = {{1, 1152, 28, 896, 1, 132, 132}, {132, 132, 132, 132, 132, 132, 132},
                                                  {1, 1, 1, 1, 1, 1, 1}};
  for (const auto& p : patterns) {
    std::printf("grid pattern:");
    for (int g : p) std::printf(" %d", g);
    std::printf("\n");
    std::vector<float> ref, got;
    for (int round = 0; round < 2; ++round) {
      CHECK(cudaMemset(s.epoch, 0, sizeof(unsigned)));
      CHECK(cudaMemset(s.done, 0xff, sizeof(unsigned) * (max_kernels + 1)));
      CHECK(cudaMemset(s.blocks_in, 0, sizeof(unsigned) * (max_kernels + 1)));
      CHECK(cudaMemset(s.count, 0, sizeof(unsigned long long) * (max_kernels + 1)));
      run<kPlain>("plain", layers, reps, p, bufs, s, &ref);
      run<kPdl>("pdl", layers, reps, p, bufs, s, &got);
      if (std::memcmp(ref.data(), got.data(), sizeof(float) * kN) != 0) std::printf("pdl: OUTPUT DIFFERS\n");
      run<kFlag>("flag", layers, reps, p, bufs, s, &got);
      if (std::memcmp(ref.data(), got.data(), sizeof(float) * kN) != 0) std::printf("flag: OUTPUT DIFFERS\n");
      CHECK(cudaMemset(s.epoch, 0, sizeof(unsigned)));
      run<kCount>("count", layers, reps, p, bufs, s, &got);
      if (std::memcmp(ref.data(), got.data(), sizeof(float) * kN) != 0) std::printf("count: OUTPUT DIFFERS\n");
    }
  }
  return 0;
}

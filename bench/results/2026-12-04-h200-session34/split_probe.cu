// Can a decode step's seam run on a few SMs while the rest stream the next
// product's weights? (H200 question, 2026-12-04, after queue_probe.cu: data
// into an SM arrives behind the bytes already on their way to it, so the SMs
// that wait for activations must not be the ones streaming.)
//
// A streamer kernel holds S SMs (one 1,024-thread block an SM with all its
// shared memory, so nothing else fits there) and streams a buffer from DRAM
// through cp.async copies for 3 ms, with 1, 2 or 4 stages of 48 KB in flight
// a block; a blocker holds S SMs the same way but only sleeps. On another stream, a captured chain of a 7B layer's seam
// launches — norm (1 block), q/k/v (1,152), attention (28), attn_output (896),
// norm (1) — times 28 layers, with programmatic dependent launch: each kernel
// reads its weights' share (8 KB a block for q/k/v and attn_output, as 7B
// Q4_K_M's 9.3 and 7.2 MB) before its wait, then the 3,584 floats the one
// before wrote, and writes its own. Figures: the chain's µs a layer alone (all
// SMs), beside the blocker (the free SMs only, DRAM quiet) and beside the
// streamer; the streamer's GB/s alone and beside the chain; and on how many
// SMs the chain's blocks ran.
//   nvcc -O3 -arch=sm_90 -std=c++17 split_probe.cu -o split_probe && ./split_probe
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

constexpr int kN = 3584;
constexpr int kChainThreads = 256;
constexpr int kHolderThreads = 1024;

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// One block an SM: streams its region of w (`region` bytes, round and round)
// through a ring of `stages` 48 KB stages in flight (stream = true), or
// sleeps (the blocker), for `run_ns`; adds the bytes it streamed to *bytes.
// Counts itself in *started first.
__global__ void __launch_bounds__(kHolderThreads) holder_kernel(bool stream, const unsigned char* w, long long region,
                                                               int stages, long long run_ns, unsigned* started,
                                                               unsigned long long* bytes, int* sink) {
  extern __shared__ __align__(128) unsigned char ring[];
  if (threadIdx.x == 0) atomicAdd(started, 1u);
  const int t = static_cast<int>(threadIdx.x);
  const unsigned long long t0 = now_ns();
  if (!stream) {
    while (now_ns() - t0 < static_cast<unsigned long long>(run_ns)) __nanosleep(2000);
    return;
  }
  constexpr int kStage = 48 * 1024, kMaxStages = 4;
  const unsigned char* src = w + static_cast<size_t>(blockIdx.x) * region;
  auto issue = [&](int slot, long long at) {
    for (int o = t * 16; o < kStage; o += kHolderThreads * 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(ring + slot * kStage + o)),
                   "l"(src + (at % region) + o)
                   : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  long long issued = 0, done = 0;
  for (int i = 0; i < stages; ++i, issued += kStage) issue(i, issued);
  int v = 0;
  __shared__ bool stop;
  for (;;) {
    // The oldest stage in: stages - 1 groups may stay pending.
    switch (stages) {
      case 1: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
      case 2: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
      case 3: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
      default: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    }
    if (t == 0) stop = now_ns() - t0 >= static_cast<unsigned long long>(run_ns);
    __syncthreads();
    const int slot = static_cast<int>((done / kStage) % stages);
    v ^= ring[slot * kStage + t * 16];
    done += kStage;
    const bool last = stop;
    __syncthreads();
    if (last) break;
    issue(slot, issued);
    issued += kStage;
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  if (t == 0) atomicAdd(bytes, static_cast<unsigned long long>(done));
  if (v == 0x7fffffff) sink[0] = v;
  (void)kMaxStages;
}

struct ChainArgs {
  const float* x;
  float* y;
  const int4* w;          // this kernel's weights
  int w_per_block;        // int4s a block reads before its wait
  const unsigned* started;
  unsigned wait_for;      // blocks of the holder to see started (first kernel only)
  unsigned* sm_mask;      // bit a SM the chain ran on
};

__global__ void __launch_bounds__(kChainThreads) chain_kernel(ChainArgs a) {
  __shared__ float part[kChainThreads / 32];
  if (a.wait_for > 0 && threadIdx.x == 0) {
    while (*reinterpret_cast<const volatile unsigned*>(a.started) < a.wait_for) {
    }
  }
  if (threadIdx.x == 0) atomicOr(a.sm_mask + smid() / 32, 1u << (smid() % 32));
  // The weights before the wait (a preload): summed only after it.
  int4 held = make_int4(0, 0, 0, 0);
  for (int i = threadIdx.x; i < a.w_per_block; i += kChainThreads) {
    const int4 v = __ldcg(a.w + static_cast<size_t>(blockIdx.x) * a.w_per_block + i);
    held.x ^= v.x;
    held.w ^= v.w;
  }
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  float acc = static_cast<float>(held.x & 1) * 1e-30f;
  for (int i = threadIdx.x; i < kN; i += kChainThreads) acc += __ldcg(a.x + i);
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
  __syncthreads();
  float sum = 0.0f;
  for (int w = 0; w < kChainThreads / 32; ++w) sum += part[w];
  const int per = (kN + gridDim.x - 1) / gridDim.x;
  for (int i = blockIdx.x * per + threadIdx.x; i < min(kN, (blockIdx.x + 1) * per); i += kChainThreads) {
    a.y[i] = __ldcg(a.x + i) * 0.5f + sum * 1e-6f;
  }
}

void launch_chain(const ChainArgs& a, int blocks, cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kChainThreads);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&cfg, chain_kernel, a));
}

}  // namespace

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 28;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const size_t w_bytes = size_t{8} << 30;
  unsigned char* w = nullptr;
  CHECK(cudaMalloc(&w, w_bytes));
  CHECK(cudaMemset(w, 1, w_bytes));
  float* bufs = nullptr;
  CHECK(cudaMalloc(&bufs, sizeof(float) * 2 * kN));
  CHECK(cudaMemset(bufs, 0, sizeof(float) * 2 * kN));
  unsigned *started = nullptr, *mask = nullptr;
  int* sink = nullptr;
  CHECK(cudaMalloc(&started, sizeof(unsigned)));
  CHECK(cudaMalloc(&mask, 8 * sizeof(unsigned)));
  CHECK(cudaMalloc(&sink, sizeof(int)));
  // All of the shared memory a block may have (less the holder's static 128 bytes):
  // no other block fits beside it.
  const int holder_smem = static_cast<int>(prop.sharedMemPerBlockOptin) - 128;
  CHECK(cudaFuncSetAttribute(holder_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, holder_smem));
  cudaStream_t s_chain, s_hold;
  CHECK(cudaStreamCreateWithFlags(&s_chain, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s_hold, cudaStreamNonBlocking));
  cudaEvent_t c0, c1, h0, h1;
  for (cudaEvent_t* e : {&c0, &c1, &h0, &h1}) CHECK(cudaEventCreate(e));

  // The chain's graph: weights for q/k/v and attn_output from their own
  // regions (past the holder's), 8 KB a block.
  const std::vector<int> grids = {1, 1152, 28, 896, 1};
  const std::vector<int> w_int4 = {0, 512, 0, 512, 0};
  const size_t chain_w = size_t{7} << 30;  // from 7 GB on: the holder's bytes end before
  std::printf("%s, %d SMs; a chain of %d layers x %zu seam launches (grids 1 1152 28 896 1)\n\n", prop.name, sms, layers,
              grids.size());
  unsigned long long* streamed = nullptr;
  CHECK(cudaMalloc(&streamed, sizeof(unsigned long long)));
  const long long run_ns = 3000000;  // the holder outlasts the chain
  std::printf("| holder SMs | holder | stages in flight | chain µs a layer | chain's SMs | holder GB/s |\n");
  std::printf("|---:|---|---:|---:|---:|---:|\n");
  struct Case {
    int holders, stages;
    bool stream;
  };
  const Case cases[] = {{0, 0, false},  {100, 0, false}, {100, 1, true}, {100, 2, true}, {100, 4, true},
                        {116, 0, false}, {116, 1, true},  {116, 2, true}, {sms, 1, true}, {sms, 4, true}};
  for (const Case& c : cases) {
    const long long region = c.holders > 0 ? (size_t{6} << 30) / c.holders / 16 * 16 : 0;
    // A graph a case: the first kernel waits for the holder's blocks.
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(s_chain, cudaStreamCaptureModeThreadLocal));
    size_t w_off = chain_w;
    for (int l = 0; l < layers; ++l) {
      for (size_t k = 0; k < grids.size(); ++k) {
        const int idx = l * static_cast<int>(grids.size()) + static_cast<int>(k);
        ChainArgs a{bufs + (idx % 2) * kN, bufs + ((idx + 1) % 2) * kN, reinterpret_cast<const int4*>(w + w_off), w_int4[k],
                    started, idx == 0 ? static_cast<unsigned>(c.holders) : 0u, mask};
        w_off += static_cast<size_t>(grids[k]) * w_int4[k] * 16;
        launch_chain(a, grids[k], s_chain);
      }
    }
    CHECK(cudaStreamEndCapture(s_chain, &graph));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    float chain_ms = 0;
    double gbs = 0;
    int chain_sms = 0;
    const int reps = 5;
    const bool chain_runs = c.holders < sms;
    for (int r = 0; r < reps + 1; ++r) {
      CHECK(cudaMemset(started, 0, sizeof(unsigned)));
      CHECK(cudaMemset(mask, 0, 8 * sizeof(unsigned)));
      CHECK(cudaMemset(streamed, 0, sizeof(unsigned long long)));
      CHECK(cudaDeviceSynchronize());
      if (c.holders > 0) {
        CHECK(cudaEventRecord(h0, s_hold));
        holder_kernel<<<c.holders, kHolderThreads, holder_smem, s_hold>>>(c.stream, w, region, c.stages, run_ns, started,
                                                                          streamed, sink);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(h1, s_hold));
      }
      if (chain_runs) {
        CHECK(cudaEventRecord(c0, s_chain));
        CHECK(cudaGraphLaunch(exec, s_chain));
        CHECK(cudaEventRecord(c1, s_chain));
      }
      CHECK(cudaDeviceSynchronize());
      if (r == 0) continue;  // warm-up
      float ms = 0;
      if (chain_runs) {
        CHECK(cudaEventElapsedTime(&ms, c0, c1));
        chain_ms += ms / reps;
      }
      if (c.holders > 0 && c.stream) {
        CHECK(cudaEventElapsedTime(&ms, h0, h1));
        unsigned long long b = 0;
        CHECK(cudaMemcpy(&b, streamed, sizeof b, cudaMemcpyDeviceToHost));
        gbs += static_cast<double>(b) / (ms * 1e6) / reps;
      }
      unsigned m[8];
      CHECK(cudaMemcpy(m, mask, sizeof m, cudaMemcpyDeviceToHost));
      chain_sms = 0;
      for (unsigned v : m) chain_sms += __builtin_popcount(v);
    }
    char cs[32] = "-", g[32] = "-", st[32] = "-";
    if (chain_runs) std::snprintf(cs, sizeof cs, "%.2f", 1000.0 * chain_ms / layers);
    if (c.stream) std::snprintf(g, sizeof g, "%.0f", gbs);
    if (c.stream) std::snprintf(st, sizeof st, "%d", c.stages);
    std::printf("| %d | %s | %s | %s | %d | %s |\n", c.holders, c.holders == 0 ? "none" : c.stream ? "streams" : "sleeps", st,
                cs, chain_runs ? chain_sms : 0, g);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
  }
  return 0;
}

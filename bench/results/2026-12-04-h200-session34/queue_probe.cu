// Does a load issued behind a weight stream wait for the stream? (H200
// question, 2026-12-04.) Session 27 found the pipelined gate/up's 4 KB of
// activations taking 2.7-3.3 µs to stage after its PDL wait, behind the
// weight stages its lanes had issued with cp.async (LDGSTS); session 16 left
// open whether weights fetched by the bulk-copy engine (TMA,
// cp.async.bulk) would sit in front of the threads' loads the same way.
//
// One block an SM (200 KB of dynamic shared memory), 256 threads. A block
// first issues its stream — nothing, per-thread cp.async 16-byte copies, bulk
// copies of 16 KB from thread 0, or per-thread 16-byte loads into registers
// (the plain kernels' preload) — of S bytes from a 2 GB buffer (from DRAM: a
// new region every pass), then every thread loads 16 bytes of a 4 KB vector
// that sits in L2 (ld.global.cg), and the block times that load from issue to
// use (clock64, thread 0, after a barrier each side). Then it waits for its
// stream and times that too. "split" modes stream from even blocks only: do
// the odd blocks' loads, on SMs with nothing in flight, wait too (a queue in
// the L2 or DRAM, not the SM's)?
//   nvcc -O3 -arch=sm_90 -std=c++17 queue_probe.cu -o queue_probe && ./queue_probe
#include <cuda_runtime.h>

#include <algorithm>
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

enum Mode { kNone, kLdgsts, kBulk, kLdg, kLdgstsSplit, kBulkSplit };
const char* const kModeNames[] = {"none", "cp.async", "bulk", "ldg (32 KB at most; GB/s not of it)", "cp.async split", "bulk split"};
constexpr int kThreads = 256;
constexpr int kSmem = 200 * 1024;
constexpr int kChunk = 16 * 1024;  // a bulk copy

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

struct Out {
  long long probe;   // cycles from the probe's issue to its use
  long long stream;  // cycles from the stream's issue to its end
};

__global__ void __launch_bounds__(kThreads) probe_kernel(int mode, const int4* w, long long bytes, const int4* act,
                                                         long long delay, int kind, Out* out, int* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bar;
  const int t = static_cast<int>(threadIdx.x);
  const bool split = mode == kLdgstsSplit || mode == kBulkSplit;
  const bool streams = mode != kNone && (!split || blockIdx.x % 2 == 0);
  const bool bulk = mode == kBulk || mode == kBulkSplit;
  const bool ldgsts = mode == kLdgsts || mode == kLdgstsSplit;
  const unsigned char* src = reinterpret_cast<const unsigned char*>(w) + static_cast<size_t>(blockIdx.x) * bytes;
  if (bulk && t == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bar)) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  const long long s0 = clock64();
  int4 held[8];
  if (streams && ldgsts) {
    for (long long o = static_cast<long long>(t) * 16; o < bytes; o += kThreads * 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(smem + o % kSmem)), "l"(src + o) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  } else if (streams && bulk && t == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&bar)),
                 "r"(static_cast<uint32_t>(bytes))
                 : "memory");
    for (long long o = 0; o < bytes; o += kChunk) {
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       smem_u32(smem + o % kSmem)),
                   "l"(src + o), "r"(kChunk), "r"(smem_u32(&bar))
                   : "memory");
    }
  } else if (streams && mode == kLdg) {
    // At most 8 loads a thread in registers (32 KB a block): bytes caps it.
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const long long o = (static_cast<long long>(i) * kThreads + t) * 16;
      held[i] = o < bytes ? __ldcg(reinterpret_cast<const int4*>(src + o)) : make_int4(0, 0, 0, 0);
    }
  }
  // As a kernel's PDL wait would, some time between the stream's issue and
  // the load.
  while (clock64() - s0 < delay) {
  }
  __syncthreads();
  const long long p0 = clock64();
  int v = 0;
  if (kind == 0) {  // ld.global.cg: L2, as the kernels stage activations
    const int4 a = __ldcg(act + t);
    v = a.x ^ a.y ^ a.z ^ a.w;
  } else if (kind == 1) {  // ld.global.nc: the read-only (texture) path
    const int4 a = __ldg(act + t);
    v = a.x ^ a.y ^ a.z ^ a.w;
  } else {  // ldu: one address a warp, the warp's 512 bytes in 32 loads
    const int4* base = act + (t / 32) * 32;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      int4 a;
      asm volatile("ldu.global.v4.s32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w)
                   : "l"(base + i));
      v ^= a.x ^ a.w;
    }
  }
  __shared__ int reduce[kThreads];
  reduce[t] = v;  // the use: the store waits for the load
  __syncthreads();
  const long long p1 = clock64();
  if (streams && ldgsts) asm volatile("cp.async.wait_all;" ::: "memory");
  if (streams && bulk) {
    asm volatile(
        "{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n @!done bra WAIT;\n}" ::"r"(
            smem_u32(&bar))
        : "memory");
  }
  if (streams && mode == kLdg) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v ^= held[i].x ^ held[i].w;
  }
  __syncthreads();
  const long long s1 = clock64();
  if (streams && (ldgsts || bulk)) v ^= smem[(t * 64) % kSmem];
  if (v == 0x7fffffff) sink[0] = reduce[(t + 1) % kThreads];  // never, in practice: keeps the loads
  if (t == 0) out[blockIdx.x] = Out{p1 - p0, s1 - s0};
}

// Clusters of two blocks (two SMs): can a block that streams get its 4 KB by
// another's load? Rank 1 always streams S bytes with cp.async; rank 0 streams
// too in the "both" cases. The 4 KB then reach rank 1's shared memory by
//   0 rank 1's own ld.global.cg (today's way, for reference);
//   1 a bulk copy rank 0 issues with .multicast::cluster (one L2 read,
//     written into both blocks' shared memory, each block's barrier told);
//   2 rank 0's ld.global.cg, then its stores into rank 1's shared memory
//     (st.shared::cluster) and a cluster barrier.
// Timed on rank 1 from a cluster barrier after the streams' issue to the
// data in its shared memory.
enum CMode { kOwnLoad, kMulticast, kPush };
const char* const kCModeNames[] = {"own ld.global.cg", "rank 0's multicast bulk copy", "rank 0's loads pushed (DSMEM)"};

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
    cluster_kernel(int cmode, bool both, const int4* w, long long bytes, const int4* act, Out* out, int* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bar;
  __shared__ __align__(16) int4 landing[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const bool streams = rank == 1 || both;
  const unsigned char* src = reinterpret_cast<const unsigned char*>(w) + static_cast<size_t>(blockIdx.x) * bytes;
  if (t == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    if (cmode == kMulticast) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&bar)),
                   "r"(static_cast<uint32_t>(sizeof(landing)))
                   : "memory");
    }
  }
  if (streams) {
    for (long long o = static_cast<long long>(t) * 16; o < bytes; o += kThreads * 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(smem + o % kSmem)), "l"(src + o) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  // Relaxed: a release would wait for the block's own copies (run 4 did).
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
  const long long p0 = clock64();
  int v = 0;
  if (cmode == kOwnLoad) {
    if (rank == 1) {
      const int4 a = __ldcg(act + t);
      landing[t] = a;
    }
    __syncthreads();
  } else if (cmode == kMulticast) {
    if (rank == 0 && t == 0) {
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;" ::"r"(
              smem_u32(landing)),
          "l"(act), "r"(static_cast<uint32_t>(sizeof(landing))), "r"(smem_u32(&bar)), "h"(static_cast<uint16_t>(3))
          : "memory");
    }
    asm volatile(
        "{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n @!done bra WAIT;\n}" ::"r"(
            smem_u32(&bar))
        : "memory");
    __syncthreads();
  } else {
    if (rank == 0) {
      const int4 a = __ldcg(act + t);
      uint32_t remote;
      asm volatile("mapa.shared::cluster.u32 %0, %1, 1;" : "=r"(remote) : "r"(smem_u32(landing + t)));
      asm volatile("st.shared::cluster.v4.s32 [%0], {%1, %2, %3, %4};" ::"r"(remote), "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w)
                   : "memory");
      asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    } else {
      asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    }
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  }
  const long long p1 = clock64();
  v = landing[t].x ^ landing[t].w;
  if (streams) asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  const long long s1 = clock64();
  if (v == 0x7fffffff) sink[0] = smem[t];
  // Keep both blocks alive until rank 1's remote writes are done.
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  if (t == 0) out[blockIdx.x] = Out{p1 - p0, s1 - p0};
}

__global__ void touch_kernel(int4* act) { act[threadIdx.x] = make_int4(threadIdx.x, 1, 2, 3); }

long long median(std::vector<long long> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int passes = argc > 1 ? std::atoi(argv[1]) : 20;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double ghz = clock_khz / 1e6;
  const int blocks = prop.multiProcessorCount;
  const size_t w_bytes = size_t{2} << 30;
  int4 *w = nullptr, *act = nullptr;
  Out* out = nullptr;
  int* sink = nullptr;
  CHECK(cudaMalloc(&w, w_bytes));
  CHECK(cudaMemset(w, 1, w_bytes));
  CHECK(cudaMalloc(&act, kThreads * sizeof(int4)));
  CHECK(cudaMalloc(&out, blocks * sizeof(Out)));
  CHECK(cudaMalloc(&sink, sizeof(int)));
  CHECK(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  std::printf("%s, %d SMs, L2 %d MB, SM clock %.2f GHz; %d passes a case; µs (cycles / clock)\n\n", prop.name, blocks,
              prop.l2CacheSize >> 20, ghz, passes);
  std::vector<Out> host(blocks);
  size_t region = 0;
  const char* const kinds[] = {"ld.global.cg", "ld.global.nc", "ldu.global"};
  for (int kind = 0; kind < 3; ++kind) {
  std::printf("\nthe probe's loads: %s\n\n", kinds[kind]);
  std::printf("| stream a block | load after (µs) | mode | probe: streaming blocks | probe: quiet blocks | stream's end | stream GB/s |\n");
  std::printf("|---:|---:|---|---:|---:|---:|---:|\n");
  for (long long bytes : {48LL << 10, 192LL << 10}) {
    if (kind > 0 && bytes < (192LL << 10)) continue;
    for (double delay_us : {0.0, 2.0, 4.0, 6.0}) {
    const long long delay = static_cast<long long>(delay_us * ghz * 1e3);
    for (int mode = kNone; mode <= kBulkSplit; ++mode) {
      std::vector<long long> busy, quiet, stream;
      for (int p = 0; p < passes + 2; ++p) {
        touch_kernel<<<1, kThreads>>>(act);
        if (region + static_cast<size_t>(bytes) * blocks > w_bytes) region = 0;
        const int4* src = reinterpret_cast<const int4*>(reinterpret_cast<const unsigned char*>(w) + region);
        region += static_cast<size_t>(bytes) * blocks;
        probe_kernel<<<blocks, kThreads, kSmem>>>(mode, src, bytes, act, delay, kind, out, sink);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(host.data(), out, blocks * sizeof(Out), cudaMemcpyDeviceToHost));
        if (p < 2) continue;  // warm-up
        const bool split = mode == kLdgstsSplit || mode == kBulkSplit;
        for (int b = 0; b < blocks; ++b) {
          const bool streams = mode != kNone && (!split || b % 2 == 0);
          (streams || mode == kNone ? busy : quiet).push_back(host[b].probe);
          if (streams) stream.push_back(host[b].stream);
        }
      }
      const long long st = median(stream);
      const double st_us = st / ghz / 1e3;
      const int streaming = (mode == kLdgstsSplit || mode == kBulkSplit) ? (blocks + 1) / 2 : blocks;
      char q[32] = "-", e[32] = "-", g[32] = "-";
      if (!quiet.empty()) std::snprintf(q, sizeof q, "%.2f", median(quiet) / ghz / 1e3);
      if (mode != kNone) {
        std::snprintf(e, sizeof e, "%.2f", st_us);
        std::snprintf(g, sizeof g, "%.0f", static_cast<double>(bytes) * streaming / (st_us * 1e3));
      }
      std::printf("| %lld KB | %.0f | %s | %.2f | %s | %s | %s |\n", bytes >> 10, delay_us, kModeNames[mode],
                  median(busy) / ghz / 1e3, q, e, g);
    }
    }
  }
  }
  // Clusters of two.
  CHECK(cudaFuncSetAttribute(cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  std::printf("\nclusters of two blocks; rank 1 streams S bytes (rank 0 too where \"both\"); rank 1's 4 KB arrive by:\n\n");
  std::printf("| stream a block | streams | the 4 KB by | arrival at rank 1 | rank 0's blocks: arrival | rank 1's stream end |\n");
  std::printf("|---:|---|---|---:|---:|---:|\n");
  const int cblocks = blocks / 2 * 2;
  for (long long bytes : {0LL, 192LL << 10}) {
    for (int both = 0; both < 2; ++both) {
      if (bytes == 0 && both) continue;
      for (int cmode = kOwnLoad; cmode <= kPush; ++cmode) {
        std::vector<long long> r1, r0, e1;
        for (int p = 0; p < passes + 2; ++p) {
          touch_kernel<<<1, kThreads>>>(act);
          if (region + static_cast<size_t>(bytes) * cblocks > w_bytes) region = 0;
          const int4* src = reinterpret_cast<const int4*>(reinterpret_cast<const unsigned char*>(w) + region);
          region += static_cast<size_t>(bytes) * cblocks;
          cluster_kernel<<<cblocks, kThreads, kSmem>>>(cmode, both != 0, src, bytes, act, out, sink);
          CHECK(cudaGetLastError());
          CHECK(cudaMemcpy(host.data(), out, cblocks * sizeof(Out), cudaMemcpyDeviceToHost));
          if (p < 2) continue;
          for (int b = 0; b < cblocks; ++b) {
            (b % 2 == 1 ? r1 : r0).push_back(host[b].probe);
            if (b % 2 == 1) e1.push_back(host[b].stream);
          }
        }
        std::printf("| %lld KB | %s | %s | %.2f | %.2f | %.2f |\n", bytes >> 10, bytes == 0 ? "none" : both ? "both" : "rank 1",
                    kCModeNames[cmode], median(r1) / ghz / 1e3, median(r0) / ghz / 1e3, median(e1) / ghz / 1e3);
      }
    }
  }
  return 0;
}

// The process-wide kernel switches (kernels.h) and the device facts the
// launchers size their grids by (launch.cuh).
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels {
namespace {
std::atomic<bool> g_pdl{false};
std::atomic<int> g_attention_threads{0};
std::atomic<bool> g_attention_stage_v{true};
std::atomic<bool> g_attention_fit_batch{true};
std::atomic<bool> g_attention_fixed_shape{true};
std::atomic<int> g_matvec_schedule{-1};
std::atomic<int> g_matvec_lanes{0};
std::atomic<bool> g_matvec_preload{true};
std::atomic<bool> g_matvec_two_types{true};
}  // namespace

bool pdl_enabled() { return g_pdl.load(std::memory_order_relaxed); }
void set_pdl(bool on) { g_pdl.store(on, std::memory_order_relaxed); }
int attention_threads() { return g_attention_threads.load(std::memory_order_relaxed); }
void set_attention_threads(int threads) {
  g_attention_threads.store(threads == 256 || threads == 512 ? threads : 0, std::memory_order_relaxed);
}
void set_attention_stage_v(bool on) { g_attention_stage_v.store(on, std::memory_order_relaxed); }
bool attention_stage_v() { return g_attention_stage_v.load(std::memory_order_relaxed); }
void set_attention_fit_batch(bool on) { g_attention_fit_batch.store(on, std::memory_order_relaxed); }
bool attention_fit_batch() { return g_attention_fit_batch.load(std::memory_order_relaxed); }
void set_attention_fixed_shape(bool on) { g_attention_fixed_shape.store(on, std::memory_order_relaxed); }
bool attention_fixed_shape() { return g_attention_fixed_shape.load(std::memory_order_relaxed); }
int matvec_schedule() { return g_matvec_schedule.load(std::memory_order_relaxed); }
void set_matvec_schedule(int s) { g_matvec_schedule.store(s, std::memory_order_relaxed); }
int matvec_lanes() { return g_matvec_lanes.load(std::memory_order_relaxed); }
void set_matvec_lanes(int lanes) { g_matvec_lanes.store(lanes, std::memory_order_relaxed); }
bool matvec_preload() { return g_matvec_preload.load(std::memory_order_relaxed); }
void set_matvec_preload(bool on) { g_matvec_preload.store(on, std::memory_order_relaxed); }
bool matvec_two_types() { return g_matvec_two_types.load(std::memory_order_relaxed); }
void set_matvec_two_types(bool on) { g_matvec_two_types.store(on, std::memory_order_relaxed); }

cudaError_t set_phase_probe(unsigned long long* buf) {
  if (!kPhaseProbes) return cudaErrorNotSupported;
  const cudaError_t st = set_attention_probe(buf);
  if (st != cudaSuccess) return st;
  const cudaError_t st2 = set_norm_probe(buf != nullptr ? buf + kPhaseProbeFields : nullptr);
  if (st2 != cudaSuccess) return st2;
  const cudaError_t st3 = set_gate_up_probe(buf != nullptr ? buf + 2 * kPhaseProbeFields : nullptr);
  if (st3 != cudaSuccess) return st3;
  return set_sample_probe(buf != nullptr ? buf + 3 * kPhaseProbeFields : nullptr);
}

DeviceLimits device_limits() {
  static const DeviceLimits limits = [] {
    DeviceLimits l;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&l.sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&l.max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&l.cc_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      l = DeviceLimits{};
    }
    return l;
  }();
  return limits;
}

cudaError_t allow_dynamic_smem(const void* kernel, size_t smem) {
  static std::mutex mu;
  static std::map<const void*, size_t> allowed;
  const std::lock_guard<std::mutex> lock(mu);
  size_t& have = allowed[kernel];
  if (smem <= have) return cudaSuccess;
  cudaFuncAttributes attr{};
  cudaError_t st = cudaFuncGetAttributes(&attr, kernel);
  if (st == cudaSuccess && attr.sharedSizeBytes + smem > size_t{48} << 10) {
    st = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  }
  if (st == cudaSuccess) have = smem;
  return st;
}

int blocks_per_sm(const void* kernel, int threads, size_t smem, int opt_in) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, size_t>, int> cache;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(kernel, threads, smem);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  int n = 0;
  if ((opt_in > 0 && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, opt_in) != cudaSuccess) ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess) {
    (void)cudaGetLastError();  // not left for the next launch's check
    n = 0;
  }
  cache[key] = n;
  return n;
}

}  // namespace minfer::kernels

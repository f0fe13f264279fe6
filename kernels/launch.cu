// The process-wide kernel switches (kernels.h) and the device facts the
// launchers size their grids by (kernels.h: device_limits; launch.cuh).
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

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
std::atomic<int> g_attention_split_blocks{0};
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
void set_attention_split_blocks(int blocks) { g_attention_split_blocks.store(std::max(0, blocks), std::memory_order_relaxed); }
int attention_split_blocks() { return g_attention_split_blocks.load(std::memory_order_relaxed); }
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

namespace {
// What the device has, then the shape's smaller figures (kernels.h).
DeviceLimits shaped(DeviceLimits l) {
  const std::optional<DeviceShape>& shape = device_shape(nullptr);
  if (!shape) return l;
  auto cap = [](int& have, int want) {
    if (want > 0 && (have == 0 || want < have)) have = want;
  };
  cap(l.sms, shape->sms);
  cap(l.max_smem, shape->smem_per_block);
  cap(l.smem_per_sm, shape->smem_per_sm);
  cap(l.threads_per_sm, shape->threads_per_sm);
  cap(l.blocks_per_sm, shape->blocks_per_sm);
  if (shape->cc_major > 0 && std::pair(shape->cc_major, shape->cc_minor) < std::pair(l.cc_major, l.cc_minor)) {
    l.cc_major = shape->cc_major;
    l.cc_minor = shape->cc_minor;
  }
  l.shaped = true;
  return l;
}
}  // namespace

DeviceLimits device_limits() {
  static const DeviceLimits limits = [] {
    DeviceLimits l;
    int dev = 0;
    const std::pair<cudaDeviceAttr, int*> attrs[] = {
        {cudaDevAttrMultiProcessorCount, &l.sms},
        {cudaDevAttrMaxSharedMemoryPerBlockOptin, &l.max_smem},
        {cudaDevAttrComputeCapabilityMajor, &l.cc_major},
        {cudaDevAttrComputeCapabilityMinor, &l.cc_minor},
        {cudaDevAttrMaxSharedMemoryPerMultiprocessor, &l.smem_per_sm},
        {cudaDevAttrMaxThreadsPerMultiProcessor, &l.threads_per_sm},
        {cudaDevAttrMaxBlocksPerMultiprocessor, &l.blocks_per_sm},
    };
    bool ok = cudaGetDevice(&dev) == cudaSuccess;
    for (const auto& [attr, value] : attrs) ok = ok && cudaDeviceGetAttribute(value, attr, dev) == cudaSuccess;
    if (!ok) {
      (void)cudaGetLastError();
      return DeviceLimits{};
    }
    // What the kernels' code can do: a build without this device's own
    // (compute_87 PTX, JIT-compiled for an sm_90 device) has none of sm_90's
    // device paths — PDL waits, bulk copies — whatever the device is.
    if (const int ptx = kernels_ptx_arch(); ptx > 0 && ptx < 10 * l.cc_major + l.cc_minor) {
      l.cc_major = ptx / 10;
      l.cc_minor = ptx % 10;
    }
    return shaped(l);
  }();
  return limits;
}

namespace {
// The shared memory an sm_80 / sm_90 SM keeps for the system a block.
constexpr size_t kSmemReservedPerBlock = 1024;
__global__ void ptx_arch_probe_kernel() {}
}  // namespace

int kernels_ptx_arch() {
  static const int arch = [] {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, ptx_arch_probe_kernel) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return attr.ptxVersion;
  }();
  return arch;
}

int empty_kernel_blocks_per_sm(int threads, size_t smem) {
  const void* kernel = reinterpret_cast<const void*>(ptx_arch_probe_kernel);
  return blocks_per_sm(kernel, threads, smem, smem > (size_t{48} << 10) ? static_cast<int>(smem) : 0);
}

cudaError_t allow_dynamic_smem(const void* kernel, size_t smem) {
  static std::mutex mu;
  static std::map<const void*, size_t> allowed;
  const std::lock_guard<std::mutex> lock(mu);
  size_t& have = allowed[kernel];
  if (smem <= have) return cudaSuccess;
  cudaFuncAttributes attr{};
  cudaError_t st = cudaFuncGetAttributes(&attr, kernel);
  const DeviceLimits lim = device_limits();
  if (st == cudaSuccess && lim.shaped && attr.sharedSizeBytes + smem > static_cast<size_t>(lim.max_smem)) {
    return cudaErrorInvalidValue;  // what the shape's device answers
  }
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
  // A shaped device's SM: its threads, blocks and shared memory (registers
  // are 64 K an SM on both).
  if (const DeviceLimits lim = device_limits(); lim.shaped && n > 0) {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    } else {
      const size_t block_smem = attr.sharedSizeBytes + smem;
      n = std::min({n, lim.threads_per_sm / std::max(threads, 1), lim.blocks_per_sm});
      n = std::min(n, static_cast<int>(static_cast<size_t>(lim.smem_per_sm) / (block_smem + kSmemReservedPerBlock)));
      if (block_smem > static_cast<size_t>(lim.max_smem)) n = 0;
    }
  }
  cache[key] = n;
  return n;
}

}  // namespace minfer::kernels

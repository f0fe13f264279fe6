#include "engine/backend/cuda/cuda_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "platform/log.h"

namespace minfer::cuda {

Error make_error(cudaError_t status, const char* call, const char* file, int line) {
  int device = -1;
  cudaGetDevice(&device);
  const ErrorCode code = status == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kDevice;
  return Error(code, fmt::format("CUDA error {} ({}) in {} on device {} at {}:{}", cudaGetErrorName(status),
                                 cudaGetErrorString(status), call, device, file, line));
}

bool is_sticky(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
    case cudaErrorDevicesUnavailable:
    case cudaErrorAssert:
      return true;
    default:
      return false;
  }
}

std::string DeviceFacts::describe() const {
  std::string shaped;
  if (!shape.empty()) {
    shaped = fmt::format(" shaped as {} ({} KiB of shared memory a block, kernels from compute_{})", shape,
                         shared_per_block_optin / 1024, kernels_ptx_arch);
  }
  return fmt::format("{}{} (sm_{}{}, {} SMs, {:.1f} GiB, {})", name, shaped, cc_major, cc_minor, sm_count,
                     static_cast<double>(total_memory) / (1024.0 * 1024.0 * 1024.0),
                     integrated ? "integrated memory" : "discrete memory");
}

namespace {

// MINFER_DEVICE_SHAPE on the facts: the figures the kernels go by
// (kernels::device_limits), or why the shape cannot be run.
Status apply_shape(const cudaDeviceProp& p, DeviceFacts* f) {
  std::string error;
  const std::optional<kernels::DeviceShape>& shape = kernels::device_shape(&error);
  if (!error.empty()) return unexpected(ErrorCode::kInvalidArgument, "MINFER_DEVICE_SHAPE: " + error);
  if (!shape) return ok_status();
  // A shape is a smaller device: every figure it gives at most the device's,
  // and its kernels' architecture no newer (the driver compiles PTX forward).
  const std::pair<const char*, std::pair<long long, long long>> asks[] = {
      {"sms", {shape->sms, p.multiProcessorCount}},
      {"smem_per_block", {shape->smem_per_block, static_cast<long long>(p.sharedMemPerBlockOptin)}},
      {"smem_per_sm", {shape->smem_per_sm, static_cast<long long>(p.sharedMemPerMultiprocessor)}},
      {"threads_per_sm", {shape->threads_per_sm, p.maxThreadsPerMultiProcessor}},
      {"blocks_per_sm", {shape->blocks_per_sm, p.maxBlocksPerMultiProcessor}},
      {"cc", {10LL * shape->cc_major + shape->cc_minor, 10LL * p.major + p.minor}},
  };
  for (const auto& [key, v] : asks) {
    if (v.first > v.second) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("MINFER_DEVICE_SHAPE '{}' asks for {} {}; {} has {}: a shape can only be smaller "
                                    "than the device",
                                    shape->name, key, v.first, p.name, v.second));
    }
  }
  const kernels::DeviceLimits lim = kernels::device_limits();
  f->shape = shape->name;
  f->sm_count = lim.sms;
  f->cc_major = lim.cc_major;
  f->cc_minor = lim.cc_minor;
  f->shared_per_block_optin = static_cast<size_t>(lim.max_smem);
  f->kernels_ptx_arch = kernels::kernels_ptx_arch();
  if (f->kernels_ptx_arch > 10 * f->cc_major + f->cc_minor) {
    log::warn("MINFER_DEVICE_SHAPE '{}': the kernels came from compute_{}, so their code is this device's, not "
              "sm_{}{}'s; only the launch shapes are the shape's (build with CMAKE_CUDA_ARCHITECTURES={}{}-virtual "
              "for its code too)",
              shape->name, f->kernels_ptx_arch, f->cc_major, f->cc_minor, f->cc_major, f->cc_minor);
  }
  return ok_status();
}

}  // namespace

Expected<DeviceFacts> probe_device() {
  int count = 0;
  const cudaError_t st = cudaGetDeviceCount(&count);
  if (st != cudaSuccess) {
    return unexpected(ErrorCode::kDevice, fmt::format("no usable CUDA device: cudaGetDeviceCount: {} ({})",
                                                      cudaGetErrorName(st), cudaGetErrorString(st)));
  }
  if (count == 0) return unexpected(ErrorCode::kDevice, "no CUDA device found");
  DeviceFacts f;
  cudaDeviceProp p{};
  CUDA_TRY(cudaGetDeviceProperties(&p, 0));
  CUDA_TRY(cudaSetDevice(0));
  f.device = 0;
  f.name = p.name;
  f.sm_count = p.multiProcessorCount;
  f.cc_major = p.major;
  f.cc_minor = p.minor;
  f.total_memory = p.totalGlobalMem;
  f.shared_per_block_optin = p.sharedMemPerBlockOptin;
  f.l2_bytes = static_cast<size_t>(p.l2CacheSize);
  f.integrated = p.integrated != 0;
  MINFER_TRY(apply_shape(p, &f));
  if (f.cc_major < 8) {
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("CUDA device {} has compute capability {}.{}; minfer's kernels need 8.0 or newer "
                                  "(mma.sync f16, dp4a)",
                                  f.name, f.cc_major, f.cc_minor));
  }
  return f;
}

Expected<double> measure_copy_bandwidth_gbps() {
  MINFER_ASSIGN_OR_RETURN(DeviceFacts facts, probe_device());
  const size_t bytes = std::min<size_t>(size_t{2} << 30, facts.total_memory / 8);
  void* a = nullptr;
  void* b = nullptr;
  CUDA_TRY(cudaMalloc(&a, bytes));
  if (cudaMalloc(&b, bytes) != cudaSuccess) {
    cudaFree(a);
    return unexpected(ErrorCode::kOutOfMemory, fmt::format("cannot allocate {} bytes for the copy benchmark", bytes));
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemset(a, 1, bytes);
  std::vector<float> ms;
  for (int i = 0; i < 11; ++i) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);  // a benchmark, not the serving path
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    if (i > 0) ms.push_back(t);
  }
  const cudaError_t st = cudaGetLastError();
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  if (st != cudaSuccess) return make_error(st, "copy bandwidth benchmark", __FILE__, __LINE__);
  std::sort(ms.begin(), ms.end());
  const double median_ms = ms[ms.size() / 2];
  return 2.0 * static_cast<double>(bytes) / (median_ms * 1e-3) / 1e9;
}

}  // namespace minfer::cuda

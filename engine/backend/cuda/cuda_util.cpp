#include "engine/backend/cuda/cuda_util.h"

#include <fmt/format.h>

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
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB, {})", name, cc_major, cc_minor, sm_count,
                     static_cast<double>(total_memory) / (1024.0 * 1024.0 * 1024.0),
                     integrated ? "integrated memory" : "discrete memory");
}

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
  if (f.cc_major < 8) {
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("CUDA device {} has compute capability {}.{}; minfer's kernels need 8.0 or newer "
                                  "(mma.sync f16, dp4a)",
                                  f.name, f.cc_major, f.cc_minor));
  }
  return f;
}

}  // namespace minfer::cuda

// CUDA status → Error, and the device's facts. Every CUDA and cuBLAS call in
// the backend goes through CUDA_TRY / check(), so a failure names the call,
// the device and the source location (STYLE.md §4).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "engine/common/expected.h"

namespace minfer::cuda {

Error make_error(cudaError_t status, const char* call, const char* file, int line);
inline Status check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return ok_status();
  return make_error(status, call, file, line);
}

// True for errors that leave the context unusable (the engine is wedged).
bool is_sticky(cudaError_t status);

struct DeviceFacts {
  int device = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t total_memory = 0;
  size_t shared_per_block_optin = 0;
  size_t l2_bytes = 0;
  bool integrated = false;  // Jetson: GPU and CPU share DRAM
  // Shaped as a smaller device (MINFER_DEVICE_SHAPE, kernels.h): the
  // shape's name, and the virtual architecture its kernels came from (87,
  // 90). Empty / 0 otherwise.
  std::string shape;
  int kernels_ptx_arch = 0;
  std::string describe() const;
};

// The first usable device, or why there is none. With MINFER_DEVICE_SHAPE,
// the device as the shape has it (the figures the kernels go by,
// kernels::device_limits); a shape that does not parse, or asks for more
// than the device has, is an error naming the setting.
Expected<DeviceFacts> probe_device();

// Device-to-device cudaMemcpy of 2 GiB, bytes read + written per second
// (median of 10 after a warm-up), in GB/s.
Expected<double> measure_copy_bandwidth_gbps();

}  // namespace minfer::cuda

#define CUDA_TRY(call) MINFER_TRY(::minfer::cuda::check((call), #call, __FILE__, __LINE__))

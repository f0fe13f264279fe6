// Helpers for the GPU suites: skip with a visible reason where no device is
// usable (CI), device buffers, seeded random data.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace minfer::test {

// Empty when a device works, else why not.
inline std::string gpu_unavailable_reason() {
  int n = 0;
  const cudaError_t st = cudaGetDeviceCount(&n);
  if (st != cudaSuccess) return std::string("no usable CUDA device (") + cudaGetErrorName(st) + ")";
  if (n == 0) return "no CUDA device";
  return {};
}

// A MINFER_DEVICE_SHAPE that does not parse fails the test: the suites
// would otherwise run as the device and say nothing.
#define MINFER_REQUIRE_GPU()                                                     \
  do {                                                                           \
    const std::string minfer_gpu_why_ = ::minfer::test::gpu_unavailable_reason(); \
    if (!minfer_gpu_why_.empty()) GTEST_SKIP() << "GPU test skipped: " << minfer_gpu_why_; \
    std::string minfer_shape_error_;                                             \
    ::minfer::kernels::device_shape(&minfer_shape_error_);                       \
    ASSERT_TRUE(minfer_shape_error_.empty()) << "MINFER_DEVICE_SHAPE: " << minfer_shape_error_; \
  } while (0)

// Skips the test unless the device's compute capability, as the kernels see
// it (a MINFER_DEVICE_SHAPE's), is at least `major` (what needs it: a
// string), saying which device it has.
#define MINFER_REQUIRE_SM(major, what)                                                            \
  do {                                                                                            \
    const int minfer_major_ = ::minfer::kernels::device_limits().cc_major;                        \
    ASSERT_GT(minfer_major_, 0) << "the device's compute capability is unknown";                  \
    if (minfer_major_ < (major)) GTEST_SKIP() << "needs sm_" << (major) << "0 (" << (what) << "); this device is sm_" << minfer_major_ << "x"; \
  } while (0)
// sm_90: the streamed matvec's bulk copies.
#define MINFER_REQUIRE_SM90() MINFER_REQUIRE_SM(9, "bulk copies")

#define CUDA_ASSERT(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

// A device buffer that frees itself.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n = 0) { resize(n); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void resize(size_t n) {
    cudaFree(p_);
    p_ = nullptr;
    n_ = n;
    if (n) cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T));
  }
  void upload(const std::vector<T>& v) {
    if (v.size() != n_) resize(v.size());
    cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    cudaDeviceSynchronize();  // tests only: the serving path never does this
    cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  // Fills with a byte pattern so unwritten outputs show (NaN for floats).
  void poison() { cudaMemset(p_, 0xFF, n_ * sizeof(T)); }
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// max |a - b| / max |b|, with the first index where |a - b| is largest.
struct Diff {
  double rel = 0;
  size_t worst = 0;
  double a = 0, b = 0;
};
inline Diff compare(const float* a, const float* b, size_t n) {
  Diff d;
  double max_ref = 0, max_err = -1;
  for (size_t i = 0; i < n; ++i) {
    max_ref = std::max(max_ref, std::abs(static_cast<double>(b[i])));
    const double e = std::isnan(a[i]) ? 1e30 : std::abs(static_cast<double>(a[i]) - b[i]);
    if (e > max_err) {
      max_err = e;
      d.worst = i;
      d.a = a[i];
      d.b = b[i];
    }
  }
  d.rel = max_ref > 0 ? max_err / max_ref : max_err;
  return d;
}

// The same bits, or a failure naming the first element that differs.
inline void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << ": element " << i << " of " << want.size() << " is " << got[i] << ", want " << want[i];
      return;
    }
  }
}

}  // namespace minfer::test

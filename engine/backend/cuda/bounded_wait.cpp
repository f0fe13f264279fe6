#include "engine/backend/cuda/bounded_wait.h"

#include <fmt/format.h>

#include <thread>

#include "engine/backend/cuda/cuda_util.h"

namespace minfer::cuda {

Status wait_bounded(cudaStream_t stream, cudaEvent_t event, std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  CUDA_TRY(cudaEventRecord(event, stream));
  const auto start = Clock::now();
  for (int polls = 0;; ++polls) {
    const cudaError_t st = cudaEventQuery(event);
    if (st == cudaSuccess) return ok_status();
    if (st != cudaErrorNotReady) return make_error(st, "cudaEventQuery (bounded wait)", __FILE__, __LINE__);
    const auto now = Clock::now();
    if (now >= deadline) {
      const double waited_ms = std::chrono::duration<double, std::milli>(now - start).count();
      return unexpected(ErrorCode::kTimeout,
                        fmt::format("GPU work did not complete within its deadline ({:.0f} ms waited)", waited_ms));
    }
    // Spin for the first ~100 µs (a decode step completes in about that),
    // then yield, then sleep in short slices.
    if (polls < 200) continue;
    if (polls < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace minfer::cuda

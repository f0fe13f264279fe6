#include "engine/backend/cuda/buffer_pool.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "engine/backend/cuda/cuda_util.h"

namespace minfer::cuda {

BufferPool::~BufferPool() {
  for (auto& [size, p] : free_) cudaFree(p);
  for (auto& [p, size] : in_use_) cudaFree(p);
}

Expected<void*> BufferPool::acquire(size_t bytes) {
  if (bytes == 0) bytes = 256;  // a valid, distinct pointer for empty buffers
  auto it = free_.find(bytes);
  if (it != free_.end()) {
    void* p = it->second;
    free_.erase(it);
    in_use_[p] = bytes;
    return p;
  }
  void* p = nullptr;
  const cudaError_t st = fail_next_ ? cudaErrorMemoryAllocation : cudaMalloc(&p, bytes);
  fail_next_ = false;
  if (st != cudaSuccess) {
    cudaGetLastError();  // allocation failures are not sticky; clear them
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return unexpected(ErrorCode::kOutOfMemory,
                      fmt::format("cudaMalloc of {} bytes failed ({}); device has {} of {} bytes free, the pool holds {}",
                                  bytes, cudaGetErrorName(st), free_bytes, total_bytes, bytes_allocated_));
  }
  ++generation_;
  bytes_allocated_ += bytes;
  in_use_[p] = bytes;
  return p;
}

void BufferPool::release(void* ptr) {
  auto it = in_use_.find(ptr);
  if (it == in_use_.end()) return;
  free_.emplace(it->second, ptr);
  in_use_.erase(it);
}

}  // namespace minfer::cuda

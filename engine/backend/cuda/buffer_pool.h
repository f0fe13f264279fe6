// Device memory for activations and scratch: buffers are recycled by exact
// size, and every cudaMalloc bumps the pool generation. A captured CUDA graph
// records buffer addresses; the backend compares generations and re-captures
// when any buffer was (re)allocated since the capture (ARCHITECTURE.md rule 5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "engine/common/expected.h"

namespace minfer::cuda {

class BufferPool {
 public:
  BufferPool() = default;
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of exactly `bytes`: a released one of that size, else a new
  // allocation (an error naming the size when the device is out of memory).
  Expected<void*> acquire(size_t bytes);
  void release(void* ptr);

  uint64_t generation() const { return generation_; }
  size_t bytes_allocated() const { return bytes_allocated_; }
  // Test hook: the next allocation fails as if cudaMalloc had (error contract tests).
  void fail_next_allocation() { fail_next_ = true; }

 private:
  std::multimap<size_t, void*> free_;
  std::map<void*, size_t> in_use_;
  uint64_t generation_ = 0;
  size_t bytes_allocated_ = 0;
  bool fail_next_ = false;
};

}  // namespace minfer::cuda

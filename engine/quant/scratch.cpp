// Thread-local scratch for the gemm kernels (activation summaries, repacked
// weight panels). Kept in a plain TU: a std::vector instantiated in an
// AVX-512 TU could be the copy the linker keeps for everyone, and then crash
// on a CPU without AVX-512 (the ODR hazard of per-file ISA flags).
#include <cstdlib>
#include <new>

#include "engine/quant/kernels.h"

namespace minfer::quant {
namespace {

struct Slot {
  void* data = nullptr;
  size_t size = 0;
  ~Slot() { std::free(data); }
};

}  // namespace

void* scratch(int slot, size_t bytes) {
  thread_local Slot slots[2];
  Slot& s = slots[slot];
  if (s.size < bytes) {
    std::free(s.data);
    const size_t size = (bytes + 63) / 64 * 64 + 64;  // + 64: kernels may read one vector past the end
    s.data = std::aligned_alloc(64, size);
    if (s.data == nullptr) throw std::bad_alloc();
    s.size = size - 64;
  }
  return s.data;
}

}  // namespace minfer::quant

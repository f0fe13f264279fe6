// The per-ISA kernel tables behind quant.h: each instruction set fills one
// table with its gemm per weight type and its activation quantizers, and
// quant.cpp calls through the table of the active ISA. Internal to
// engine/quant.
//
// Each SIMD table lives in its own .cpp compiled with that ISA's flags; the
// getters below are defined there and return nullptr-free tables only when
// the build compiled them (MINFER_QUANT_X86 / MINFER_QUANT_NEON).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/quant/dtype.h"
#include "engine/quant/quant.h"

namespace minfer::quant {

// Weight types with kernels, in table order.
inline constexpr DType kWeightTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,
                                         DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                                         DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
inline constexpr int kNumWeightTypes = sizeof(kWeightTypes) / sizeof(kWeightTypes[0]);

// Index of `t` in kWeightTypes, or -1.
constexpr int weight_slot(DType t) {
  for (int i = 0; i < kNumWeightTypes; ++i) {
    if (kWeightTypes[i] == t) return i;
  }
  return -1;
}

// Same contract as quant::gemm for one weight type.
using GemmFn = void (*)(const void* w, size_t w_stride, int64_t n_rows, const void* x, size_t x_stride,
                        int64_t n_cols, int64_t k, float* y, int64_t ldy);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);

struct KernelTable {
  GemmFn gemm[kNumWeightTypes];
  // Activation quantizers, bit-identical to ref::quantize_row.
  QuantizeFn quantize_q8_0;
  QuantizeFn quantize_q8_1;
  QuantizeFn quantize_q8_k;
};

const KernelTable& kernels_scalar();
#if defined(MINFER_QUANT_X86)
const KernelTable& kernels_avx2();
const KernelTable& kernels_avx512();
#endif
#if defined(MINFER_QUANT_NEON)
const KernelTable& kernels_neon();
#endif

// Thread-local, 64-byte aligned scratch that grows and is never returned
// (one per slot and thread; kernels run on the CPU backend's worker threads).
// Defined in scratch.cpp, a plain TU, so that no ISA-flagged code owns it.
void* scratch(int slot, size_t bytes);
inline constexpr int kScratchActivations = 0;
inline constexpr int kScratchPanel = 1;

}  // namespace minfer::quant

// x86: the kernel table of one vector ISA, `V` (Avx2Vec or Avx512Vec, each
// defined in its kernels_<isa>.cpp). Everything here is instantiated per TU.
#pragma once

#include "engine/quant/kernels.h"
#include "engine/quant/x86/gemm_float.h"
#include "engine/quant/x86/gemm_quant.h"
#include "engine/quant/x86/quantize_act.h"
#include "engine/quant/x86/unpack.h"

namespace minfer::quant::x86 {
namespace {

template <class V>
KernelTable make_table() {
  using Q8_0 = FormatQ8_0<V::kUnsignedQ8_0>;
  KernelTable t{};
  t.gemm[weight_slot(DType::kF32)] = gemm_float<V, WeightF32>;
  t.gemm[weight_slot(DType::kF16)] = gemm_float<V, WeightF16>;
  t.gemm[weight_slot(DType::kBF16)] = gemm_float<V, WeightBF16>;
  t.gemm[weight_slot(DType::kQ4_0)] = gemm_quant<V, Format<DType::kQ4_0>>;
  t.gemm[weight_slot(DType::kQ4_1)] = gemm_quant<V, Format<DType::kQ4_1>>;
  t.gemm[weight_slot(DType::kQ5_0)] = gemm_quant<V, Format<DType::kQ5_0>>;
  t.gemm[weight_slot(DType::kQ5_1)] = gemm_quant<V, Format<DType::kQ5_1>>;
  t.gemm[weight_slot(DType::kQ8_0)] = gemm_quant<V, Q8_0>;
  t.gemm[weight_slot(DType::kQ4_K)] = gemm_quant<V, Format<DType::kQ4_K>>;
  t.gemm[weight_slot(DType::kQ5_K)] = gemm_quant<V, Format<DType::kQ5_K>>;
  t.gemm[weight_slot(DType::kQ6_K)] = gemm_quant<V, Format<DType::kQ6_K>>;
  t.quantize_q8_0 = quantize_q8_0;
  t.quantize_q8_1 = quantize_q8_1;
  t.quantize_q8_k = quantize_q8_k;
  return t;
}

}  // namespace
}  // namespace minfer::quant::x86

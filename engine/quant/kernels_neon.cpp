// The `neon` ISA (aarch64 AdvSIMD + ARMv8.2 dot product: Cortex-A76/A78,
// Jetson Orin): sdot on signed codes, 4 x 4 register tiles, FCVT for f16.
// Compiled with -march=armv8.2-a+dotprod only (engine/quant/CMakeLists.txt);
// isa.cpp selects it when HWCAP reports ASIMDDP.
#include "engine/quant/kernels.h"
#include "engine/quant/neon/gemm_float.h"
#include "engine/quant/neon/gemm_quant.h"
#include "engine/quant/neon/quantize_act.h"
#include "engine/quant/neon/unpack.h"

namespace minfer::quant {
namespace {

KernelTable make_table() {
  KernelTable t{};
  t.gemm[weight_slot(DType::kF32)] = neon::gemm_float<neon::WeightF32>;
  t.gemm[weight_slot(DType::kF16)] = neon::gemm_float<neon::WeightF16>;
  t.gemm[weight_slot(DType::kBF16)] = neon::gemm_float<neon::WeightBF16>;
  t.gemm[weight_slot(DType::kQ4_0)] = neon::gemm_quant<neon::Format<DType::kQ4_0>>;
  t.gemm[weight_slot(DType::kQ4_1)] = neon::gemm_quant<neon::Format<DType::kQ4_1>>;
  t.gemm[weight_slot(DType::kQ5_0)] = neon::gemm_quant<neon::Format<DType::kQ5_0>>;
  t.gemm[weight_slot(DType::kQ5_1)] = neon::gemm_quant<neon::Format<DType::kQ5_1>>;
  t.gemm[weight_slot(DType::kQ8_0)] = neon::gemm_quant<neon::Format<DType::kQ8_0>>;
  t.gemm[weight_slot(DType::kQ4_K)] = neon::gemm_quant<neon::Format<DType::kQ4_K>>;
  t.gemm[weight_slot(DType::kQ5_K)] = neon::gemm_quant<neon::Format<DType::kQ5_K>>;
  t.gemm[weight_slot(DType::kQ6_K)] = neon::gemm_quant<neon::Format<DType::kQ6_K>>;
  t.quantize_q8_0 = neon::quantize_q8_0;
  t.quantize_q8_1 = neon::quantize_q8_1;
  t.quantize_q8_k = neon::quantize_q8_k;
  return t;
}

}  // namespace

const KernelTable& kernels_neon() {
  static const KernelTable kTable = make_table();
  return kTable;
}

}  // namespace minfer::quant

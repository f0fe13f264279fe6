// The public entry points of quant.h: argument checks, then a call into the
// scalar reference or the kernel table of the active ISA.
#include "engine/quant/quant.h"

#include <cstdio>
#include <cstdlib>

#include "engine/quant/kernels.h"
#include "engine/quant/reference.h"

namespace minfer::quant {
namespace {

// A caller passed a row length or type that breaks the contract: the kernels
// would read or write out of bounds, so stop here with the values.
[[noreturn]] void contract_violation(const char* fn, DType t, int64_t n, const char* what) {
  std::fprintf(stderr, "minfer: fatal: quant::%s(type %.*s, n=%lld): %s\n", fn,
               static_cast<int>(dtype_name(t).size()), dtype_name(t).data(), static_cast<long long>(n), what);
  std::abort();
}

bool is_row_type(DType t) {
  return is_weight_type(t) || t == DType::kQ8_1 || t == DType::kQ8_K;
}

void check_row(const char* fn, DType t, int64_t n) {
  if (!is_row_type(t)) contract_violation(fn, t, n, "type has no conversion");
  if (n < 0 || !row_size_ok(t, static_cast<uint64_t>(n))) {
    contract_violation(fn, t, n, "n is not a multiple of the block size");
  }
}

const KernelTable& table(Isa isa) {
  switch (isa) {
#if defined(MINFER_QUANT_X86)
    case Isa::kAvx2: return kernels_avx2();
    case Isa::kAvx512: return kernels_avx512();
#endif
#if defined(MINFER_QUANT_NEON)
    case Isa::kNeon: return kernels_neon();
#endif
    default: return kernels_scalar();
  }
}

}  // namespace

bool is_weight_type(DType t) { return weight_slot(t) >= 0; }

DType vec_dot_type(DType t) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0: return DType::kQ8_0;
    case DType::kQ4_1:
    case DType::kQ5_1: return DType::kQ8_1;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return DType::kQ8_K;
    default: return DType::kF32;  // F32, F16, BF16 (and, meaninglessly, the rest)
  }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  check_row("dequantize_row", t, n);
  ref::dequantize_row(t, src, dst, n);
}

void quantize_row_ref(DType t, const float* src, void* dst, int64_t n) {
  check_row("quantize_row_ref", t, n);
  ref::quantize_row(t, src, dst, n);
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  check_row("quantize_row", t, n);
  const KernelTable& k = table(active_isa());
  switch (t) {
    case DType::kQ8_0: k.quantize_q8_0(src, dst, n); return;
    case DType::kQ8_1: k.quantize_q8_1(src, dst, n); return;
    case DType::kQ8_K: k.quantize_q8_k(src, dst, n); return;
    default: ref::quantize_row(t, src, dst, n); return;
  }
}

float vec_dot_ref(DType wt, const void* w_row, const void* act_row, int64_t n) {
  if (!is_weight_type(wt)) contract_violation("vec_dot_ref", wt, n, "not a weight type");
  check_row("vec_dot_ref", wt, n);
  return ref::vec_dot(wt, w_row, act_row, n);
}

float vec_dot(DType wt, const void* w_row, const void* act_row, int64_t n) {
  if (!is_weight_type(wt)) contract_violation("vec_dot", wt, n, "not a weight type");
  check_row("vec_dot", wt, n);
  float y = 0.f;
  table(active_isa()).gemm[weight_slot(wt)](w_row, 0, 1, act_row, 0, 1, n, &y, 1);
  return y;
}

void gemm(DType wt, const void* w, size_t w_stride, int64_t n_rows, const void* x, size_t x_stride,
          int64_t n_cols, int64_t k, float* y, int64_t ldy) {
  if (!is_weight_type(wt)) contract_violation("gemm", wt, k, "not a weight type");
  check_row("gemm", wt, k);
  if (n_rows <= 0 || n_cols <= 0) return;
  table(active_isa()).gemm[weight_slot(wt)](w, w_stride, n_rows, x, x_stride, n_cols, k, y, ldy);
}

}  // namespace minfer::quant

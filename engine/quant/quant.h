// Weight formats: dequantize, quantize, and the dot products the CPU backend
// is built on, for every DType minfer implements.
//
// Block layouts are byte-identical to ggml's (ggml-common.h), so that GGUF
// files people download load as they are. Each weight type has an activation
// type (vec_dot_type): a row of activations is quantized once to that type and
// then dotted with many weight rows.
//
//   weight               activation
//   F32, F16, BF16       F32
//   Q4_0, Q5_0, Q8_0     Q8_0
//   Q4_1, Q5_1           Q8_1
//   Q4_K, Q5_K, Q6_K     Q8_K
//
// Every kernel has a plain scalar version (the reference) and, chosen at run
// time where the CPU allows, AVX2 / AVX-512 (x86-64) or NEON (aarch64) ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/common/expected.h"
#include "engine/quant/dtype.h"

namespace minfer::quant {

// The instruction sets the kernels are written for, in increasing order.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3 };
std::string_view isa_name(Isa isa);
// Best ISA this CPU and build support.
Isa detected_isa();
// ISA in use; starts as detected_isa() (or MINFER_CPU_ISA=scalar|avx2|avx512|neon,
// capped at what the CPU has). Tests set it to compare paths.
Isa active_isa();
// Returns an error if the CPU or the build lacks `isa`.
Status set_active_isa(Isa isa);

// True for the weight types this module implements kernels for.
bool is_weight_type(DType t);
// Activation format that dot products with weights of type `t` consume.
DType vec_dot_type(DType t);

// Conversions of one row of n elements; n must be a multiple of the block size
// (a violation is a caller bug and aborts with the values). dequantize_row
// works for every weight and activation type; quantize_row too.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Round-to-nearest quantization with ggml's reference scale choices, so that
// quantize(dequantize(block)) reproduces the block (exactly for F16, BF16,
// the 32-element formats and Q4_K; ggml's Q5_K and Q6_K searches are not
// fixed points for a few blocks in a hundred, see tests/quant/quantize_test).
// The activation formats
// (Q8_0, Q8_1, Q8_K) use the active ISA's vector code, bit-identical to the
// reference; the weight formats are quantized by the reference (offline work).
void quantize_row(DType t, const float* src, void* dst, int64_t n);
// The scalar reference of quantize_row (independent of the active ISA).
void quantize_row_ref(DType t, const float* src, void* dst, int64_t n);

// Dot product of a weight row of type `wt` with an activation row already in
// vec_dot_type(wt). Uses the active ISA.
float vec_dot(DType wt, const void* w_row, const void* act_row, int64_t n);
// The scalar reference of the same (independent of the active ISA).
float vec_dot_ref(DType wt, const void* w_row, const void* act_row, int64_t n);

// A block of a matrix product, the CPU backend's inner loop (single-threaded;
// the backend splits rows between threads, and calls may run concurrently):
//   y[c * ldy + r] = dot(W row r, X row c)  for r < n_rows, c < n_cols
// W rows are `w_stride` bytes apart (type wt, k elements each); X rows are
// `x_stride` bytes apart and already in vec_dot_type(wt) as quantize_row
// writes it (Q8_K bsums must match its codes; Q8_1's s is used as stored).
// n_cols == 1 streams the weights once (decode); wider calls repack panels of
// 8/16 rows (x86) so that one multiply-add serves many rows and columns, and
// are worth batching: per-row speed grows with n_cols (bench/quant_bench).
// Every output is written; nothing outside y[c * ldy + r < n_rows] is.
void gemm(DType wt, const void* w, size_t w_stride, int64_t n_rows, const void* x, size_t x_stride,
          int64_t n_cols, int64_t k, float* y, int64_t ldy);

}  // namespace minfer::quant

// The scalar reference of every format: plain loops, no intrinsics, ggml's
// arithmetic in ggml's order. It is the spec the SIMD kernels are tested
// against, and the kernels of the `scalar` ISA. Internal to engine/quant.
#pragma once

#include <cstdint>

#include "engine/quant/dtype.h"

namespace minfer::quant::ref {

// Per-type row conversions; n is a multiple of the block size (checked by the
// public entry points in quant.cpp).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
void quantize_row(DType t, const float* src, void* dst, int64_t n);
// Dot product of a weight row of type `wt` with an activation row in
// vec_dot_type(wt). F32/F16/BF16 accumulate in double, the quantized types
// sum integer products per block as ggml does.
float vec_dot(DType wt, const void* w, const void* x, int64_t n);

// The K-quant quantizers (quantize_kquants.cpp), called by quantize_row.
void quantize_row_q4_k(const float* x, void* y, int64_t n);
void quantize_row_q5_k(const float* x, void* y, int64_t n);
void quantize_row_q6_k(const float* x, void* y, int64_t n);
void quantize_row_q8_k(const float* x, void* y, int64_t n);

// The value of largest magnitude, sign kept; the first one on ties (ggml's
// `if (ax > amax) { amax = ax; max = x[i]; }` scans). 0 for an all-zero x.
float signed_absmax(const float* x, int n);

// ggml's nearest_int: round half to even through the 1.5 * 2^23 trick, valid
// for |f| <= 2^22. SIMD code matches it with a round-to-nearest-even convert.
int nearest_int(float f);

}  // namespace minfer::quant::ref

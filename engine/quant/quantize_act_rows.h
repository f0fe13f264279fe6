// The row loops of the Q8_0 / Q8_1 activation quantizers, shared by the ISA
// files: each supplies its vector block quantizer (returns d, writes 32
// codes, sets their sum) and its f16 rounding. TU-local (anonymous
// namespace), since every ISA file compiles it with its own flags.
#pragma once

#include <cstdint>

#include "engine/quant/blocks.h"

namespace minfer::quant {
namespace {

using BlockQuantizer = float (*)(const float* x, int8_t* qs, int32_t* sum);
using F16Rounder = uint16_t (*)(float);

template <BlockQuantizer kBlock, F16Rounder kToF16>
void quantize_rows_q8_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int32_t sum;
    y[i].d = kToF16(kBlock(x + i * kQK, y[i].qs, &sum));
  }
}

template <BlockQuantizer kBlock, F16Rounder kToF16>
void quantize_rows_q8_1(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int32_t sum;
    const float d = kBlock(x + i * kQK, y[i].qs, &sum);
    y[i].d = kToF16(d);
    y[i].s = kToF16(static_cast<float>(sum) * d);  // s = d * sum, rounded once (as the reference)
  }
}

}  // namespace
}  // namespace minfer::quant

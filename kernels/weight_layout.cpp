// The plane layout (weight_layout.h): sizes and the host-side split of GGUF
// rows into planes. Block byte offsets are ggml's (ggml-common.h).
#include "kernels/weight_layout.h"

#include <cstring>

namespace minfer::kernels {
namespace {

bool is_wtype(uint32_t id) {
  switch (static_cast<WType>(id)) {
    case WType::kF32: case WType::kF16: case WType::kBF16: case WType::kQ8_0: case WType::kQ4_0:
    case WType::kQ4_1: case WType::kQ5_0: case WType::kQ5_1: case WType::kQ4_K: case WType::kQ5_K:
    case WType::kQ6_K:
      return true;
  }
  return false;
}

int64_t block_elems(WType t) {
  switch (t) {
    case WType::kF32: case WType::kF16: case WType::kBF16: return 1;
    case WType::kQ4_K: case WType::kQ5_K: case WType::kQ6_K: return 256;
    default: return 32;
  }
}

// Unit u's 32 bytes into a row's q plane with split halves.
void copy_split_unit(uint8_t* row_q, uint32_t u, uint32_t n_units, const uint8_t* unit) {
  std::memcpy(row_q + split_offset(u, 0, n_units), unit, 16);
  std::memcpy(row_q + split_offset(u, 16, n_units), unit + 16, 16);
}

}  // namespace

bool wtype_supported(uint32_t id, int64_t k) {
  if (!is_wtype(id) || k <= 0) return false;
  return k % block_elems(static_cast<WType>(id)) == 0;
}

void repack_rows(WType t, int64_t k, const uint8_t* src, size_t src_row_bytes, int64_t n_rows, uint8_t* q,
                 uint8_t* qh, uint8_t* meta, uint8_t* d) {
  const PlaneSizes p = plane_sizes(t, k);
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = src + static_cast<size_t>(r) * src_row_bytes;
    uint8_t* rq = q + static_cast<size_t>(r) * p.q_row;
    uint8_t* rqh = qh ? qh + static_cast<size_t>(r) * p.qh_row : nullptr;
    uint8_t* rmeta = meta ? meta + static_cast<size_t>(r) * p.meta_row : nullptr;
    uint8_t* rd = d ? d + static_cast<size_t>(r) * p.d_row : nullptr;
    switch (t) {
      case WType::kF32: case WType::kF16: case WType::kBF16:
        std::memcpy(rq, row, p.q_row);
        break;
      case WType::kQ8_0:  // {f16 d; int8 qs[32]} = 34 B; a unit is a block
        for (int64_t b = 0; b < k / 32; ++b) {
          std::memcpy(rmeta + b * 2, row + b * 34, 2);
          copy_split_unit(rq, static_cast<uint32_t>(b), static_cast<uint32_t>(k / 32), row + b * 34 + 2);
        }
        break;
      case WType::kQ4_0:  // {f16 d; u8 qs[16]} = 18 B
        for (int64_t b = 0; b < k / 32; ++b) {
          std::memcpy(rmeta + b * 2, row + b * 18, 2);
          std::memcpy(rq + b * 16, row + b * 18 + 2, 16);
        }
        break;
      case WType::kQ4_1:  // {f16 d, m; u8 qs[16]} = 20 B
        for (int64_t b = 0; b < k / 32; ++b) {
          std::memcpy(rmeta + b * 4, row + b * 20, 4);
          std::memcpy(rq + b * 16, row + b * 20 + 4, 16);
        }
        break;
      case WType::kQ5_0:  // {f16 d; u8 qh[4]; u8 qs[16]} = 22 B
        for (int64_t b = 0; b < k / 32; ++b) {
          std::memcpy(rmeta + b * 2, row + b * 22, 2);
          std::memcpy(rqh + b * 4, row + b * 22 + 2, 4);
          std::memcpy(rq + b * 16, row + b * 22 + 6, 16);
        }
        break;
      case WType::kQ5_1:  // {f16 d, m; u8 qh[4]; u8 qs[16]} = 24 B
        for (int64_t b = 0; b < k / 32; ++b) {
          std::memcpy(rmeta + b * 4, row + b * 24, 4);
          std::memcpy(rqh + b * 4, row + b * 24 + 4, 4);
          std::memcpy(rq + b * 16, row + b * 24 + 8, 16);
        }
        break;
      case WType::kQ4_K:  // {f16 d, dmin; u8 scales[12]; u8 qs[128]} = 144 B; units: qs in 4 parts
        for (int64_t b = 0; b < k / 256; ++b) {
          std::memcpy(rmeta + b * 16, row + b * 144, 16);
          for (int p4 = 0; p4 < 4; ++p4) {
            copy_split_unit(rq, static_cast<uint32_t>(4 * b + p4), static_cast<uint32_t>(k / 64), row + b * 144 + 16 + 32 * p4);
          }
        }
        break;
      case WType::kQ5_K:  // {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]} = 176 B
        for (int64_t b = 0; b < k / 256; ++b) {
          std::memcpy(rmeta + b * 16, row + b * 176, 16);
          std::memcpy(rqh + b * 32, row + b * 176 + 16, 32);
          for (int p4 = 0; p4 < 4; ++p4) {
            copy_split_unit(rq, static_cast<uint32_t>(4 * b + p4), static_cast<uint32_t>(k / 64), row + b * 176 + 48 + 32 * p4);
          }
        }
        break;
      case WType::kQ6_K:  // {u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d} = 210 B
        for (int64_t b = 0; b < k / 256; ++b) {
          std::memcpy(rq + b * 128, row + b * 210, 128);
          std::memcpy(rqh + b * 64, row + b * 210 + 128, 64);
          std::memcpy(rmeta + b * 16, row + b * 210 + 192, 16);
          std::memcpy(rd + b * 2, row + b * 210 + 208, 2);
        }
        break;
    }
  }
}

}  // namespace minfer::kernels

// How weights are laid out on the GPU. Plain C++ (no CUDA types), shared by
// the kernels and the host code that uploads weights.
//
// GGUF stores quantized rows as arrays of blocks (e.g. Q8_0: 2-byte scale +
// 32 int8, 34 bytes), which leaves the quants 2-byte aligned: no 16-byte
// loads. At upload each matrix is split into planes, each a contiguous
// [n_rows][plane_row_bytes] array, so that a warp reads a row's quants with
// 16-byte loads and its scales from a separate, aligned array. Element order
// inside a plane's row is ggml's order within each block (see
// engine/quant/blocks.h), so the dequantization formulas are ggml's.
//
//   type   q plane             qh plane          meta plane (per block)
//   F32    f32 [k]             -                 -
//   F16    f16 [k]             -                 -
//   BF16   bf16 [k]            -                 -
//   Q8_0   int8 [k]            -                 f16 d            [k/32]
//   Q4_0   nibbles [k/2]       -                 f16 d            [k/32]
//   Q4_1   nibbles [k/2]       -                 f16 d, m         [k/32]
//   Q5_0   nibbles [k/2]       u32 [k/32]        f16 d            [k/32]
//   Q5_1   nibbles [k/2]       u32 [k/32]        f16 d, m         [k/32]
//   Q4_K   nibbles [k/2]       -                 16 B: f16 d, dmin, scales[12]  [k/256]
//   Q5_K   nibbles [k/2]       u8 [k/8]          16 B: f16 d, dmin, scales[12]  [k/256]
//   Q6_K   ql [k/2]            u8 [k/4]          16 B: int8 scales[16] + f16 d in the d plane [k/256]
//
// Split halves (Q8_0, Q4_K, Q5_K: 32 bytes of the q plane a unit, one block
// or a quarter super-block): a row's units go in groups of 32, and a group
// stores the first 16 bytes of each of its units, then the last 16 of each
// (a last, partial group the same way over its own units). The decode dot
// products read a unit with two 16-byte loads by one lane, lane l unit l of
// the group: in unit order, each load instruction of a warp would take half
// of every 32-byte sector of 1 KB; split, it takes all of 16 sectors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

// plane_sizes is needed on both sides: the upload and the kernels' L2 prefetch.
#if defined(__CUDACC__)
#define MINFER_HOST_DEVICE __host__ __device__
#else
#define MINFER_HOST_DEVICE
#endif

namespace minfer::kernels {

// Weight types the kernels implement. Values are GGUF/ggml type ids.
enum class WType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

// Quantized types take Q8 activations; float types take f32.
inline bool wtype_is_quantized_host(WType t) { return t != WType::kF32 && t != WType::kF16 && t != WType::kBF16; }

// True when `ggml_type_id` is a WType and rows of k elements fit its blocks.
bool wtype_supported(uint32_t ggml_type_id, int64_t k);

// Where the pipelined kernels stage chunk c (16 bytes) of their Q8
// activations in shared memory (pipe.cuh stage_acts, dot.cuh SwizzledActs):
// a 128-byte row's eight chunks permuted by the row's index; with the chunk
// sums (Q6_K's matvec, SummedSwizzledActs) by 2 × (row mod 4).
constexpr MINFER_HOST_DEVICE int swizzled_chunk(int c) { return c ^ ((c >> 3) & 7); }
constexpr MINFER_HOST_DEVICE int summed_chunk(int c) { return c ^ (2 * ((c >> 3) & 3)); }

struct PlaneSizes {
  size_t q_row = 0;     // bytes per row of the q plane
  size_t qh_row = 0;    // bytes per row of the qh plane (0: none)
  size_t meta_row = 0;  // bytes per row of the meta plane (0: none)
  size_t d_row = 0;     // bytes per row of the d plane (Q6_K only)
};
inline MINFER_HOST_DEVICE PlaneSizes plane_sizes(WType t, int64_t k) {
  const size_t n = static_cast<size_t>(k);
  PlaneSizes p;
  switch (t) {
    case WType::kF32: p.q_row = n * 4; break;
    case WType::kF16: case WType::kBF16: p.q_row = n * 2; break;
    case WType::kQ8_0: p.q_row = n; p.meta_row = n / 32 * 2; break;
    case WType::kQ4_0: p.q_row = n / 2; p.meta_row = n / 32 * 2; break;
    case WType::kQ4_1: p.q_row = n / 2; p.meta_row = n / 32 * 4; break;
    case WType::kQ5_0: p.q_row = n / 2; p.qh_row = n / 32 * 4; p.meta_row = n / 32 * 2; break;
    case WType::kQ5_1: p.q_row = n / 2; p.qh_row = n / 32 * 4; p.meta_row = n / 32 * 4; break;
    case WType::kQ4_K: p.q_row = n / 2; p.meta_row = n / 256 * 16; break;
    case WType::kQ5_K: p.q_row = n / 2; p.qh_row = n / 8; p.meta_row = n / 256 * 16; break;
    case WType::kQ6_K: p.q_row = n / 2; p.qh_row = n / 4; p.meta_row = n / 256 * 16; p.d_row = n / 256 * 2; break;
  }
  return p;
}

// True when every plane of an n_rows × k matrix of type t is under 4 GiB: the
// decode kernels address a plane with 32-bit offsets (dot.cuh plane_at).
inline bool plane_offsets_fit(WType t, int64_t k, int64_t n_rows) {
  const PlaneSizes p = plane_sizes(t, k);
  const size_t rows = static_cast<size_t>(n_rows), most = 0xFFFFFFFFu;  // bytes a plane may hold
  for (size_t row : {p.q_row, p.qh_row, p.meta_row, p.d_row}) {
    if (row != 0 && rows > most / row) return false;
  }
  return true;
}

// True for the types whose q plane has split halves (above).
inline MINFER_HOST_DEVICE bool split_halves(WType t) { return t == WType::kQ8_0 || t == WType::kQ4_K || t == WType::kQ5_K; }

// Offset in a row's q plane of byte b (0..31) of unit u, for a row of
// n_units 32-byte units with split halves.
inline MINFER_HOST_DEVICE uint32_t split_offset(uint32_t u, uint32_t b, uint32_t n_units) {
  const uint32_t first = u & ~31u;  // the group's first unit
  const uint32_t size = n_units - first < 32u ? n_units - first : 32u;
  return 32u * first + 16u * (b / 16u) * size + 16u * (u - first) + b % 16u;
}

// A matrix on the device in the plane layout.
struct DeviceWeight {
  WType type = WType::kF32;
  int n_rows = 0;
  int k = 0;
  const void* q = nullptr;
  const void* qh = nullptr;
  const void* meta = nullptr;
  const void* d = nullptr;
};

// Splits `n_rows` GGUF rows (row_bytes apart) into the planes; each plane
// pointer receives n_rows * plane_row bytes. Host code, used during upload.
void repack_rows(WType type, int64_t k, const uint8_t* src, size_t src_row_bytes, int64_t n_rows, uint8_t* q,
                 uint8_t* qh, uint8_t* meta, uint8_t* d);

}  // namespace minfer::kernels

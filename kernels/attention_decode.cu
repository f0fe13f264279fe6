// Decode attention (one query token) over the cache history, grouped-query
// heads, two ways (AttentionArgs::decode_split picks; the backend takes heads
// until a layer's K/V rows reach 8 MiB, cuda_backend.cpp):
//
// - Heads: block (query head, chunk) takes up to kChunk cells of the
//   sequence. When the whole sequence fits one chunk — every chat turn of up
//   to 256 tokens — the block normalises and writes the head's output (and
//   its Q8 copy) itself. Longer sequences split into chunks
//   ("flash-decoding"): each block writes its chunk's unnormalised sum, max
//   and sum of exp, and the last block of the head to finish (an atomic count
//   a head) combines them, in chunk order, so the bits never depend on which
//   block came last. Each K/V row is read once a query head (from L2 after
//   the first).
// - Split: block (KV head, range of cells) scores its range for every query
//   head of the group (each K/V row read once for the group), as many ranges
//   as fill the GPU, and the last block of each KV head combines them. Also
//   one launch.
//
// The cell count is read from device memory, so the grid (sized for the
// largest context) stays fixed across steps and a captured graph can be
// replayed.
#include <algorithm>
#include <atomic>
#include <type_traits>

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels {
namespace {

constexpr int kMaxGroup = 16;     // query heads per KV head
constexpr int kMaxHeadDim = 256;

__device__ unsigned long long* g_attention_probe = nullptr;  // set_attention_probe (kernels.h set_phase_probe)

__device__ __forceinline__ float load_kv(const void* cache, bool f16, size_t i) {
  return f16 ? __half2float(static_cast<const __half*>(cache)[i]) : static_cast<const float*>(cache)[i];
}

// ---- One launch: a block a query head and chunk ----
//
// Block (h, s) of kThreads threads, cells j0 = s * kChunk ... of the
// sequence. Before the PDL wait: the cell count and the block's cell indices
// (the host uploaded them before the step). After it, in one round trip: K
// pieces, the cells' positions, q. Thread (cell group cg, piece) takes one
// 16-byte piece of the rows of cells cg, cg + groups, ...: for the scores a
// warp's loads cover whole K rows, the row's lanes add their parts by a
// butterfly, and the same pieces of the V rows are copied into shared
// memory meanwhile (stage_v; else pulled into L1); then a block max and sum
// of exp; then the same threads weight the same pieces of the V rows, and
// the cell groups add up in shared memory in group order. Head shapes whose
// rows are not a power of two of pieces (at most a warp) score a thread a
// cell instead, its whole row. (That way for every shape — a lane reading
// 16 bytes of each of 32 rows an instruction — measured about the same:
// H200, 2026-12-01, a layer's attention 8.5 vs 8.3-9.3 µs on 7B, 5.7 vs
// 5.1-5.5 on 0.5B; tg128 0.5B Q8_0 1,796 vs 1,827-1,856 tok/s.)
// Tried on the H200 (2026-12-01, not kept): every cell's K and V rows but
// the one the tail writes pulled into L1 before the PDL wait (prefetch,
// while the tail runs): no change (tg128 0.5B Q8_0 1,892 vs 1,905 tok/s
// without, 7B Q4_K_M 494 vs 495, Q8_0 407 vs 407; same run). Nor did the
// caches' lines kept in a persisting part of the L2 (an access-policy
// window on the K/V stores and on this kernel): a 7B layer's attention 8.63
// vs 8.60 µs (Q8_0), 7.64 vs 7.64 (Q4_K_M), while the set-aside slowed
// prefill (7B Q8_0 pp512 20,824 vs 23,286 tok/s) and deep decode
// (bench/results/2026-12-01-h200-session15, run 4).
// Also tried there (2026-12-01, not kept): the next kernel (attn_output,
// whose 896 blocks load 7-14 MB of weights before their wait) launched only
// once this block's K and V reads had landed, not at the wait, in case those
// reads queued behind that load: attention 9.96 → 9.23 µs a layer on 7B
// Q8_0, but attn_output 2.68 → 4.19; tg128 7B Q8_0 403 vs 407 tok/s, Q4_K_M
// 491 vs 493, 0.5B Q8_0 1,865 vs 1,888 (CUPTI timelines and benches, same
// run). The deferred norm the same way lost more (7B Q8_0 392, Q4_K_M 469):
// its own time fell 5.2 → 2.7 µs, but gate/up and q/k/v lost the weight
// loads they had in flight during it (gate/up 36.0 → 40.4 µs a layer).
// Nor (H200, 2026-12-02, same run, CUPTI) once the block's first K and V
// loads were only issued, so that attn_output's loads would queue behind
// them: 7B Q8_0 attention 9.34 → 9.92 µs a layer, attn_output 3.14 → 3.09,
// the step 2,481.8 → 2,497.2 µs; 0.5B Q8_0 step 510.0 → 511.2
// (bench/results/2026-12-02-h200-session20, run 5).
// Tried on the H200 (2026-12-02, not kept): every cell's K row and position
// but the fresh cell's read into registers before the wait (AttentionArgs
// told the cell the tail writes, read after it). A block's wait is ~0.04 µs
// (the phase probe, kernels.h: the blocks start in the tail's last ~0.7 µs),
// so nothing was hidden, and the wait or the trigger after it seemed held
// until the loads landed (attn_output started 3.5 µs after attention instead
// of 1.4): tg128 7B Q4_K_M 502, or 518 with the tail triggering at its start,
// against 526-529 for this code on other machines
// (bench/results/2026-12-02-h200-session18). Nor (H200, 2026-12-03, same
// build and run, not kept), with the q/k/v tail folded into q/k/v so that
// the blocks start 1.4-3.1 µs before their predecessor ends, every cell's K
// and V pieces but the fresh cell's staged in shared memory (cp.async)
// before the wait: a layer's attention 4.50 → 4.84 µs on 7B Q4_K_M, 3.22 →
// 3.17 on 0.5B Q8_0; tg128 within the noise (bench/results/
// 2026-12-03-h200-session26).
//
// kThreads: 256 (two blocks an SM by the launch bounds: 128 registers, no
// spills; 139 unbounded) or 512 (one, the same registers): twice the cell
// groups, so each thread scores, weights and sums half the cells. A decode
// step launches a block a query head (28 on 7B, 14 on 0.5B) on an otherwise
// idle GPU, and at 256 threads each warp's chain of dependent instructions
// set the time (Nsight Compute, H200, 2026-12-01, 7B Q4_K_M: 6.1 µs alone, a
// warp issuing every 7.7 cycles, 2 warps a scheduler). 512 threads on head
// dim 128 (H200, 2026-12-01, CUPTI, against 256 in the run before): a
// layer's attention 10.05 → 8.34 µs on 7B Q8_0 and 8.85 → 7.58 on Q4_K_M,
// of which attn_output, whose wait it shortens, gives back 0.7 and 0.3;
// tg128 (same run) 7B Q4_K_M 496 vs 493 tok/s, Q8_0 409 vs 408, 1.5B 1,027
// vs 1,015 (bench differences within run-to-run noise; the timeline's are
// not). On head dim 64 (64 cell groups
// of 8 lanes) it did not win: 0.5B Q8_0 1,880 vs 1,914 in that run (1,882
// with 256 in the next). So 512 from head dim 128 up (kernels.h
// set_attention_threads). Again with the K batches fitted (below; H200,
// 2026-12-02, same run): 256 on 7B Q8_0 gave attention 10.75 µs a layer
// against 9.34 and attn_output 2.57 against 3.14, the step 2,504.2 against
// 2,481.8 µs.
constexpr int kChunk = kAttentionChunkCells;  // threads t < kChunk a cell each in the block max and sum
// K row pieces a thread loads at once, at most. A block's scores loop is
// unrolled over its batch, and the blocks are bound by their instructions
// more than by their loads: with 16 always, a 0.5B block holding 64 cells
// (2 rows a thread) issued the other 14 rows' predicated work too. Fitted
// to the rows a thread holds (2, 4, 8 or 16; kernels.h
// set_attention_fit_batch), on the H200 (2026-12-02, same run, CUPTI and
// the phase probe): 0.5B Q8_0 a layer's attention 5.64 → 4.97 µs, its
// scores phase 2.64 → 1.85, the step 526.6 → 510.4 µs, tg128 1,848 → 1,900
// tok/s; 7B Q8_0 9.68 → 9.48 µs (scores 4.31 → 4.08), tg128 within the noise
// (bench/results/2026-12-02-h200-session20).
constexpr int kRowBatch = 16;
constexpr int kPieceFloats = 8;       // the most values one 16-byte piece holds (f16)

struct HeadShape {  // how the block cuts a K/V row
  int esize;        // bytes a value
  int per_piece;    // values a piece: 16 / esize, or 1 where rows are not whole 16-byte pieces
  int pieces;       // pieces a row
  int groups;       // cell groups: threads / pieces
  bool shuffled;    // pieces a power of two ≤ 32: a row's pieces are lanes of one warp
  __host__ __device__ HeadShape(int hd, bool f16, int threads) {
    esize = f16 ? 2 : 4;
    per_piece = (hd * esize) % 16 == 0 ? 16 / esize : 1;
    pieces = hd / per_piece;
    groups = threads / pieces;
    shuffled = per_piece > 1 && pieces <= kWarp && (pieces & (pieces - 1)) == 0;
  }
};

// Values i * n .. i * n + n - 1 of piece `raw` (n = per_piece: 8 f16, 4 f32,
// or 1 value of either) as floats.
__device__ __forceinline__ void piece_values(const int4& raw, bool f16, int n, float (&v)[kPieceFloats]) {
  if (n == 1) {
    v[0] = f16 ? __half2float(*reinterpret_cast<const __half*>(&raw)) : *reinterpret_cast<const float*>(&raw);
    return;
  }
  if (f16) {
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
  } else {
    const float* f = reinterpret_cast<const float*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = f[i];
  }
}

// Piece `i` of a cache row (value i * per_piece onwards): 16 bytes, or one
// value in the low bytes where rows are not whole pieces.
__device__ __forceinline__ int4 row_piece(const unsigned char* row, const HeadShape& sh, int i) {
  if (sh.per_piece > 1) return reinterpret_cast<const int4*>(row)[i];
  int4 r = make_int4(0, 0, 0, 0);
  if (sh.esize == 2) r.x = reinterpret_cast<const unsigned short*>(row)[i];
  else r.x = reinterpret_cast<const int*>(row)[i];
  return r;
}

__device__ __forceinline__ float piece_dot(const int4& raw, const float (&q)[kPieceFloats], const HeadShape& sh, bool f16) {
  float v[kPieceFloats] = {};
  piece_values(raw, f16, sh.per_piece, v);
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < kPieceFloats; ++i) {
    if (i < sh.per_piece) acc = fmaf(q[i], v[i], acc);
  }
  return acc;
}

// The chunk's V rows staged in shared memory (stage_v): each thread copies
// the 16-byte pieces it weights later — piece `piece` of its cells cg, cg +
// groups, ... — with cp.async as it loads their K pieces, one round trip
// for both, and reads them back itself (its own copies: no barrier). Cell c's
// piece i at (c × pieces + i) × 16, after the combine's chunk weights. With
// the V rows pulled into L1 instead (prefetch, as before) the V sum took
// 0.80-1.02 µs of a block (the phase probe, H200, 2026-12-02) for 4-5 rows'
// pieces a thread. Staged (H200, 2026-12-02, CUPTI, same run,
// MINFER_ATTN_STAGE_V=0 the other arm): a layer's attention 6.08 → 5.64 µs
// on 0.5B Q8_0 (the step 536.9 → 526.2) and 9.77 → 9.43 on 7B Q8_0; tg128
// 0.5B Q8_0 1,838 → 1,878 tok/s, 7B within the noise. The probe still gives
// the V sum 0.63 (0.5B) and 0.98 µs (7B), now mostly the wait for the
// copies: the block's K and V reads take 2.7-4.5 µs to come back, and that
// round trip, not L1, is what it waits for
// (bench/results/2026-12-02-h200-session19).
constexpr size_t kMaxStagedV = size_t{64} << 10;  // a chunk's V rows: up to 256 bytes a row
std::atomic<uint64_t> g_staged_v_launches{0};
std::atomic<uint64_t> g_fixed_shape_launches{0};
std::atomic<uint64_t> g_split_launches{0};
__host__ __device__ inline size_t staged_v_offset(int n_chunks) { return (sizeof(float) * static_cast<size_t>(n_chunks) + 15) / 16 * 16; }
__device__ __forceinline__ void stage_piece(unsigned char* dst, const unsigned char* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
#else
  *reinterpret_cast<int4*>(dst) = *reinterpret_cast<const int4*>(src);
#endif
}
__device__ __forceinline__ void staged_pieces_landed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// kHeadDim > 0: the head dimension and the cache type (kF16) fixed at compile
// time (launch_heads: head dims 64 and 128 with an f16 cache, the models'
// shapes, at either block size), so that the row's cut (HeadShape) folds to
// constants — the pieces' loops, the butterfly's steps and the f16 branches
// unrolled and gone; 0: both read from the arguments. Nsight Compute had the
// general kernel's blocks issuing one instruction every ~10 cycles a warp
// (H200, 2026-12-03, 7B Q4_K_M decode: 7.4 µs a launch, 117 registers, 0.37
// instructions a cycle a scheduler). Compiled for the shape (H200,
// 2026-12-03, CUPTI, same build and run, MINFER_ATTN_FIXED_SHAPE=0 the other
// arm): a layer's attention 9.01 → 4.33 µs on 7B Q4_K_M, 9.66 → 5.15 on 7B
// Q8_0, 5.00 → 3.28 on 0.5B Q8_0; the step 1,865.8 → 1,730.8 µs, 2,403.0 →
// 2,260.8 and 508.4 → 466.5 (bench/results/2026-12-03-h200-session24). The
// block sizes compiled so still pick as before (same run, run 5 there,
// MINFER_ATTN_THREADS): the step 466.7 µs at 256 threads vs 473.5 at 512
// on 0.5B Q8_0 (head dim 64), 1,721.6-1,721.8 at 512 vs 1,733.8 at 256 on
// 7B Q4_K_M, 2,236.3-2,236.5 vs 2,244.6 on 7B Q8_0.
template <int kThreads, int kHeadDim = 0, bool kF16 = false>
__global__ void __launch_bounds__(kThreads, 512 / kThreads) attention_heads_kernel(AttentionArgs a, int* counters, bool stage_v, bool fit_batch) {
  static_assert(kThreads >= kChunk && kThreads % kWarp == 0);
  extern __shared__ float chunk_weight[];  // [chunks] (the combine)
  __shared__ __align__(16) float qs[kMaxHeadDim];
  __shared__ float p[kChunk];
  __shared__ float red[kThreads * kPieceFloats];  // [cell group][head_dim]
  __shared__ float scratch[kWarp];
  __shared__ int cells[kChunk];
  __shared__ bool last;
  const int t = threadIdx.x, h = blockIdx.x, chunk = blockIdx.y;
  const int hd = kHeadDim > 0 ? kHeadDim : a.head_dim, group = a.n_heads / a.n_kv_heads, kvh = h / group;
  const bool f16 = kHeadDim > 0 ? kF16 : a.cache_f16;
  // The scores' scale from the argument, in either kernel: folded at compile
  // time, rsqrtf(128) is the correctly rounded constant, while the SFU's
  // rsqrt at run time is an ulp off it — and the two kernels' bits differed
  // (H200, 2026-12-03, GpuAttentionDecode.FixedShapeKeepsTheBits).
  const float score_scale = rsqrtf(static_cast<float>(a.head_dim));
  unsigned long long* probe = kPhaseProbes ? g_attention_probe : nullptr;
  const bool probing = probe != nullptr && t == 0;
  __shared__ long long stamp[9];  // thread 0's (shared: no registers held)
  if (probing) stamp[0] = clock64();

  // Before the wait: the sequence's cells, for the whole block.
  const int n_seq = *a.n_seq;
  const int j0 = chunk * kChunk;
  const int n_here = min(kChunk, n_seq - j0);
  const int cell = t < n_here ? a.seq_cells[j0 + t] : 0;
  if (t < kChunk) cells[t] = cell;
  __syncthreads();
  if (probing) stamp[1] = clock64();
  pdl_begin();
  if (probing) stamp[2] = clock64();
  if (n_here <= 0) return;  // past the sequence: the combine counts only used chunks
  const int n_chunks = (n_seq + kChunk - 1) / kChunk;

  const HeadShape sh(hd, f16, kThreads);
  const size_t row_bytes = static_cast<size_t>(hd) * sh.esize;
  const size_t head_off = static_cast<size_t>(kvh) * row_bytes;
  const size_t cache_row = static_cast<size_t>(a.n_kv_heads) * row_bytes;
  auto k_row = [&](int c) { return static_cast<const unsigned char*>(a.k_cache) + cells[c] * cache_row + head_off; };
  auto v_row = [&](int c) { return static_cast<const unsigned char*>(a.v_cache) + cells[c] * cache_row + head_off; };
  const float* qrow = a.q + static_cast<size_t>(h) * hd;
  const bool mine = t < n_here;
  const bool visible = mine && a.cell_pos[cell] <= a.q_pos[0];
  const int piece = t % sh.pieces, cg = t / sh.pieces;
  const int rounds = (n_here + sh.groups - 1) / sh.groups;  // cells a cell group takes (some past the chunk)
  unsigned char* const v_stage = reinterpret_cast<unsigned char*>(chunk_weight) + staged_v_offset(static_cast<int>(gridDim.y));
  auto v_piece = [&](int c) { return v_stage + (static_cast<size_t>(c) * sh.pieces + piece) * 16; };

  // Scores, in one round trip after the wait (K pieces, positions, q).
  float s = -INFINITY;
  if (sh.shuffled) {
    // Thread (cg, piece): the piece's part of the dot products of cells cg,
    // cg + groups, ... (loads of whole rows across lanes), summed over the
    // row's lanes by a butterfly; the same pieces of the V rows go into
    // shared memory meanwhile (stage_v; the host sets it only here), or
    // into L1.
    float qv[kPieceFloats] = {};
#pragma unroll
    for (int i = 0; i < kPieceFloats; ++i) {
      if (i < sh.per_piece) qv[i] = qrow[piece * sh.per_piece + i];
    }
    // kBatch rows' loads at once; the loop body is unrolled, so a batch
    // wider than the rounds left issues the idle rows' instructions too.
    auto score_rows = [&](auto batch) {
      constexpr int kBatch = decltype(batch)::value;
      for (int r0 = 0; r0 < rounds; r0 += kBatch) {
        int4 raw[kBatch];
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
          const int c = cg + (r0 + i) * sh.groups;
          raw[i] = c < n_here ? row_piece(k_row(c), sh, piece) : make_int4(0, 0, 0, 0);
          if (c < n_here && stage_v) stage_piece(v_piece(c), v_row(c) + piece * 16);
          else if (c < n_here && piece % 8 == 0) prefetch_l1(v_row(c) + piece * 16);
        }
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
          if (r0 + i >= rounds) break;  // uniform: the butterfly needs every lane
          float d = piece_dot(raw[i], qv, sh, f16);
          for (int o = sh.pieces / 2; o > 0; o /= 2) d += __shfl_xor_sync(0xffffffffu, d, o);
          const int c = cg + (r0 + i) * sh.groups;
          if (piece == 0 && c < n_here) p[c] = d;
        }
      }
    };
    // The narrowest batch that takes the rounds in one (fit_batch; the
    // same values either way, each cell's dot product its own).
    if (!fit_batch || rounds > kRowBatch / 2) score_rows(std::integral_constant<int, kRowBatch>{});
    else if (rounds > kRowBatch / 4) score_rows(std::integral_constant<int, kRowBatch / 2>{});
    else if (rounds > kRowBatch / 8) score_rows(std::integral_constant<int, kRowBatch / 4>{});
    else score_rows(std::integral_constant<int, kRowBatch / 8>{});
    __syncthreads();
    if (visible) s = p[t] * score_scale;
  } else {
    // Rows of other shapes: a thread a cell, its whole K row (q from shared memory).
    int4 kp[kRowBatch];
    const unsigned char* krow = mine ? k_row(t) : nullptr;
    if (mine) {
#pragma unroll
      for (int i = 0; i < kRowBatch; ++i) {
        if (i < sh.pieces) kp[i] = row_piece(krow, sh, i);
      }
      for (size_t off = 0; off < row_bytes; off += 128) prefetch_l1(v_row(t) + off);
    }
    for (int i = t; i < hd; i += kThreads) qs[i] = qrow[i];
    __syncthreads();
    if (mine) {
      float acc = 0.0f;
      for (int b0 = 0; b0 < sh.pieces; b0 += kRowBatch) {
        if (b0 > 0) {
#pragma unroll
          for (int i = 0; i < kRowBatch; ++i) {
            if (b0 + i < sh.pieces) kp[i] = row_piece(krow, sh, b0 + i);
          }
        }
#pragma unroll
        for (int i = 0; i < kRowBatch; ++i) {
          float qv[kPieceFloats] = {};
#pragma unroll
          for (int j = 0; j < kPieceFloats; ++j) {
            if (j < sh.per_piece) qv[j] = qs[(b0 + i) * sh.per_piece + j];
          }
          if (b0 + i < sh.pieces) acc += piece_dot(kp[i], qv, sh, f16);
        }
      }
      if (visible) s = acc * score_scale;
    }
  }
  if (probing) stamp[3] = clock64();
  const float m = block_max(s, scratch);
  if (probing) stamp[4] = clock64();
  const float e = visible ? expf(s - m) : 0.0f;
  if (t < kChunk) p[t] = e;
  const float l = block_sum(e, scratch);  // its barriers also publish p[]
  if (probing) stamp[5] = clock64();

  // Weighted V sum, then the cell groups' sums added in group order.
  if (stage_v) staged_pieces_landed();
  if (cg < sh.groups) {
    float acc[kPieceFloats] = {};
#pragma unroll 4
    for (int c = cg; c < n_here; c += sh.groups) {
      float v[kPieceFloats] = {};
      const int4 raw = stage_v ? *reinterpret_cast<const int4*>(v_piece(c)) : row_piece(v_row(c), sh, piece);
      piece_values(raw, f16, sh.per_piece, v);
      const float w = p[c];
#pragma unroll
      for (int i = 0; i < kPieceFloats; ++i) acc[i] = fmaf(w, v[i], acc[i]);
    }
#pragma unroll
    for (int i = 0; i < kPieceFloats; ++i) {
      if (i < sh.per_piece) red[cg * hd + piece * sh.per_piece + i] = acc[i];
    }
  }
  __syncthreads();
  if (probing) stamp[6] = clock64();
  float o = 0.0f;
  if (t < hd) {
    // In group order; unrolled, so that the loads go out together (one at a
    // time, the 32 groups of a 7B head were a chain of shared-memory round
    // trips: 0.53 µs of a block's ~7, the phase probe, H200, 2026-12-02;
    // 0.40 unrolled, on another machine).
#pragma unroll 8
    for (int g = 0; g < sh.groups; ++g) o += red[g * hd + t];
  }
  if (probing) stamp[7] = clock64();

  // The head's output: y = Σ / l, and its Q8 copy (warps of whole Q8 blocks:
  // head_dim % 32 == 0 and blockDim ≥ head_dim).
  const bool quantize = a.out_q.q != nullptr && hd % kWarp == 0;
  auto write_out = [&](float y) {
    if (t >= hd) return;  // whole warps (head_dim % 32 == 0 where it quantizes)
    a.out[static_cast<size_t>(h) * hd + t] = y;
    if (quantize) quantize_block_q8(y, t % kWarp, (h * hd + t) / kWarp, a.out_q.q, static_cast<float2*>(a.out_q.ds));
  };
  if (n_chunks == 1) {
    write_out(l > 0.0f ? o / l : 0.0f);
    if (probing) {
      stamp[8] = clock64();
      phase_probe_add(probe, stamp);
    }
    return;
  }

  // Several chunks: this one's partial, then the head's last block combines.
  const size_t stride = static_cast<size_t>(a.n_heads) * (hd + 2);
  float* part = a.partials + static_cast<size_t>(chunk) * stride + static_cast<size_t>(h) * (hd + 2);
  if (t < hd) part[t] = o;
  if (t == 0) {
    part[hd] = m;
    part[hd + 1] = l;
  }
  __threadfence();
  __syncthreads();
  if (t == 0) last = atomicAdd(&counters[h], 1) == n_chunks - 1;
  __syncthreads();
  if (!last) return;
  if (t == 0) counters[h] = 0;  // ready for the next launch
  __threadfence();
  const float* head = a.partials + static_cast<size_t>(h) * (hd + 2);
  float mx = -INFINITY;
  for (int c = t; c < n_chunks; c += kThreads) {
    const float* st = head + c * stride + hd;
    if (__ldcg(st + 1) > 0.0f) mx = fmaxf(mx, __ldcg(st));
  }
  mx = block_max(mx, scratch);
  float part_l = 0.0f;
  for (int c = t; c < n_chunks; c += kThreads) {
    const float* st = head + c * stride + hd;
    const float sum = __ldcg(st + 1);
    const float w = sum > 0.0f ? expf(__ldcg(st) - mx) : 0.0f;
    chunk_weight[c] = w;
    part_l += w * sum;
  }
  const float denom = block_sum(part_l, scratch);  // its barriers also publish chunk_weight[]
  float y = 0.0f;
  if (t < hd) {
#pragma unroll 8
    for (int c = 0; c < n_chunks; ++c) y += chunk_weight[c] * __ldcg(head + c * stride + t);
  }
  write_out(denom > 0.0f ? y / denom : 0.0f);
}

// ---- Split: a block a KV head and range of cells ----
//
// Deep into a context the one-launch kernel above reads each K/V row once a
// query head. Here block (KV head, split) takes a contiguous range of the
// sequence's cells for its whole query group, so each row is read once, by
// one block; as many splits as fill the GPU once (split_grid: the SMs shared
// out over the KV heads), each range at least kSplitMinCells cells. A block
// works in passes of up to `cap` cells: their positions and K and V rows
// copied into shared memory in one round trip (cp.async; the first pass's,
// but for the cell this step's tail writes, before the PDL wait), the scores
// (a warp a 32-cell tile and a few heads, a lane a cell), the running
// softmax of each head (max and sum of exp, rescaled across passes), then
// the V rows weighted (a thread two dimensions of every head over a set of
// the cells; the sets added in order at the end). Its partial (unnormalized
// sums, max, sum of exp) goes to `partials`, and the last block of the KV
// head to finish (an atomic count, left at zero) combines the splits in
// split order — a thread two dimensions of a head, its loads of all splits
// out in batches — and writes the group's output and its Q8 copy: one launch.
// Before (to 2026-12-04): blocks of 32 cells whatever the depth, and a
// second launch to combine them a head at a time (a last-block combine over
// that many partials had lost to it, H200, 2026-11-30); 4,096 cells deep a 7B
// Q4_K_M layer spent 13.96 + 9.11 µs there (CUPTI) on 8.4 MB of K/V. This
// kernel, its combine reading the partials from L2 8 splits a round trip,
// took as long (23.78 µs); with them copied into shared memory at once, tg128
// (H200, 2026-12-04, same machine kind, against the pair) 7B Q4_K_M 486 / 448
// / 396 tok/s 1,024 / 4,096 / 8,192 deep vs 472 / 447 / 374, 0.5B Q8_0 1,542
// / 1,406 / 1,277 vs 1,664 / 1,370 / 1,098 (bench/results/2026-12-04-h200-session36).
// Its phase probe 4,096 deep (H100, 2026-12-06, bench/results/2026-12-06-
// session51, run 1; a 7B layer 27.3 µs with the probe in): every block
// staged its K/V in 4.05 µs, scored in 2.56 (a head a job: 28 jobs over 16
// warps, the K row converted once a head), ran the softmax in 0.99 and
// weighted V in 3.96 (a thread a head's pair of dimensions, each V value
// loaded and converted once a head), then wrote its partial in 1.27; the last
// block took 11.5 more to combine (a fence after the count's reset, the
// statistics' loads behind the partials' copies). With the V sums, the
// scores and the combine as above and the loops compiled for head dims 64
// and 128 (same build and run, against that kernel; H100, run 4): a 7B Q4_K_M
// layer 24.46 → 22.25 µs, 0.5B Q8_0 12.71 → 11.86 (CUPTI); tg128 7B 385.7 →
// 394.0 tok/s 4,096 deep, 344.5 → 357.6 8,192 deep; 0.5B 1,336 → 1,373 and
// 1,218 → 1,296. The early staging alone (MINFER_ATTN_SPLIT_EARLY=0 the
// other arm): 7B +0.3%, 0.5B +0.5-3%. Not probed again since: the last
// block's combine (11.5 µs in run 1) is the lead for what still separates a
// 7B layer from its bytes (2.8 µs of K/V on the H100).
constexpr int kSplitThreads = 512;
constexpr int kSplitWarps = kSplitThreads / kWarp;
constexpr int kSplitMinCells = 32;           // a split's range, at least (a tile: a lane a cell)
constexpr int kSplitMaxCells = 128;          // a pass, at most
constexpr size_t kSplitStaticSmem = 64;     // its static shared memory (`last`), at most: a block's
                                             // dynamic part gets the rest of the opt-in limit
constexpr int kSplitHeadsPerThread = 4;      // group ≤ 16 over ≥ 4 sets of dimension pairs (head_dim ≤ 256)

__host__ __device__ constexpr size_t align16(size_t n) { return (n + 15) / 16 * 16; }
// Floats of a head's partial (its sums, max and sum of exp), rounded up so
// that every partial starts on 16 bytes (the combine copies them by cp.async).
__host__ __device__ constexpr int split_head_floats(int head_dim) { return (head_dim + 2 + 3) / 4 * 4; }

struct SplitLayout {  // shared-memory carve-up, the same on host and device
  bool pieces16;      // rows of whole 16-byte pieces: cp.async and 16-byte reads
  int row_bytes;      // a cache row of one KV head
  int kstride;        // a staged K row: an odd number of pieces (words), so that lanes reading
                      // their cells' rows at one offset hit distinct banks
  int vstride;        // a staged V row
  size_t cells, ok, q, p, stats, wgt, k, v, rows_end;
  __host__ __device__ SplitLayout(int head_dim, int group, bool f16, int cap, int splits) {
    row_bytes = head_dim * (f16 ? 2 : 4);
    pieces16 = row_bytes % 16 == 0;
    kstride = pieces16 ? ((row_bytes / 16) | 1) * 16 : (((row_bytes + 3) / 4) | 1) * 4;
    vstride = static_cast<int>(align16(static_cast<size_t>(row_bytes)));
    cells = 0;                                                  // [cap] cache cells of the pass
    ok = cells + sizeof(int) * cap;                             // [cap] visible to the query
    q = align16(ok + sizeof(int) * cap);                        // [group][head_dim] q, then the outputs
    p = align16(q + sizeof(float) * group * head_dim);          // [group][cap] scores, then weights
    stats = p + sizeof(float) * group * cap;                    // [3][group] running max, sum, rescale
    wgt = stats + sizeof(float) * 3 * group;                    // the combine: [2][group][splits] maxima (weights), sums; [group]
    k = align16(wgt + sizeof(float) * (2 * static_cast<size_t>(group) * splits + group));  // [cap] K rows
    v = k + static_cast<size_t>(cap) * kstride;                 // [cap] V rows
    // Then, from k on, the V sums' sets (at most 1,024 floats a head: sets ×
    // pairs ≤ the block's threads) and, in the last block, the combine's
    // splits' partials.
    rows_end = v + static_cast<size_t>(cap) * vstride;
    const size_t sets_end = k + sizeof(float) * 2 * kSplitThreads * static_cast<size_t>(group);
    if (sets_end > rows_end) rows_end = sets_end;
  }
};

// Lane c's score of its cell (K row staged at krow) against q (shared memory,
// one address for the whole warp: a broadcast), for the rows cell_scores
// does not take itself: f32 rows, and f16 rows that are not whole pieces.
__device__ __forceinline__ float cell_score(const unsigned char* krow, const float* q, int hd, bool f16, bool pieces16) {
  float acc0 = 0.0f, acc1 = 0.0f;  // two chains
  if (pieces16 && !f16) {
    for (int d = 0; d < hd; d += 4) {
      const float4 k = *reinterpret_cast<const float4*>(krow + d * 4);
      const float4 qv = *reinterpret_cast<const float4*>(q + d);
      acc0 = fmaf(qv.x, k.x, acc0);
      acc1 = fmaf(qv.y, k.y, acc1);
      acc0 = fmaf(qv.z, k.z, acc0);
      acc1 = fmaf(qv.w, k.w, acc1);
    }
  } else {
    for (int d = 0; d < hd; ++d) {
      const float k = f16 ? __half2float(reinterpret_cast<const __half*>(krow)[d]) : reinterpret_cast<const float*>(krow)[d];
      acc0 = fmaf(q[d], k, acc0);
    }
  }
  return acc0 + acc1;
}

// Lane c's scores of its cell (K row staged at krow) against nh ≤ kScoreHeads
// query heads of the group (q: the first one's, heads hd floats apart; shared
// memory, one address for the whole warp: broadcasts). The K row is read and
// converted once for all of them; each head's sum has cell_score's two chains
// in its order (the same bits). kHd > 0: the head dim fixed at compile time.
constexpr int kScoreHeads = 4;
template <int kHd>
__device__ __forceinline__ void cell_scores(const unsigned char* krow, const float* q, int hd, bool f16, bool pieces16, int nh,
                                            float (&s)[kScoreHeads]) {
  if (kHd > 0) hd = kHd;
  if (!(pieces16 && f16)) {
#pragma unroll
    for (int h = 0; h < kScoreHeads; ++h) s[h] = h < nh ? cell_score(krow, q + h * hd, hd, f16, pieces16) : 0.0f;
    return;
  }
  float acc0[kScoreHeads], acc1[kScoreHeads];
#pragma unroll
  for (int h = 0; h < kScoreHeads; ++h) acc0[h] = acc1[h] = 0.0f;
#pragma unroll 4
  for (int d = 0; d < hd; d += 8) {
    const int4 raw = *reinterpret_cast<const int4*>(krow + d * 2);
    const __half2* hk = reinterpret_cast<const __half2*>(&raw);
    const float2 k0 = __half22float2(hk[0]), k1 = __half22float2(hk[1]), k2 = __half22float2(hk[2]), k3 = __half22float2(hk[3]);
#pragma unroll
    for (int h = 0; h < kScoreHeads; ++h) {
      if (h >= nh) break;
      const float4 q0 = *reinterpret_cast<const float4*>(q + h * hd + d), q1 = *reinterpret_cast<const float4*>(q + h * hd + d + 4);
      acc0[h] = fmaf(q0.x, k0.x, acc0[h]);
      acc1[h] = fmaf(q0.y, k0.y, acc1[h]);
      acc0[h] = fmaf(q0.z, k1.x, acc0[h]);
      acc1[h] = fmaf(q0.w, k1.y, acc1[h]);
      acc0[h] = fmaf(q1.x, k2.x, acc0[h]);
      acc1[h] = fmaf(q1.y, k2.y, acc1[h]);
      acc0[h] = fmaf(q1.z, k3.x, acc0[h]);
      acc1[h] = fmaf(q1.w, k3.y, acc1[h]);
    }
  }
#pragma unroll
  for (int h = 0; h < kScoreHeads; ++h) s[h] = acc0[h] + acc1[h];
}

// Dimensions 2 pair and 2 pair + 1 of a staged V row.
__device__ __forceinline__ float2 row_pair(const unsigned char* row, int pair, bool f16) {
  if (f16) return __half22float2(reinterpret_cast<const __half2*>(row)[pair]);
  return reinterpret_cast<const float2*>(row)[pair];
}

// kHd > 0: the head dim fixed at compile time (64 and 128, the models'), so
// that the scores' and the V sums' loops unroll; kG: the most query heads a
// KV head has (the V sums keep a pair of dimensions of each in registers).
// (Tried on an H100, 2026-12-06, not kept: the next kernel let launch only
// once the last blocks had combined, so that the combine's loads would not
// queue behind attn_output's weights — attention 21.03 → 20.02 µs a 7B layer
// 4,096 deep, attn_output 6.1 µs (3.6-3.7 otherwise), tg128 401 → 396 tok/s.
// Nor, session 52, H100s, bench/results/2026-12-06-session52: the combine's
// copies of the partials by cp.async.bulk, a split an instruction on an
// mbarrier — its last block 9.76 µs a 7B layer 4,096 deep against 10.18, 0.5B
// 6.83 against 6.26 (phase probe; its time is the bytes crossing into one SM,
// not the instructions); nor the kernel in clusters of 4 or 8 blocks that
// combine their splits through distributed shared memory, a head a block —
// the clusters an H100 holds at once take fewer splits, and tg128 fell 384.9
// → 366.2 tok/s (7B Q4_K_M, 4,096 deep) and 1,402.7 → 1,224.7 (0.5B Q8_0).)
template <int kHd, int kG>
__global__ void __launch_bounds__(kSplitThreads, 1) attention_split_kernel(AttentionArgs a, int* counters, int cap,
                                                                           int comb_splits) {
  extern __shared__ __align__(16) unsigned char split_smem[];
  __shared__ bool last;
  const int hd = kHd > 0 ? kHd : a.head_dim, group = a.n_heads / a.n_kv_heads, kvh = blockIdx.x, split = blockIdx.y;
  const int t = threadIdx.x, lane = t % kWarp, warp = t / kWarp;
  const int n_grid = static_cast<int>(gridDim.y);
  const bool f16 = a.cache_f16;
  const SplitLayout l(hd, group, f16, cap, n_grid);
  int* cells = reinterpret_cast<int*>(split_smem + l.cells);
  int* ok = reinterpret_cast<int*>(split_smem + l.ok);
  float* qs = reinterpret_cast<float*>(split_smem + l.q);
  float* p = reinterpret_cast<float*>(split_smem + l.p);
  float* m_run = reinterpret_cast<float*>(split_smem + l.stats);
  float* l_run = m_run + group;
  float* corr = l_run + group;
  unsigned char* kst = split_smem + l.k;
  unsigned char* vst = split_smem + l.v;
  // Phase probe (kernels.h set_phase_probe, kinds 5 and 6 after the
  // one-launch kernel's): thread 0's cycles a phase, summed over passes.
  unsigned long long* probe = kPhaseProbes && g_attention_probe != nullptr ? g_attention_probe + 5 * kPhaseProbeFields : nullptr;
  const bool probing = probe != nullptr && t == 0;
  long long lap_at = probing ? clock64() : 0;
  long long phase[kPhaseProbeFields] = {};
  auto lap = [&](int field) {
    if (!probing) return;
    const long long now = clock64();
    phase[field] += now - lap_at;
    lap_at = now;
  };
  auto report = [&](unsigned long long* fields, int n) {
    if (!probing) return;
    atomicAdd(fields, 1ull);
    for (int i = 1; i < n; ++i) atomicAdd(fields + i, static_cast<unsigned long long>(phase[i]));
  };

  // The splits: as many kSplitMinCells-cell ranges as the sequence holds, at
  // most the grid's; a range may come out empty (its partial then counts
  // nothing).
  const int n_seq = *a.n_seq;
  const int n_splits = max(1, min(n_grid, (n_seq + kSplitMinCells - 1) / kSplitMinCells));
  const int per = (n_seq + n_splits - 1) / n_splits;
  const int j0 = min(n_seq, split * per), j1 = min(n_seq, j0 + per);
  const int qpos = a.q_pos[0];  // (uploaded by the host before the step)
  const float scale = rsqrtf(static_cast<float>(a.head_dim));  // at run time: a folded constant is not rsqrtf's bits
  const int esize = f16 ? 2 : 4;
  const size_t kv_row = static_cast<size_t>(a.n_kv_heads) * hd, head_off = static_cast<size_t>(kvh) * hd;
  // A pass's positions and K and V rows, one round trip: cells c < n but
  // the one numbered `skip` (-1: none); stage_one: cell c alone.
  auto stage_rows = [&](int n, int skip) {
    for (int i = t; i < n; i += kSplitThreads) {
      if (cells[i] != skip) ok[i] = a.cell_pos[cells[i]] <= qpos;
    }
    if (l.pieces16) {
      const int pieces = l.row_bytes / 16, per_rows = n * pieces;
      for (int i = t; i < 2 * per_rows; i += kSplitThreads) {
        const int which = i / per_rows, rest = i % per_rows, c = rest / pieces, piece = rest % pieces;
        if (cells[c] == skip) continue;
        const unsigned char* src = static_cast<const unsigned char*>(which == 0 ? a.k_cache : a.v_cache) +
                                   (static_cast<size_t>(cells[c]) * kv_row + head_off) * esize + piece * 16;
        unsigned char* dst = which == 0 ? kst + static_cast<size_t>(c) * l.kstride : vst + static_cast<size_t>(c) * l.vstride;
        stage_piece(dst + piece * 16, src);
      }
    } else {
      const int per_rows = n * hd;
      for (int i = t; i < 2 * per_rows; i += kSplitThreads) {
        const int which = i / per_rows, rest = i % per_rows, c = rest / hd, d = rest % hd;
        const size_t e = static_cast<size_t>(cells[c]) * kv_row + head_off + d;
        unsigned char* dst = which == 0 ? kst + static_cast<size_t>(c) * l.kstride : vst + static_cast<size_t>(c) * l.vstride;
        const void* cache = which == 0 ? a.k_cache : a.v_cache;
        if (f16) reinterpret_cast<__half*>(dst)[d] = static_cast<const __half*>(cache)[e];
        else reinterpret_cast<float*>(dst)[d] = static_cast<const float*>(cache)[e];
      }
    }
  };
  auto stage_one = [&](int c) {  // pieces16 rows
    ok[c] = a.cell_pos[cells[c]] <= qpos;
    const int pieces = l.row_bytes / 16;
    const size_t at = (static_cast<size_t>(cells[c]) * kv_row + head_off) * esize;
    for (int piece = 0; piece < pieces; ++piece) {
      stage_piece(kst + static_cast<size_t>(c) * l.kstride + piece * 16, static_cast<const unsigned char*>(a.k_cache) + at + piece * 16);
      stage_piece(vst + static_cast<size_t>(c) * l.vstride + piece * 16, static_cast<const unsigned char*>(a.v_cache) + at + piece * 16);
    }
  };
  // Before the wait: the first pass's cells (the host uploaded them before
  // the step) and, where a.kv_cells names the cell this step's q/k/v tail
  // writes, every other cell's position and K and V rows of the pass: earlier
  // steps wrote them, and every kernel before this one's predecessor has
  // ended (each waits on its own predecessor before it lets the next launch).
  // The tail's cell is staged after the wait.
  const int n_first = split < n_splits ? min(cap, j1 - j0) : 0;
  for (int i = t; i < n_first; i += kSplitThreads) cells[i] = a.seq_cells[j0 + i];
  const bool early = l.pieces16 && a.kv_cells != nullptr && n_first > 0;
  const int fresh = early ? *a.kv_cells : -1;
  if (early) {
    __syncthreads();
    stage_rows(n_first, fresh);
  }
  lap(1);
  pdl_begin();
  if (split >= n_splits) return;
  lap(2);

  const float* qbase = a.q + static_cast<size_t>(kvh) * group * hd;
  for (int i = t; i < group * hd; i += kSplitThreads) qs[i] = qbase[i];
  if (t < group) {
    m_run[t] = -INFINITY;
    l_run[t] = 0.0f;
  }
  // The V sums: thread (set, pair) holds dimensions 2 pair, 2 pair + 1 of
  // every head of the group over cells set, set + n_sets, ... of each pass
  // (head_dim even; launch_attention_decode), so that each V value is
  // loaded and converted once for the group; the sets are added in set
  // order at the end. (The combine reuses the mapping with heads for sets.)
  const int pairs = hd / 2, n_sets = kSplitThreads / pairs;
  const int set = t / pairs, pair = t % pairs;
  const bool summing = set < n_sets;
  float2 acc[kG];
#pragma unroll
  for (int g = 0; g < kG; ++g) acc[g] = make_float2(0.0f, 0.0f);

  for (int b0 = j0; b0 < j1; b0 += cap) {
    const int n = min(cap, j1 - b0);
    if (b0 != j0) {
      __syncthreads();  // the last pass's reads are done
      for (int i = t; i < n; i += kSplitThreads) cells[i] = a.seq_cells[b0 + i];
    }
    if (early && b0 == j0) {
      for (int i = t; i < n; i += kSplitThreads) {
        if (cells[i] == fresh) stage_one(i);
      }
    } else {
      __syncthreads();
      stage_rows(n, -1);
    }
    staged_pieces_landed();
    __syncthreads();
    lap(3);

    // Scores: warp w takes (tile, heads) jobs w, w + 16, ...; lane c cell c
    // of the tile against hpj heads at once, as many as make the jobs about
    // one round of the warps (a 7B pass of 124 cells: 4 tiles × 4 jobs of 2
    // heads; one head a job took two rounds, 12 warps with two jobs).
    const int tiles = (n + kWarp - 1) / kWarp;
    const int hpj = min(kScoreHeads, max(1, (tiles * group + kSplitWarps - 1) / kSplitWarps));
    const int chunks = (group + hpj - 1) / hpj;
    for (int job = warp; job < tiles * chunks; job += kSplitWarps) {
      const int g0 = job % chunks * hpj, c = job / chunks * kWarp + lane, nh = min(hpj, group - g0);
      const bool valid = c < n && ok[c] != 0;
      float s[kScoreHeads];
      if (valid) {
        cell_scores<kHd>(kst + static_cast<size_t>(c) * l.kstride, qs + g0 * hd, hd, f16, l.pieces16, nh, s);
      }
#pragma unroll
      for (int h = 0; h < kScoreHeads; ++h) {
        if (h < nh) p[(g0 + h) * cap + c] = valid ? s[h] * scale : -INFINITY;
      }
    }
    __syncthreads();
    lap(4);

    // Each head's running softmax: warp w heads w, w + 16.
    for (int g = warp; g < group; g += kSplitWarps) {
      float mx = -INFINITY;
      for (int c = lane; c < n; c += kWarp) mx = fmaxf(mx, p[g * cap + c]);
      mx = warp_max(mx);
      const float m_old = m_run[g], m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
      for (int c = lane; c < n; c += kWarp) {
        const float e = m_new == -INFINITY ? 0.0f : expf(p[g * cap + c] - m_new);
        p[g * cap + c] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        const float r = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
        corr[g] = r;
        l_run[g] = l_run[g] * r + sum;
        m_run[g] = m_new;
      }
    }
    __syncthreads();
    lap(5);

    // The V rows weighted: the sums so far rescaled to this pass's maxima,
    // then this thread's cells, each V pair against every head's weight (a
    // broadcast: a warp's lanes are one set's pairs).
    if (summing) {
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        if (g < group) {
          acc[g].x *= corr[g];
          acc[g].y *= corr[g];
        }
      }
#pragma unroll 2
      for (int c = set; c < n; c += n_sets) {
        const float2 v = row_pair(vst + static_cast<size_t>(c) * l.vstride, pair, f16);
#pragma unroll
        for (int g = 0; g < kG; ++g) {
          if (g < group) {
            const float w = p[g * cap + c];
            acc[g].x = fmaf(w, v.x, acc[g].x);
            acc[g].y = fmaf(w, v.y, acc[g].y);
          }
        }
      }
    }
    lap(6);
  }
  __syncthreads();  // the rows are read no more: their space takes the sets' sums
  // The sets' sums added in set order: red[set][g][d], then each (g, d) by a thread.
  float* red = reinterpret_cast<float*>(kst);
  if (summing) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      if (g < group) *reinterpret_cast<float2*>(red + (static_cast<size_t>(set) * group + g) * hd + 2 * pair) = acc[g];
    }
  }
  __syncthreads();
  const int outs = group * hd;
  auto set_sum = [&](int i) {
    float s = 0.0f;
    for (int st = 0; st < n_sets; ++st) s += red[static_cast<size_t>(st) * outs + i];
    return s;
  };

  float* out_s = qs;  // [group][head_dim]
  if (n_splits == 1) {
    for (int i = t; i < outs; i += kSplitThreads) {
      const float lr = l_run[i / hd];
      out_s[i] = set_sum(i) * (lr > 0.0f ? 1.0f / lr : 0.0f);
    }
  } else {
    // This split's partial; the KV head's last block combines them all.
    const int head = split_head_floats(hd);
    const size_t stride = static_cast<size_t>(a.n_heads) * head;  // a split's partials
    float* base = a.partials + static_cast<size_t>(kvh) * group * head;
    float* part = base + static_cast<size_t>(split) * stride;
    for (int i = t; i < outs; i += kSplitThreads) part[i / hd * head + i % hd] = set_sum(i);
    if (t < group) {
      part[t * head + hd] = m_run[t];
      part[t * head + hd + 1] = l_run[t];
    }
    __threadfence();
    __syncthreads();
    if (t == 0) {
      last = atomicAdd(&counters[kvh], 1) == n_splits - 1;
      // The last block: its reads of the other splits' partials after their
      // count (acquire; the barrier below orders the block's reads after it),
      // and the count back to zero for the next launch, which the launch
      // boundary publishes. (Before: a fence by every thread after the reset,
      // a round trip on the critical path.)
      if (last) {
        __threadfence();
        counters[kvh] = 0;
      }
    }
    __syncthreads();
    lap(7);
    report(probe, 8);
    if (!last) return;
    if (probing) probe += kPhaseProbeFields;  // kind 6: the last block's combine
    for (int i = 0; i < kPhaseProbeFields; ++i) phase[i] = 0;
    // The splits' partial sums into shared memory (where the K rows were),
    // comb_splits at a time — every split in one round trip but for shapes
    // whose partials outgrow the shared memory — with the statistics loaded
    // meanwhile. (A thread's loads of the splits straight from L2, 8 at a
    // time, took that many round trips.) Where a split's pieces fit the
    // block, thread t takes piece t % pieces of splits t / pieces, ... (no
    // division a piece).
    const int split_floats = group * head, pieces = split_floats / 4;  // a split's partials, in 16-byte pieces
    float* comb = reinterpret_cast<float*>(kst);
    auto fetch = [&](int s0) {
      const int n = min(comb_splits, n_splits - s0);
      auto copy = [&](int s, int piece) {
        stage_piece(reinterpret_cast<unsigned char*>(comb + static_cast<size_t>(s) * split_floats + 4 * piece),
                    reinterpret_cast<const unsigned char*>(base + (s0 + s) * stride + 4 * piece));
      };
      if (pieces <= kSplitThreads) {
        const int ways = kSplitThreads / pieces, piece = t % pieces;
        for (int s = t / pieces; s < n && t < ways * pieces; s += ways) copy(s, piece);
      } else {
        for (int i = t; i < n * pieces; i += kSplitThreads) copy(i / pieces, i % pieces);
      }
    };
    // The statistics' loads first, so that they come back ahead of the
    // partials' copies and the weights are worked out while those land.
    float* ms = reinterpret_cast<float*>(split_smem + l.wgt);  // [group][n_grid] maxima, then weights
    float* ls = ms + group * n_grid;                            // [group][n_grid] sums of exp
    float* den = ls + group * n_grid;                           // [group]
    const int n_stats = n_splits * group, i0 = t, i1 = t + kSplitThreads;  // a thread's first two, in registers
    auto stat_at = [&](int i) {
      return __ldcg(reinterpret_cast<const float2*>(base + (i / group) * stride + (i % group) * head + hd));
    };
    float2 st0 = make_float2(0.0f, 0.0f), st1 = st0;
    if (i0 < n_stats) st0 = stat_at(i0);
    if (i1 < n_stats) st1 = stat_at(i1);
    fetch(0);
    for (int i = t; i < n_stats; i += kSplitThreads) {
      const int s = i / group, g = i % group;
      const float2 st = i == i0 ? st0 : i == i1 ? st1 : stat_at(i);
      ms[g * n_grid + s] = st.x;
      ls[g * n_grid + s] = st.y;
    }
    __syncthreads();
    lap(1);
    for (int g = warp; g < group; g += kSplitWarps) {
      float mx = -INFINITY;
      for (int s = lane; s < n_splits; s += kWarp) {
        if (ls[g * n_grid + s] > 0.0f) mx = fmaxf(mx, ms[g * n_grid + s]);
      }
      mx = warp_max(mx);
      float d = 0.0f;
      for (int s = lane; s < n_splits; s += kWarp) {
        const float sum = ls[g * n_grid + s];
        const float w = sum > 0.0f ? expf(ms[g * n_grid + s] - mx) : 0.0f;
        ms[g * n_grid + s] = w;
        d += w * sum;
      }
      d = warp_sum(d);
      if (lane == 0) den[g] = d;
    }
    lap(2);
    float2 y[kSplitHeadsPerThread];
#pragma unroll
    for (int k = 0; k < kSplitHeadsPerThread; ++k) y[k] = make_float2(0.0f, 0.0f);
    for (int s0 = 0; s0 < n_splits; s0 += comb_splits) {
      if (s0 > 0) {
        __syncthreads();  // the last chunk's reads are done
        fetch(s0);
      }
      staged_pieces_landed();
      __syncthreads();  // (the first time, also the weights)
      const int n = min(comb_splits, n_splits - s0);
      if (summing) {
#pragma unroll
        for (int k = 0; k < kSplitHeadsPerThread; ++k) {
          const int g = set + k * n_sets;
          if (g >= group) break;
          const float* w = ms + g * n_grid + s0;
          const float* col = comb + g * head + 2 * pair;
          for (int s = 0; s < n; ++s) {
            const float2 v = *reinterpret_cast<const float2*>(col + static_cast<size_t>(s) * split_floats);
            y[k].x = fmaf(w[s], v.x, y[k].x);
            y[k].y = fmaf(w[s], v.y, y[k].y);
          }
        }
      }
    }
    if (summing) {
#pragma unroll
      for (int k = 0; k < kSplitHeadsPerThread; ++k) {
        const int g = set + k * n_sets;
        if (g >= group) break;
        const float inv = den[g] > 0.0f ? 1.0f / den[g] : 0.0f;
        out_s[g * hd + 2 * pair] = y[k].x * inv;
        out_s[g * hd + 2 * pair + 1] = y[k].y * inv;
      }
    }
    __syncthreads();
    lap(3);
  }
  __syncthreads();
  // The group's outputs (its heads are consecutive), and their Q8 copy
  // (head_dim % 32 == 0: whole Q8 blocks a warp).
  float* out = a.out + static_cast<size_t>(kvh) * group * hd;
  for (int i = t; i < group * hd; i += kSplitThreads) out[i] = out_s[i];
  if (a.out_q.q != nullptr && hd % kWarp == 0) {
    const int first = kvh * group * hd / kWarp;
    for (int b = warp; b < group * hd / kWarp; b += kSplitWarps) {
      quantize_block_q8(out_s[b * kWarp + lane], lane, first + b, a.out_q.q, static_cast<float2*>(a.out_q.ds));
    }
  }
  if (probing) {
    lap(n_splits == 1 ? 7 : 4);
    report(probe, 8);
  }
}

// Generic attention: block (KV head, token) walks the history in chunks of
// blockDim cells with an online softmax, for the whole query group.
__global__ void attention_generic_kernel(AttentionArgs a) {
  pdl_begin();
  extern __shared__ float smem[];
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, kvh = blockIdx.x, tok = blockIdx.y;
  const int chunk = blockDim.x, t = threadIdx.x;
  const int n_seq = *a.n_seq;
  const int kv_dim = a.n_kv_heads * hd;
  const float scale = rsqrtf(static_cast<float>(hd));
  float* q = smem;              // [group][hd]
  float* p = q + group * hd;    // [group][chunk]
  float* run = p + group * chunk;  // [group][2]: running max, running sum
  float* corr = run + 2 * group;   // [group]: rescale factor of this chunk
  const float* qrow = a.q + static_cast<size_t>(tok) * a.n_heads * hd + static_cast<size_t>(kvh) * group * hd;
  for (int i = t; i < group * hd; i += blockDim.x) q[i] = qrow[i];
  if (t < group) {
    run[2 * t] = -INFINITY;
    run[2 * t + 1] = 0.0f;
  }
  const int qpos = a.q_pos[tok];
  float acc[kMaxGroup][(kMaxHeadDim + 63) / 64];  // dims t, t + chunk, ... (chunk >= 64)
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g)
#pragma unroll
    for (int i = 0; i < (kMaxHeadDim + 63) / 64; ++i) acc[g][i] = 0.0f;
  __syncthreads();
  const int lane = t % kWarp, warp = t / kWarp, n_warps = blockDim.x / kWarp;
  for (int j0 = 0; j0 < n_seq; j0 += chunk) {
    const int j = j0 + t;
    bool valid = false;
    int cell = 0;
    if (j < n_seq) {
      cell = a.seq_cells[j];
      valid = a.cell_pos[cell] <= qpos;
    }
    float s[kMaxGroup];
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) s[g] = 0.0f;
    if (valid) {
      const size_t base = static_cast<size_t>(cell) * kv_dim + static_cast<size_t>(kvh) * hd;
      for (int d = 0; d < hd; ++d) {
        const float kd = load_kv(a.k_cache, a.cache_f16, base + d);
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g)
          if (g < group) s[g] += q[g * hd + d] * kd;
      }
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g)
      if (g < group) p[g * chunk + t] = valid ? s[g] * scale : -INFINITY;
    __syncthreads();
    for (int g = warp; g < group; g += n_warps) {
      float m = -INFINITY;
      for (int i = lane; i < chunk; i += kWarp) m = fmaxf(m, p[g * chunk + i]);
      m = warp_max(m);
      const float m_old = run[2 * g];
      const float m_new = fmaxf(m_old, m);
      float l = 0.0f;
      for (int i = lane; i < chunk; i += kWarp) {
        const float e = m_new == -INFINITY ? 0.0f : expf(p[g * chunk + i] - m_new);
        p[g * chunk + i] = e;
        l += e;
      }
      l = warp_sum(l);
      if (lane == 0) {
        const float c = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
        corr[g] = c;
        run[2 * g] = m_new;
        run[2 * g + 1] = run[2 * g + 1] * c + l;
      }
    }
    __syncthreads();
    const int n_here = min(chunk, n_seq - j0);
#pragma unroll
    for (int i = 0; i < (kMaxHeadDim + 63) / 64; ++i) {
      const int d = t + i * chunk;
      if (d >= hd) break;
      float vsum[kMaxGroup];
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) vsum[g] = 0.0f;
      for (int jj = 0; jj < n_here; ++jj) {
        const int c = a.seq_cells[j0 + jj];
        const float vd = load_kv(a.v_cache, a.cache_f16, static_cast<size_t>(c) * kv_dim + static_cast<size_t>(kvh) * hd + d);
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g)
          if (g < group) vsum[g] += p[g * chunk + jj] * vd;
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g)
        if (g < group) acc[g][i] = acc[g][i] * corr[g] + vsum[g];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < (kMaxHeadDim + 63) / 64; ++i) {
    const int d = t + i * chunk;
    if (d >= hd) break;
    for (int g = 0; g < group; ++g) {
      const float l = run[2 * g + 1];
      const float v = l > 0.0f ? acc[g][i] / l : 0.0f;
      const size_t idx = static_cast<size_t>(tok) * a.n_heads * hd + static_cast<size_t>(kvh * group + g) * hd + d;
      a.out[idx] = v;
      if (a.out_f16) static_cast<__half*>(a.out_f16)[x16_index(static_cast<int64_t>(idx), a.out_f16_order)] = __float2half_rn(v);
    }
  }
}

}  // namespace

uint64_t attention_staged_v_launches() { return g_staged_v_launches.load(std::memory_order_relaxed); }
uint64_t attention_fixed_shape_launches() { return g_fixed_shape_launches.load(std::memory_order_relaxed); }
uint64_t attention_split_launches() { return g_split_launches.load(std::memory_order_relaxed); }

cudaError_t set_attention_probe(unsigned long long* fields) {
  return cudaMemcpyToSymbol(g_attention_probe, &fields, sizeof(fields));
}

cudaError_t launch_attention_generic(const AttentionArgs& a, cudaStream_t stream) {
  const int group = a.n_kv_heads > 0 ? a.n_heads / a.n_kv_heads : 0;
  if (a.n_tokens < 1 || group < 1 || group > kMaxGroup || a.n_heads % a.n_kv_heads != 0 || a.head_dim < 1 ||
      a.head_dim > kMaxHeadDim) {
    return cudaErrorInvalidValue;
  }
  if (a.out_f16 != nullptr && a.out_f16_order == X16Order::kLanes && a.n_heads * a.head_dim % 128 != 0) return cudaErrorInvalidValue;
  constexpr int chunk = 64;  // cells per pass and threads; each thread keeps dims t, t + 64, ... (≤ 4)
  const size_t smem = sizeof(float) * (static_cast<size_t>(group) * a.head_dim + static_cast<size_t>(group) * chunk + 3 * group);
  cudaError_t e = launch_kernel(attention_generic_kernel, dim3(a.n_kv_heads, a.n_tokens), dim3(chunk), smem, stream, a);
  if (e != cudaSuccess || a.out_q.q == nullptr) return e;
  return launch_quantize_q8(a.out, a.n_tokens, a.n_heads * a.head_dim, a.out_q, stream);
}

namespace {

// Splits a KV head of the split kernel: the SMs shared out over the KV heads
// (a block an SM), or set_attention_split_blocks's count (up to twice that);
// never more than the cache holds kSplitMinCells-cell ranges. The partials
// are sized for the most (split_most), whatever is set later.
int split_most(int max_cells) {
  return std::max(1, std::min(2 * std::max(1, device_limits().sms), (max_cells + kSplitMinCells - 1) / kSplitMinCells));
}
int split_grid(const AttentionArgs& a) {
  const int fill = std::max(1, device_limits().sms / a.n_kv_heads);
  const int set = attention_split_blocks();
  const int want = set > 0 ? std::min(set, 2 * fill) : fill;
  return std::max(1, std::min(want, split_most(a.max_cells)));
}

// Floats of the partials: the larger need of the heads kernel's 256-cell
// chunks and the split kernel's splits; the counters follow them.
size_t partial_floats(int n_heads, int head_dim, int max_cells) {
  const size_t chunks = static_cast<size_t>((max_cells + kChunk - 1) / kChunk) * static_cast<size_t>(head_dim + 2);
  const size_t splits = static_cast<size_t>(split_most(max_cells)) * static_cast<size_t>(split_head_floats(head_dim));
  return std::max(chunks, splits) * static_cast<size_t>(n_heads);
}

bool fused_q8(const AttentionArgs& a) { return a.out_q.q != nullptr && a.head_dim % kWarp == 0; }

// The most cells a pass of the split kernel stages: a multiple of 32 from 128
// down whose rows fit the block's shared memory.
int split_cap(int head_dim, int group, bool f16, int splits) {
  const size_t limit = static_cast<size_t>(device_limits().max_smem) - kSplitStaticSmem;
  for (int cap = kSplitMaxCells; cap >= kSplitMinCells; cap -= kWarp) {
    if (SplitLayout(head_dim, group, f16, cap, splits).rows_end <= limit) return cap;
  }
  return 0;
}

cudaError_t launch_split(const AttentionArgs& a, int group, cudaStream_t stream) {
  const int splits = split_grid(a);
  const int cap = split_cap(a.head_dim, group, a.cache_f16, splits);
  if (cap == 0) return cudaErrorInvalidValue;
  const SplitLayout l(a.head_dim, group, a.cache_f16, cap, splits);
  // The combine's splits a round trip: all of them where the block's shared
  // memory holds their partials (from the K rows on), else as many as it does.
  const size_t split_bytes = sizeof(float) * static_cast<size_t>(group) * split_head_floats(a.head_dim);
  const size_t room = static_cast<size_t>(device_limits().max_smem) - kSplitStaticSmem - l.k;
  const int comb_splits = static_cast<int>(std::min<size_t>(static_cast<size_t>(splits), room / split_bytes));
  if (comb_splits < 1) return cudaErrorInvalidValue;
  const size_t smem = std::max(l.rows_end, l.k + static_cast<size_t>(comb_splits) * split_bytes);
  // The models' head dims (and groups of up to 8) on kernels compiled for
  // them (set_attention_fixed_shape), other shapes on the general one.
  auto kernel = attention_split_kernel<0, kMaxGroup>;
  if (attention_fixed_shape() && group <= 8 && a.head_dim == 128) kernel = attention_split_kernel<128, 8>;
  if (attention_fixed_shape() && group <= 8 && a.head_dim == 64) kernel = attention_split_kernel<64, 8>;
  if (const cudaError_t st = allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem); st != cudaSuccess) {
    return st;
  }
  int* counters = reinterpret_cast<int*>(a.partials + partial_floats(a.n_heads, a.head_dim, a.max_cells));
  const cudaError_t st = launch_kernel(kernel, dim3(a.n_kv_heads, splits), dim3(kSplitThreads), smem, stream, a, counters, cap,
                                       comb_splits);
  if (st == cudaSuccess) g_split_launches.fetch_add(1, std::memory_order_relaxed);
  if (st == cudaSuccess && kernel != attention_split_kernel<0, kMaxGroup>) g_fixed_shape_launches.fetch_add(1, std::memory_order_relaxed);
  return st;
}

cudaError_t launch_heads(const AttentionArgs& a, cudaStream_t stream) {
  const int n_chunks = (a.max_cells + kChunk - 1) / kChunk;
  int* counters = reinterpret_cast<int*>(a.partials + partial_floats(a.n_heads, a.head_dim, a.max_cells));
  const int threads = attention_threads() != 0 ? attention_threads() : a.head_dim >= 128 ? 512 : 256;
  // The V rows staged in shared memory where the rows are a warp's pieces
  // and a chunk's fit kMaxStagedV (sm_80: cp.async).
  const HeadShape sh(a.head_dim, a.cache_f16, threads);
  const size_t v_bytes = static_cast<size_t>(kChunk) * static_cast<size_t>(a.head_dim) * static_cast<size_t>(sh.esize);
  const bool stage_v = attention_stage_v() && device_limits().cc_major >= 8 && sh.shuffled && v_bytes <= kMaxStagedV;
  const size_t smem = stage_v ? staged_v_offset(n_chunks) + v_bytes : sizeof(float) * n_chunks;
  auto launch = [&](auto kernel) {
    if (const cudaError_t st = allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem); st != cudaSuccess) return st;
    const cudaError_t st =
        launch_kernel(kernel, dim3(a.n_heads, n_chunks), dim3(threads), smem, stream, a, counters, stage_v, attention_fit_batch());
    if (st == cudaSuccess && stage_v) g_staged_v_launches.fetch_add(1, std::memory_order_relaxed);
    return st;
  };
  // The models' head shapes with an f16 cache take kernels with the shape
  // fixed at compile time (set_attention_fixed_shape); other shapes the
  // general one.
  if (attention_fixed_shape() && a.cache_f16) {
    auto fixed = [&](auto kernel) {
      const cudaError_t st = launch(kernel);
      if (st == cudaSuccess) g_fixed_shape_launches.fetch_add(1, std::memory_order_relaxed);
      return st;
    };
    if (threads == 512 && a.head_dim == 128) return fixed(attention_heads_kernel<512, 128, true>);
    if (threads == 256 && a.head_dim == 64) return fixed(attention_heads_kernel<256, 64, true>);
    if (threads == 256 && a.head_dim == 128) return fixed(attention_heads_kernel<256, 128, true>);
    if (threads == 512 && a.head_dim == 64) return fixed(attention_heads_kernel<512, 64, true>);
  }
  return threads == 512 ? launch(attention_heads_kernel<512>) : launch(attention_heads_kernel<256>);
}

}  // namespace

size_t attention_partials_floats(int n_heads, int head_dim, int max_cells) {
  return partial_floats(n_heads, head_dim, max_cells) + static_cast<size_t>(n_heads);  // + a counter a head (KV head)
}

int attention_decode_launches(const AttentionArgs& a) { return 1 + (a.out_q.q != nullptr && !fused_q8(a) ? 1 : 0); }

cudaError_t launch_attention_decode(const AttentionArgs& a, cudaStream_t stream) {
  const int group = a.n_kv_heads > 0 ? a.n_heads / a.n_kv_heads : 0;
  if (a.n_tokens != 1 || group < 1 || group > kMaxGroup || a.n_heads % a.n_kv_heads != 0 || a.head_dim < 1 ||
      a.head_dim > kMaxHeadDim || a.max_cells < 1) {
    return cudaErrorInvalidValue;
  }
  // The split kernel's threads take dimensions in pairs: odd head dims take
  // the one-launch kernel.
  const bool split = a.decode_split && a.head_dim % 2 == 0;
  const cudaError_t e = split ? launch_split(a, group, stream) : launch_heads(a, stream);
  if (e != cudaSuccess || a.out_q.q == nullptr || fused_q8(a)) return e;
  return launch_quantize_q8(a.out, 1, a.n_heads * a.head_dim, a.out_q, stream);
}

}  // namespace minfer::kernels

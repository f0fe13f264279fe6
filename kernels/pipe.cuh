// The pipeline of the pipelined decode products (matvec_piped.cu,
// matvec_bridge.cu; sm_80 and later): each lane copies its units' pieces
// with cp.async into slots of its own in shared memory, `stages` steps
// ahead of the one it computes (a step: one unit of each weight a row has),
// the first of them before the PDL wait (weights are constants). One block
// of kPipedWarps warps an SM, the launch exactly the resident blocks. Lane
// l of a row takes units l, l + 32, ... in order, as the plain kernels
// (matvec_kernels.cuh) do: the same sums, the same bits.
//
// What bounds them is their loads, not their arithmetic. On the H200
// (2026-12-04, kernel bench, weights from DRAM, µs a launch; builds with the
// dot products taken out, each staged unit's words folded instead, and with
// the copies taken out, the dot products run on whatever the stages held):
// 7B gate/up Q4_K 19.8 as it is, 18.5 without arithmetic, 11.8 without
// copies (the copy rate: 18.0); ffn_down Q4_K 12.1 / 11.1 / 7.3; ffn_down
// Q6_K 18.4 / 15.8 / 11.9; gate/up Q8_0 34.4 / 34.1 / 13.0. Fewer
// instructions in the dot products can win at most the gap to the first
// figure (bench/results/2026-12-04-h200-session33, run 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/dot.cuh"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"

namespace minfer::kernels::piped {

constexpr int kPipedWarps = 32;   // a block: one an SM
constexpr int kMaxPipedStages = 8;  // set_piped_stages's limit (cp_async_wait's cases)

// A lane's slots for one unit of T: Unit::fetch's reads by size — 16-byte
// pieces and 4-byte words (the word of a 2-byte scale, or a lane's share of
// bytes its neighbours use too). In 16-byte slots for every piece, as
// before 2026-12-01, Q8_0 took 48 bytes a lane a unit for its 34 and Q6_K 80
// for its 54.5, and 192 KiB of slots gave Q6_K 2 stages and gate/up Q8_0 2.
// Now they get 3 (H200, 2026-12-01, CUPTI shares against the session
// before: 7B ffn_down Q6_K 19.34 → 17.19 µs, output head Q6_K 153.8 →
// 143.3; tg128 7B Q4_K_M 495 → 501 tok/s, Q8_0 unchanged). Held at 2
// stages the compact slots read 497 and 500: the fewer bytes a lane reads
// and stores count as much as the third stage.
//
// A K-quant super-block's 16-byte meta, which the four lanes of its units
// share (Unit::fetch's quad16), is a word a lane: each copies its quarter and
// reads the four (Q4_K: 36 bytes a lane a unit, as in DRAM, instead of 48;
// gate/up 3 stages instead of 2). On the H200 (2026-12-02, kernel bench):
// 7B gate/up Q4_K 25.1-26.5 → 21.1 µs, ffn_down Q4_K 14.2-15.0 → 13.0; tg128
// 7B Q4_K_M 498-502 → 529-530 tok/s (with Unit::acts, dot.cuh).
template <int kType>
constexpr int kP16 = kType == static_cast<int>(WType::kQ8_0)   ? 2
                     : kType == static_cast<int>(WType::kQ4_K) ? 2
                     : kType == static_cast<int>(WType::kQ5_K) ? 4
                     : kType == static_cast<int>(WType::kQ6_K) ? 3
                                                               : 0;
// Words: Q8_0's scale, a K-quant's meta quarter; Q6_K's half of the 8 scale
// bytes a pair of lanes shares, and the word of its d, which one lane of four
// copies.
template <int kType>
constexpr int kP4 = kType == static_cast<int>(WType::kQ6_K) ? 2 : kP16<kType> > 0 ? 1 : 0;

// One warp's stage for kW weights a row: the warp's 16-byte pieces (piece i
// of lane l at slot i * 32 + l: a warp's reads of one piece are
// conflict-free), then its words. A multiple of 128 bytes, so every stage
// and region stays 16-byte aligned.
template <int kType, int kW>
struct StageLayout {
  static constexpr int kOff4 = kW * kP16<kType> * kWarp * 16;
  static constexpr int kBytes = kOff4 + kW * kP4<kType> * kWarp * 4;
};

// Where the j-th row a warp takes is: its task and its row in the task.
struct RowAt {
  int task, r;
};

// The staged activations: the Q8 values (k bytes, rounded up to whole
// 128-byte rows of chunks, which the swizzle permutes within), then the
// scales (stage_acts).
__host__ __device__ inline size_t staged_values_bytes(int k) { return (static_cast<size_t>(k) + 127) / 128 * 128; }
__host__ __device__ inline size_t staged_bytes(int k) { return staged_values_bytes(k) + static_cast<size_t>(k / 32) * sizeof(float2); }
// With the chunk sums after the scales (stage_acts<true>; DotInput::csum).
__host__ __device__ inline size_t staged_bytes(int k, bool sums) {
  return staged_bytes(k) + (sums ? static_cast<size_t>(k / 16) * sizeof(int) : 0);
}
// The types whose dot products use the chunk sums (Q6_K: Σ x for its -32).
template <int kType>
constexpr bool kChunkSums = kType == static_cast<int>(WType::kQ6_K);

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// IssueFetch: Unit::fetch's pieces go out as cp.async into this lane's slots
// of a stage, in the order the fetch reads them (a 2-byte scale as the
// aligned 4-byte word holding it). ReadFetch: the same fetch again, its
// pieces from the slots, whatever places it is given (the 2-byte scale's
// half of its word: `high`, Unit::d_high). `stage`: the warp's stage; L: its
// StageLayout.
template <class L>
struct IssueFetch {
  unsigned char* stage;
  int lane;
  int i16 = 0, i4 = 0;
  __device__ int4 operator()(const void* p) {
    const uint32_t dst = smem_addr(stage + 16 * (kWarp * i16++ + lane));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(p) : "memory");
    return int4{};
  }
  __device__ uint16_t u16(const uint16_t* p) {
    word(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{3}));
    return 0;
  }
  __device__ int4 quad16(const void* p) {
    word(static_cast<const uint8_t*>(p) + 4 * (lane % 4));
    return int4{};
  }
  __device__ int2 pair8(const void* p) {
    word(static_cast<const uint8_t*>(p) + 4 * (lane % 2));
    return int2{};
  }
  __device__ uint16_t quad_u16(const uint16_t* p) {
    word(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{3}), lane % 4 == 0);
    return 0;
  }
  __device__ void word(const void* p, bool copy = true) {
    const uint32_t dst = smem_addr(stage + L::kOff4 + 4 * (kWarp * i4++ + lane));
    if (copy) asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(p) : "memory");
  }
};
template <class L>
struct ReadFetch {
  const unsigned char* stage;
  int lane;
  bool high;
  int i16 = 0, i4 = 0;
  __device__ int4 operator()(const void*) { return *reinterpret_cast<const int4*>(stage + 16 * (kWarp * i16++ + lane)); }
  __device__ uint16_t u16(const uint16_t*) { return half(word(lane)); }
  // The words of this lane's group of four, one after the other: the 16
  // bytes (a broadcast to the four).
  __device__ int4 quad16(const void*) {
    return *reinterpret_cast<const int4*>(stage + L::kOff4 + 4 * (kWarp * i4++ + lane / 4 * 4));
  }
  __device__ int2 pair8(const void*) {
    return *reinterpret_cast<const int2*>(stage + L::kOff4 + 4 * (kWarp * i4++ + lane / 2 * 2));
  }
  __device__ uint16_t quad_u16(const uint16_t*) { return half(word(lane / 4 * 4)); }
  // The next word, as lane `from` copied it.
  __device__ uint32_t word(int from) { return *reinterpret_cast<const uint32_t*>(stage + L::kOff4 + 4 * (kWarp * i4++ + from)); }
  __device__ uint16_t half(uint32_t word) const { return static_cast<uint16_t>(high ? word >> 16 : word); }
};

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}
// The same for a count known at run time (uniform across the warp; the
// instruction takes an immediate).
__device__ __forceinline__ void cp_async_wait(int pending) {
  switch (pending) {
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    case 7: cp_async_wait<7>(); break;
    default: cp_async_wait<0>(); break;
  }
}

// One warp's rows of one product: n_rows rows (row_at(j)) of kW weights
// (weight(task, wi)) of type T, n_units units each.
//
// A lane's unit in step `it` of a row is lane + 32 it, so its pieces move by
// fixed strides from step to step: the issuing side works a row's places
// out once (Unit::walk, at the row's first step) and adds the strides
// (Walk::at), and the reading side takes the pieces from the slots in the
// order they went in, with only the 2-byte scales' halves (Unit::d_high) and
// the activations' places to find. In a row's last step a lane past its end
// takes its previous unit again (`step`), its value dropped. Before
// (2026-12-03), each step was worked out from (task, row, unit) on both
// sides. On the H200, same machine each (bench/results/2026-12-03-h200-
// session23): a Q6_K step ~275 → ~255 SASS instructions issued (about 130
// of them the dot product itself); kernel bench 7B gate/up Q8_0 35.7 → 34.1
// µs, Q4_K 20.9 → 20.6, ffn_down Q4_K 13.4 → 12.7, Q6_K 19.3 → 19.0, Q8_0
// 19.1 → 18.7, output head Q6_K 118.0 → 117.1; a greedy decode step (CUPTI)
// 7B Q8_0 2,480.4-2,480.9 → 2,376.6-2,377.3 µs (gate/up 34.9 → 32.4 µs a
// layer, q/k/v 6.3 → 5.3, ffn_down 21.6 → 21.0), Q4_K_M 1,910.4-1,910.5 →
// 1,894.8-1,896.9; tg128 7B Q8_0 403-405 → 419-420 tok/s, Q4_K_M 522-524 →
// 525-528.
//
// Tried on the H200 (2026-12-03, not kept): a warp's rows taken as one
// sequence of units, lane l unit 32 s + l of it in step s, so that a row of
// 56 units (7B's gate/up and output head) takes 1.75 steps, not 2 with 8
// lanes redoing a unit in the second; the same bits (a row's lane sums are
// the plain kernels' rotated across the lanes, and warp_sum's butterfly adds
// a rotation the same way). The loop grew from ~274 to ~293 SASS
// instructions a step; kernel bench 7B gate/up Q4_K 19.5 → 19.7 µs, output
// head Q6_K 116.3 → 112.2, ffn_down Q4_K 12.1 → 12.5 (one row a warp: only
// the longer step); a greedy decode step (CUPTI) 7B Q4_K_M 1,683.5 → 1,695.0
// µs, gate/up's share 20.60 → 20.82 µs a layer; tg128 7B Q4_K_M 592 → 587 /
// 581 tok/s (bench/results/2026-12-03-h200-session28, run1-tree.patch).
// Inside a step gate/up's rows are bound by DRAM, not by its lanes' work.
//
// kSums: the activations were staged with their chunk sums (stage_acts<true>).
template <WType T, int kW_, bool kSums_, class RowOf, class WeightOf>
struct Phase {
  static constexpr int kW = kW_;
  using L = StageLayout<static_cast<int>(T), kW>;
  using U = Unit<T>;
  static constexpr bool kSums = kSums_;
  using Acts = StagedActs<kSums>;
  int n_rows, n_units, n_iter;  // n_iter: steps a row
  RowOf row_at;
  WeightOf weight;

  // The issuing side's place: row j (at), step it, and the row's walks.
  struct Issuer {
    int j = 0, it = 0;
    RowAt at{0, 0};
    typename U::Walk walk[kW];
  };
  // The step whose unit a lane takes in step `it`: the same, or in the
  // row's last step, for a lane past the row's end, its step before.
  __device__ __forceinline__ int step(int lane, int it) const { return min(it, (n_units - 1 - lane) / kWarp); }

  // The issuer's next step into a stage: false once the rows are done.
  __device__ __forceinline__ bool issue(unsigned char* stage, int lane, Issuer& is) const {
    if (is.j >= n_rows) return false;
    if (is.it == 0) {
      is.at = row_at(is.j);
#pragma unroll
      for (int wi = 0; wi < kW; ++wi) is.walk[wi] = U::walk(weight(is.at.task, wi), is.at.r, lane);
    }
    const int e = step(lane, is.it);
    IssueFetch<L> f{stage, lane};
#pragma unroll
    for (int wi = 0; wi < kW; ++wi) U::fetch(is.walk[wi].at(weight(is.at.task, wi), lane, e, n_units), f);
    if (++is.it == n_iter) is.it = 0, ++is.j;
    return true;
  }
  // A row the warp computes: where it is, and for each weight whether the
  // lane's 2-byte scale is the high half of its word (Unit::d_high: the same
  // at every step of the row, so found once a row, not once a step).
  struct Row {
    RowAt at;
    bool high[kW];
  };
  __device__ __forceinline__ Row row(int j, int lane) const {
    Row w{row_at(j), {}};
#pragma unroll
    for (int wi = 0; wi < kW; ++wi) w.high[wi] = U::d_high(weight(w.at.task, wi), w.at.r, lane);
    return w;
  }
  // The staged activations of unit lane + 32 e (stage_acts) are unit lane's
  // moved on by e × 32 units: their Q8 values fill whole groups of eight
  // 128-byte rows, the swizzle's period (swizzled_chunk permutes a row's
  // chunks by the row's index mod 8), so the swizzled places, the scales and
  // the chunk sums' slots all move by fixed strides. A lane's own places are
  // then worked out once (the compiler hoists them), not once a step. With
  // each row's scale halves found once a row (row()), on the H200
  // (2026-12-03, same machine, CUPTI twice each, against the code before,
  // bench/results/2026-12-03-h200-session24): a greedy 7B Q4_K_M decode step
  // 1,737.8-1,737.8 → 1,723.2-1,723.5 µs (gate/up Q4_K 20.5 → 20.2 µs a
  // layer, the Q6_K launches 23.4 → 23.0), 7B Q8_0 and 0.5B Q8_0 unchanged
  // (2,236.8-2,237.1 vs 2,237.3-2,238.3; 468.6-469.2 vs 468.4-468.6); kernel
  // bench 7B ffn_down Q6_K 18.9 → 18.2 µs.
  __device__ static DotInput acts_at(const DotInput& in, int e) {
    constexpr int kStep = kWarp * U::kElems;  // values (bytes) 32 units hold
    static_assert(kStep % 1024 == 0, "32 units' values are whole groups of eight 128-byte rows");
    if constexpr (kSums) {  // the scales as floats (SummedSwizzledActs)
      return DotInput{nullptr, in.q + kStep * e, reinterpret_cast<const float2*>(summed_d(in) + kStep / 32 * e),
                      in.csum + kStep / 16 * e};
    }
    return DotInput{nullptr, in.q + kStep * e, in.ds + kStep / 32 * e, nullptr};
  }
  // Step `it` of row `w` from its stage, added to acc.
  __device__ __forceinline__ void dot(const unsigned char* stage, int lane, const Row& w, int it, const DotInput& in,
                                      float (&acc)[kW]) const {
    const int own = lane + kWarp * it;
    const typename U::Acts x = U::acts(lane, acts_at(in, step(lane, it)), Acts{});  // once for the kW weights
    ReadFetch<L> f{stage, lane, false};
    float part[kW];
#pragma unroll
    for (int wi = 0; wi < kW; ++wi) {
      // Unit::dot takes only the unit's place in its super-block from the
      // index: `own` (its low bits are the lane's, the same at every step),
      // the value dropped past the row's end.
      f.high = w.high[wi];
      if constexpr (T == WType::kQ4_K) {
        part[wi] = dot_qk45<false, true>(U::fetch(typename U::Places{}, f), x, own);  // (dot_qk45's kWhole)
      } else {
        part[wi] = U::dot(U::fetch(typename U::Places{}, f), x, own);
      }
    }
    if (own < n_units) {
#pragma unroll
      for (int wi = 0; wi < kW; ++wi) acc[wi] = add_rn(acc[wi], part[wi]);
    }
  }
};
template <WType T, int kW, bool kSums = kChunkSums<static_cast<int>(T)>, class RowOf, class WeightOf>
__device__ __forceinline__ Phase<T, kW, kSums, RowOf, WeightOf> make_phase(int n_rows, int n_units, RowOf row_at, WeightOf weight) {
  return Phase<T, kW, kSums, RowOf, WeightOf>{n_rows, n_units, (n_units + kWarp - 1) / kWarp, row_at, weight};
}

// Computes phase p's steps, the stages one after the other from stage `st`
// of `ring` (stage_bytes each): each step waits for its stage, then
// issue_next() refills it; done(j, row, sums) with each row's warp sums
// (every lane gets them). kStages: `stages` known at compile time (0: not).
template <int kStages, class P, class Issue, class Done>
__device__ __forceinline__ void run_phase(const P& p, const unsigned char* ring, int stage_bytes, int stages, int& st,
                                          int lane, const DotInput& in, Issue& issue_next, Done done) {
  constexpr int kW = P::kW;
  float acc[kW] = {};
  int j = 0, it = 0;
  typename P::Row row = p.n_rows > 0 ? p.row(0, lane) : typename P::Row{};
  for (int s = 0, n_steps = p.n_rows * p.n_iter; s < n_steps; ++s) {
    // This lane's step s has landed.
    if constexpr (kStages > 0) {
      cp_async_wait<kStages - 1>();
    } else {
      cp_async_wait(stages - 1);
    }
    p.dot(ring + st * stage_bytes, lane, row, it, in, acc);
    issue_next();  // step s + stages into the stage just read
    if (++st == stages) st = 0;
    if (++it == p.n_iter) {
      float sums[kW];
      if constexpr (kW == 2) {
        const float2 both = warp_sum_pair(acc[0], acc[1], lane);
        sums[0] = both.x;
        sums[1] = both.y;
        acc[0] = acc[1] = 0.0f;
      } else {
#pragma unroll
        for (int wi = 0; wi < kW; ++wi) {
          sums[wi] = warp_sum(acc[wi]);
          acc[wi] = 0.0f;
        }
      }
      done(j, row.at, sums);
      it = 0;
      if (++j < p.n_rows) row = p.row(j, lane);
    }
  }
}

// The pipeline of one warp over one phase. Calls pdl_begin once its first
// `early` steps are out, issues the rest of the first `stages`, then calls
// start() for the input (every thread of the block calls it there: it may
// hold a barrier). `ring`: the warp's stages, one after the other.
//
// start()'s loads queue behind the SM's weight loads still in flight: 7B's
// gate/up took 3.3 µs a block to stage its 4 KB of activations inside a
// decode step (H200, 2026-12-03, phase probe, kernels.h set_phase_probe).
// Tried there (not kept): the stages not issued before the wait sent after
// start() rather than before it, with all but one (MINFER_PIPED_EARLY=-1)
// or two before the wait — the staging took 2.3 µs, the rows 1.5 µs longer
// (less was in flight at the wait); tg128 7B Q4_K_M 581 / 582 / 572 tok/s
// (all / all but one / two), Q8_0 442 / 448 / 447, and ptxas spilled 12
// bytes in the Q6_K matvec. Nor (same day, run 4) the activations staged by
// the copy engine (two cp.async.bulk on an mbarrier, then moved to their
// swizzled places) instead of the threads' loads: the same bits, gate/up's
// share 21.22 vs 21.39 µs a layer with it, the step 1,716.9 vs 1,721.5 µs;
// tg128 7B Q4_K_M 580 / 579 vs 577 / 578, Q8_0 444 / 443 vs 446 / 446; and
// the run-time switch took the Q4_K matvec from 60 to 64 registers and
// spilled in Q5_K's (bench/results/2026-12-03-h200-session27,
// run4-tree.patch). Nor (2026-12-04) one or two steps copied before the
// wait and the next two or three pulled into the L2 (prefetch.global.L2),
// the activations staged before the rest went out: the norm before gate/up
// 4.87 → 4.44 µs a launch, gate/up 20.69 → 21.82, ffn_down Q4_K 9.66 →
// 12.86; tg128 7B Q4_K_M 587 → 561-579 tok/s, Q8_0 440 → 427-436
// (bench/results/2026-12-04-h200-session33, run3-tree.patch).
// No other road into the SM is faster (2026-12-04, session 34's
// queue_probe.cu, a block an SM): with 192 KB of cp.async copies in flight
// on every SM, a block's 4 KB from L2 took 3.9 µs whether loaded by its
// threads (ld.global.cg or .nc) or by the copy engine (cp.async.bulk), 0.2-
// 0.3 µs with nothing in flight; in clusters of two, 4 KB sent to a
// streaming block by its neighbour — a multicast bulk copy or stores into
// its shared memory — arrived with that block's own stream, 3.7-4.3 µs. The
// data into an SM comes in behind the bytes already on their way to it.
template <int kStages, class P, class Start, class Done>
__device__ __forceinline__ void pipe_rows_n(const P& p, unsigned char* ring, int stages, int early, int lane, Start start,
                                            Done done) {
  constexpr int kStageBytes = P::L::kBytes;
  typename P::Issuer is;  // the next step to issue, into stage ist
  int ist = 0;
  auto issue_next = [&] {
    p.issue(ring + ist * kStageBytes, lane, is);
    cp_async_commit();  // an empty group past the end keeps the count the wait relies on
    if (++ist == stages) ist = 0;
  };
  for (int s = 0; s < early; ++s) issue_next();
  pdl_begin();
  for (int s = early; s < stages; ++s) issue_next();
  const DotInput in = start();  // the activations in shared memory (stage_acts)
  int st = 0;
  run_phase<kStages>(p, ring, kStageBytes, stages, st, lane, in, issue_next, done);
}
// The stage counts the default shapes take (3 and 4 on the H200) with the
// count known at compile time: the wait's count is an immediate, where a
// count known at run time takes a jump table (cp_async_wait: ~8 SASS
// instructions a step, a constant-bank load and an indirect branch among
// them). Others (set_piped_stages) the general way. On the H200
// (2026-12-03, same machine, CUPTI twice each, against the general way): a
// greedy decode step 7B Q8_0 2,376.8-2,377.2 → 2,367.7-2,368.1 µs, Q4_K_M
// 1,895.0-1,895.2 → 1,871.1-1,872.9 (its ffn_down Q4_K 10.1 → 9.4 µs a
// launch); tg128 7B Q8_0 418-421 → 422-423 tok/s, Q4_K_M 527-528 → 532-536.
// Q5_K and Q6_K took the general way then (with three loops in a kernel
// ptxas spilled 12 bytes in theirs); since each row's scale halves and each
// lane's activation places are found once (Phase::row, Phase::acts_at) they
// take the fixed loops too without spilling (tests/gpu/register_diff.sh).
template <class P, class Start, class Done>
__device__ __forceinline__ void pipe_rows(const P& p, unsigned char* ring, int stages, int early, int lane, Start start,
                                          Done done) {
  if (stages == 3) return pipe_rows_n<3>(p, ring, stages, early, lane, start, done);
  if (stages == 4) return pipe_rows_n<4>(p, ring, stages, early, lane, start, done);
  pipe_rows_n<0>(p, ring, stages, early, lane, start, done);
}

// The pipeline of one warp over two phases, one ring: a's rows, then b's,
// b's first steps issued as a's last ones are computed (weights are
// constants), so they stream while the block waits between the phases.
// start_a() gives a's input (after the PDL wait), between() b's; every
// thread of the block calls both (they may hold barriers).
template <class PA, class PB, class StartA, class DoneA, class Between, class DoneB>
__device__ __forceinline__ void pipe_two(const PA& a, const PB& b, unsigned char* ring, int stage_bytes, int stages,
                                         int early, int lane, StartA start_a, DoneA done_a, Between between, DoneB done_b) {
  typename PA::Issuer ia;
  typename PB::Issuer ib;
  int ist = 0;
  auto issue_next = [&] {
    unsigned char* stage = ring + ist * stage_bytes;
    if (!a.issue(stage, lane, ia)) b.issue(stage, lane, ib);
    cp_async_commit();  // an empty group past the end keeps the count the wait relies on
    if (++ist == stages) ist = 0;
  };
  for (int s = 0; s < early; ++s) issue_next();
  pdl_begin();
  for (int s = early; s < stages; ++s) issue_next();
  int st = 0;
  const DotInput in_a = start_a();
  run_phase<0>(a, ring, stage_bytes, stages, st, lane, in_a, issue_next, done_a);
  const DotInput in_b = between();
  run_phase<0>(b, ring, stage_bytes, stages, st, lane, in_b, issue_next, done_b);
}

// The activations staged in shared memory. Read from global memory (L1), a
// step's activation loads — lane l at 16-byte chunk 4 l + i of the row
// (Q4_K, instruction i) or 2 l + i (Q8_0) — touch 16 (8) cache lines an
// instruction, and the L1 pipe, not DRAM, bounded 7B's gate/up Q4_K (Nsight
// Compute, H200, 2026-12-01: stalls of 4.1 cycles an instruction on MIO
// throttle and 3.1 on short scoreboard). In shared memory with chunk c at
// swizzled_chunk(c) (dot.cuh), each quarter of a warp's 16-byte reads falls
// on distinct banks (Q8_0, Q4_K; Q6_K's takes its own places, summed_chunk):
// MIO throttle 3.2, short scoreboard 1.6; kernel bench 7B ffn_down Q4_K
// 17.5 → 13.1 µs, gate/up Q4_K 25.4 → 24.7. (Tried, 2026-12-01, not kept:
// gate and up sharing one load of a unit's staged activations, 4 of the 10
// 16-byte shared loads of a Q4_K step fewer in the PTX — no change: kernel
// bench gate/up Q4_K 24.5 µs, Q8_0 37.4; tg128 7B 478 / 401 tok/s.)
// kSums: each chunk's sum too (at chunk_sum_slot, after the scales; k a
// multiple of 64), so that Q6_K's dot products need not add them up: the
// step of a 7B ffn_down Q6_K lane had 32 dp4a, 16 of them for those sums;
// and the chunks at summed_chunk(c) and the scales' d alone as floats
// (SummedSwizzledActs, dot.cuh): with swizzled_chunk and float2 scales a
// Q6_K step's shared reads of its activations took 48 wavefronts a warp (4
// 16-byte reads two to a place, 4 scale reads four to a bank), now 18.
// Once a block, after the PDL wait. Every thread of the block; ends with a
// barrier.
template <bool kSums = false>
__device__ __forceinline__ DotInput stage_acts(const DotInput& in, int k, unsigned char* smem) {
  constexpr int kBatch = 2;  // chunks a thread loads before it stores (loads in flight)
  int4* q = reinterpret_cast<int4*>(smem);
  float2* ds = reinterpret_cast<float2*>(smem + staged_values_bytes(k));
  int* sums = reinterpret_cast<int*>(smem + staged_bytes(k));
  const int chunks = k / 16, n_ds = k / 32, tid = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  for (int c0 = 0; c0 < chunks; c0 += kBatch * n) {  // n_ds = k / 32 < chunks: the scales ride along
    int4 v[kBatch];
    float2 d[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int c = c0 + i * n + tid;
      if (c < chunks) v[i] = ld16a(in.q + 16 * c);
      if (c < n_ds) d[i] = in.ds[c];
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int c = c0 + i * n + tid;
      if constexpr (kSums) {  // SummedSwizzledActs's places, the scales' d alone
        if (c < chunks) q[summed_chunk(c)] = v[i];
        if (c < n_ds) reinterpret_cast<float*>(ds)[c] = d[i].x;
        if (c < chunks) sums[chunk_sum_slot(c)] = dot_q8x16(make_int4(0x01010101, 0x01010101, 0x01010101, 0x01010101), v[i], 0);
      } else {
        if (c < chunks) q[swizzled_chunk(c)] = v[i];
        if (c < n_ds) ds[c] = d[i];
      }
    }
  }
  __syncthreads();
  return DotInput{nullptr, reinterpret_cast<const int8_t*>(q), ds, kSums ? sums : nullptr};
}
#endif

// One pipelined row written as the plain matvec kernel writes it
// (matvec_kernels.cuh): the deferred norm's scale (kDefer), bias, residual;
// returns the row's argmax key (argmax_pack; 0, which never wins, where the
// task takes no argmax) for the caller to fold. Lane 0 only.
template <bool kDefer>
__device__ __forceinline__ unsigned long long write_row(const MatvecTask& t, int r, float v, float scale) {
  if constexpr (kDefer) v = __fmul_rn(v, scale);
  if (t.bias != nullptr) v += t.bias[r];
  const float o = t.accumulate ? t.y[r] + v : v;
  t.y[r] = o;
  return t.argmax != nullptr ? argmax_pack(o, r) : 0ull;
}
// The same with the key folded into the task's argmax at once.
template <bool kDefer>
__device__ __forceinline__ void store_row(const MatvecTask& t, int r, float v, float scale) {
  const unsigned long long key = write_row<kDefer>(t, r, v, scale);
  if (key != 0) argmax_fold(t.argmax, key);
}

// ---- host side (matvec_piped.cu) ----

// A pipelined launch: one block an SM (at most `max_blocks`), and as many
// stages of `stage_bytes` (all the block's warps' stages) as the shared
// memory left by `fixed` bytes (the staged activations) and `extra` bytes for
// each unit of `work` the block may get holds — up to kDefaultPipedStages or
// set_piped_stages's limit — `early` of them before the PDL wait. grid 0:
// fewer than two stages fit.
struct ResidentShape {
  int grid = 0, stages = 0, early = 0;
  size_t smem = 0;
};
ResidentShape resident_shape(const void* kernel, size_t stage_bytes, size_t fixed, int work, int max_blocks, size_t extra);

// Counts a pipelined launch of `stages` stages (piped_launches,
// last_piped_stages).
void note_piped_launch(int stages);

template <class Kernel, class... Args>
cudaError_t launch_shaped(Kernel kernel, const ResidentShape& sh, cudaStream_t stream, Args&&... args) {
  if (sh.grid == 0) return cudaErrorNotSupported;
  const cudaError_t st =
      launch_kernel(kernel, dim3(sh.grid), dim3(kPipedWarps * kWarp), sh.smem, stream, std::forward<Args>(args)...);
  if (st == cudaSuccess) note_piped_launch(sh.stages);
  return st;
}

// Whether weights of type T and width k may be pipelined (sm_80, whole units,
// a warp's worth of them a row, 16-byte aligned planes).
template <int kType>
bool pipeable(const DeviceWeight& w) {
  if constexpr (kP16<kType> == 0) {
    return false;
  } else {
    constexpr int kElems = Unit<static_cast<WType>(kType)>::kElems;
    return device_limits().cc_major >= 8 && w.k % kElems == 0 && w.k / kElems >= kWarp && planes_aligned(w);
  }
}

// Whether a launch of `n` weights is pipelined under `mode` (set_*_piped):
// off, every eligible launch, or (-1) those of at least 16 MiB.
bool wanted(int mode, const DeviceWeight* w, int n);

}  // namespace minfer::kernels::piped

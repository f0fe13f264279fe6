// The draw of a sampled decode step (Op::kSample) on the device: the k best
// of the logits row — the step's logit bias added first, then its
// penalties — then
// kernels/draw.h's pick with the step's uniform, so that only a token id
// travels back and the next step can take it without the host
// (launch_step_start, feed 2). Reference: engine/sampling/top_k_draw.h's
// draw_in_step(), which gives the same token from the same logits. Also a
// step's log-probabilities (Op::kLogprobs, launch_logprobs: below), whose
// best tokens are found the same way.
//
// One launch. Each block takes a chunk of kChunk logits as argmax_pack keys
// (the larger logit first, the lower id on ties: the host sampler's order),
// 8 a thread in registers; a bound that at least kp threads' best keys
// reach (kp: the power of two at or above k) leaves a few times kp keys to
// sort in shared memory (bitonic), and the block writes its best kp to
// `lists` (a first form sorted all 4,096 keys of every chunk: minferd's
// sampled 0.5B completions on the H200 ran at 1,644 tokens/s, against 1,994
// with the bound); the last block to finish (a count in global memory, as
// CUDA's threadFenceReduction sample) merges the lists pairwise — of two
// sorted lists, the larger of one's i-th and the other's (kp-1-i)-th is a
// bitonic sequence holding their best kp, which a half-cleaner cascade sorts
// — and draws: the candidates' weights a thread each, the sums and the pick
// in one thread, in candidate order (draw.h). Where the time goes (0.5B,
// k 40, run 3's phase probes, µs): every block 12 (keys loaded and sorted
// by thread 5.7, the bound 3.7 with 32 halvings — 2.0 with 16 — candidates
// sorted 3.9), the last block's merge 10.1 and pick 4.3 (3.6 unrolled).
// Session 31: keys by thread 2.9 with the thread's best key a maximum, not
// a sort of its 8; the kernel 28.2 µs (CUPTI). A warp barrier between the
// networks' stages of short strides, and one warp sorting the candidates,
// were slower (bench/results/2026-12-04-h200-session31).
#include "kernels/common.cuh"
#include "kernels/dot.cuh"
#include "kernels/draw.h"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/logprobs.h"

namespace minfer::kernels {

__device__ unsigned long long* g_sample_probe = nullptr;  // set_sample_probe (kernels.h set_phase_probe)

namespace {

constexpr int kChunk = 4096;   // logits a block takes: at most 32 KB of keys to sort
constexpr int kThreads = 512;
constexpr int kPerThread = kChunk / kThreads;
constexpr int kMaxLists = kSampleMaxVocab / kChunk;
static_assert(kMaxLists / 2 * kDrawMaxTopK <= kChunk, "the merge's first level must fit the chunk's keys");
static_assert(kDrawMaxPenaltyLastN <= kThreads, "a thread counts a penalty entry");

// -0 as +0: the host compares floats, to which they are equal.
__device__ __forceinline__ unsigned long long draw_key(float v, int id) { return argmax_pack(v == 0.0f ? 0.0f : v, id); }

__device__ __forceinline__ float key_value(unsigned long long key) {
  const uint32_t ord = static_cast<uint32_t>(key >> 32);
  return __uint_as_float((ord & 0x80000000u) ? (ord & 0x7fffffffu) : ~ord);
}

// Sorts keys [0, n) of s descending (n a power of two).
__device__ void bitonic_sort_desc(unsigned long long* s, int n) {
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < n / 2; t += blockDim.x) {
        const int i = 2 * t - (t & (stride - 1));  // bit `stride` of i clear
        const int j = i + stride;
        const bool desc = (i & size) == 0;  // the final pass (size == n) sorts all descending
        const unsigned long long a = s[i], b = s[j];
        if ((a < b) == desc) {
          s[i] = b;
          s[j] = a;
        }
      }
      __syncthreads();
    }
  }
}

// Sorts each of `lists` bitonic sequences of kp keys in s descending.
__device__ void half_clean_desc(unsigned long long* s, int lists, int kp) {
  for (int stride = kp / 2; stride > 0; stride >>= 1) {
    for (int t = threadIdx.x; t < lists * kp / 2; t += blockDim.x) {
      const int list = t / (kp / 2), u = t % (kp / 2);
      const int i = list * kp + 2 * u - (u & (stride - 1));
      const int j = i + stride;
      const unsigned long long a = s[i], b = s[j];
      if (a < b) {
        s[i] = b;
        s[j] = a;
      }
    }
    __syncthreads();
  }
}

// The kp best of n_lists sorted lists of kp keys into s[0..kp), in order:
// pairs merged level by level — the first level as the lists are read.
__device__ void merge_lists(unsigned long long* s, const unsigned long long* lists, int n_lists, int kp) {
  int width = 1;
  while (width < n_lists) width <<= 1;
  width /= 2;  // pairs (p, p + width); one list alone stays as it is
  if (width == 0) {
    for (int i = threadIdx.x; i < kp; i += blockDim.x) s[i] = __ldcg(lists + i);
    __syncthreads();
    return;
  }
  for (int x = threadIdx.x; x < width * kp; x += blockDim.x) {
    const int p = x / kp, i = x % kp;
    const unsigned long long a = __ldcg(lists + static_cast<size_t>(p) * kp + i);
    const unsigned long long b =
        p + width < n_lists ? __ldcg(lists + static_cast<size_t>(p + width) * kp + (kp - 1 - i)) : 0ull;
    s[x] = a > b ? a : b;
  }
  __syncthreads();
  half_clean_desc(s, width, kp);
  for (width /= 2; width > 0; width /= 2) {
    for (int x = threadIdx.x; x < width * kp; x += blockDim.x) {
      const int p = x / kp, i = x % kp;
      const unsigned long long b = s[(p + width) * kp + (kp - 1 - i)];
      if (b > s[x]) s[x] = b;
    }
    __syncthreads();
    half_clean_desc(s, width, kp);
  }
}

// The largest of a thread's keys: all the bound needs of them (session 30
// sorted the 8; the bound's count looks only at the best, and the
// candidates are taken whatever their order).
__device__ __forceinline__ unsigned long long max_key(const unsigned long long (&r)[kPerThread]) {
  unsigned long long best = r[0];
#pragma unroll
  for (int j = 1; j < kPerThread; ++j) best = r[j] > best ? r[j] : best;
  return best;
}

// A block's kp best keys (r: a thread's kPerThread, 0 for none; kp a power
// of two) into s[0..kp), sorted descending: the rest of s is scratch.
// *n_cand (shared) must be zero and every thread must call it. stamp:
// thread 0's phase stamps 2-4 (sample_kernel's probe), or null.
__device__ __forceinline__ void chunk_best(const unsigned long long (&r)[kPerThread], int kp, unsigned long long* s, int* n_cand,
                           long long* stamp) {
  const unsigned long long best = max_key(r);
  if (stamp != nullptr) stamp[2] = clock64();
  // A bound below the chunk's kp best: the largest 16-bit prefix of a key
  // (sign, exponent and 7 bits of the value) that at least kp threads' best
  // keys reach (so at least kp keys do), found by halving — a block-wide
  // count a step (16, not the 32 of the whole value: 3.7 µs of the draw's
  // 35 on the H200, and the coarser bound adds only the keys of one
  // 1/128-wide band). Only keys at or above it are sorted: a few times kp,
  // not the chunk.
  uint32_t lo = 0, hi = 0xFFFFu;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2 + 1;
    if (__syncthreads_count(static_cast<uint32_t>(best >> 48) >= mid) >= kp) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const unsigned long long bound = static_cast<unsigned long long>(lo) << 48;
  if (stamp != nullptr) stamp[3] = clock64();
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (r[j] >= bound && r[j] != 0ull) s[atomicAdd(n_cand, 1)] = r[j];
  }
  __syncthreads();
  int n = kp;
  while (n < *n_cand) n <<= 1;
  for (int i = *n_cand + static_cast<int>(threadIdx.x); i < n; i += blockDim.x) s[i] = 0ull;  // a short last chunk
  __syncthreads();
  bitonic_sort_desc(s, n);
  if (stamp != nullptr) stamp[4] = clock64();
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, int vocab, const DrawArgs* args,
                                                           const int32_t* step_token, unsigned long long* lists,
                                                           unsigned int* count, int32_t* out) {
  __shared__ unsigned long long s[kChunk];
  __shared__ float e[kDrawMaxTopK], t[kDrawMaxTopK];
  __shared__ int n_cand;
  __shared__ bool last;
  unsigned long long* probe = kPhaseProbes ? g_sample_probe : nullptr;
  const bool probing = probe != nullptr && threadIdx.x == 0;
  __shared__ long long stamp[6];  // thread 0's (shared: no registers held)
  if (probing) stamp[0] = clock64();
  pdl_begin();
  if (probing) stamp[1] = clock64();
  const int k = args->top_k;
  int kp = 1;
  while (kp < k) kp <<= 1;
  const int base = blockIdx.x * kChunk;
  if (threadIdx.x == 0) n_cand = 0;
  // A thread's logits (strided: coalesced loads), the bias in entry order on
  // the thread that holds its token, as the host adds it (a token named
  // twice gets both).
  float v[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int id = base + j * kThreads + static_cast<int>(threadIdx.x);
    v[j] = id < vocab ? logits[id] : 0.0f;
  }
  for (int b = 0; b < args->n_bias; ++b) {
    const int off = args->bias_token[b] - base;
    if (off < 0 || off >= kChunk || off % kThreads != static_cast<int>(threadIdx.x)) continue;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      if (off / kThreads == j) v[j] = __fadd_rn(v[j], args->bias[b]);
    }
  }
  // The penalties, after the bias (as the host): the window's tokens —
  // args->recent, then the step's own — counted in shared memory, each
  // distinct one's count kept at its first entry, applied by the thread
  // that holds its logit.
  if (draw::penalties_on(args->repeat_penalty, args->frequency_penalty, args->presence_penalty)) {
    __shared__ int32_t pen_token[kDrawMaxPenaltyLastN];
    __shared__ int pen_count[kDrawMaxPenaltyLastN];  // 0: a later entry of a token
    const int n_recent = args->n_recent;
    const int n_pen = n_recent + (args->penalize_step_token != 0 ? 1 : 0);
    const int i = static_cast<int>(threadIdx.x);
    if (i < n_pen) pen_token[i] = i < n_recent ? args->recent[i] : *step_token;
    __syncthreads();
    if (i < n_pen) {
      const int32_t me = pen_token[i];
      int count = 0;
      bool first = true;
      for (int j = 0; j < n_pen; ++j) {
        if (pen_token[j] != me) continue;
        ++count;
        first = first && j >= i;
      }
      pen_count[i] = first ? count : 0;
    }
    __syncthreads();
    const float repeat = args->repeat_penalty, frequency = args->frequency_penalty, presence = args->presence_penalty;
    for (int e = 0; e < n_pen; ++e) {
      const int off = pen_token[e] - base;
      if (pen_count[e] == 0 || off < 0 || off >= kChunk || off % kThreads != i) continue;
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        if (off / kThreads == j) v[j] = draw::penalize(v[j], pen_count[e], repeat, frequency, presence);
      }
    }
  }
  unsigned long long r[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int id = base + j * kThreads + static_cast<int>(threadIdx.x);
    r[j] = id < vocab ? draw_key(v[j], id) : 0ull;  // 0: below every logit
  }
  chunk_best(r, kp, s, &n_cand, probing ? stamp : nullptr);
  for (int i = threadIdx.x; i < kp; i += blockDim.x) lists[static_cast<size_t>(blockIdx.x) * kp + i] = s[i];
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(count, 1u) == gridDim.x - 1;
  __syncthreads();
  if (probing) {
    stamp[5] = clock64();
    phase_probe_add(probe, stamp);
  }
  if (!last) return;
  __shared__ long long tail[4];
  if (probing) tail[0] = clock64();

  // The last block: every list is written and visible (fenced before the
  // count); merged pairwise, read in L2 (__ldcg). (Gathering instead the
  // keys at or above the largest of the lists' kp-th keys took longer, 18.8
  // µs against 10.1 on the H200: with 38 lists that bound passes most of
  // every list.)
  merge_lists(s, lists, static_cast<int>(gridDim.x), kp);
  if (probing) tail[1] = clock64();
  const float l0 = key_value(s[0]);
  for (int i = threadIdx.x; i < k; i += blockDim.x) draw::terms(key_value(s[i]), l0, args->inv_temperature, &e[i], &t[i]);
  __syncthreads();
  if (probing) tail[2] = clock64();
  if (threadIdx.x == 0) {
    // Every logit -inf (or the top +inf): the top, as the host.
    const int pick = isfinite(l0) ? draw::select(e, t, k, args->top_p, args->min_p, args->u) : 0;
    out[0] = argmax_unpack(s[pick]);
    *count = 0;  // for the next launch
    if (probing) {
      tail[3] = clock64();
      phase_probe_add(probe + kPhaseProbeFields, tail);
    }
  }
}


// The step's log-probabilities (Op::kLogprobs, after the step's pick, or
// for every row of a scored prompt's step): each block its chunk's
// kLogprobsKp best keys (chunk_best, as the draw's) and its largest logit m
// with the sum of exp(logit - m) in double; the last block of a row
// (blockIdx.y) merges the row's lists, as the draw's, and adds the sums up,
// each scaled by exp(m - the largest of all), in block order. One launch.
constexpr int kLogprobsKp = 32;  // the power of two at or above kLogprobsTop
static_assert(kLogprobsKp >= kLogprobsTop && kLogprobsKp <= kDrawMaxTopK, "the lists fit the draw's");

__global__ void __launch_bounds__(kThreads) logprobs_kernel(const float* logits, int vocab,
                                                             const unsigned long long* chosen_key,
                                                             const int32_t* chosen_id, unsigned long long* lists,
                                                             double2* partials, unsigned int* count, LogprobsOut* out) {
  __shared__ unsigned long long s[kChunk];
  __shared__ double warp_sums[kThreads / kWarp];
  __shared__ int n_cand;
  __shared__ bool last;
  pdl_begin();
  const int base = blockIdx.x * kChunk;
  const int row = blockIdx.y;
  logits += static_cast<size_t>(row) * vocab;
  lists += static_cast<size_t>(row) * gridDim.x * kLogprobsKp;
  partials += static_cast<size_t>(row) * gridDim.x;
  if (threadIdx.x == 0) n_cand = 0;
  float v[kPerThread];
  unsigned long long r[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int id = base + j * kThreads + static_cast<int>(threadIdx.x);
    v[j] = id < vocab ? __ldcg(logits + id) : 0.0f;
    r[j] = id < vocab ? draw_key(v[j], id) : 0ull;
  }
  chunk_best(r, kLogprobsKp, s, &n_cand, nullptr);  // ends with a barrier: s[0] is the chunk's best
  for (int i = threadIdx.x; i < kLogprobsKp; i += blockDim.x) lists[static_cast<size_t>(blockIdx.x) * kLogprobsKp + i] = s[i];
  const double m = key_value(s[0]);
  double sum = 0.0;
  if (isfinite(m)) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int id = base + j * kThreads + static_cast<int>(threadIdx.x);
      if (id < vocab) sum += exp(static_cast<double>(v[j]) - m);
    }
  }
  for (int off = kWarp / 2; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
  if (threadIdx.x % kWarp == 0) warp_sums[threadIdx.x / kWarp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double block = 0.0;
    for (int w = 0; w < kThreads / kWarp; ++w) block += warp_sums[w];
    partials[blockIdx.x] = make_double2(m, block);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(count + row, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;

  merge_lists(s, lists, static_cast<int>(gridDim.x), kLogprobsKp);
  out += row;
  if (threadIdx.x == 0) {
    double top = -INFINITY;
    for (int b = 0; b < static_cast<int>(gridDim.x); ++b) top = fmax(top, __ldcg(&partials[b].x));
    double log_z = NAN;  // the host's, where the largest logit is infinite (or every one -inf)
    if (isfinite(top)) {
      double total = 0.0;
      for (int b = 0; b < static_cast<int>(gridDim.x); ++b) {
        const double2 p = __ldcg(&partials[b]);
        if (isfinite(p.x)) total += p.y * exp(p.x - top);
      }
      log_z = top + log(total);
    }
    out->log_z = log_z;
    const int32_t chosen = chosen_key != nullptr ? argmax_unpack(*chosen_key) : chosen_id[row];
    out->chosen = chosen;
    out->chosen_logit = chosen >= 0 && chosen < vocab ? __ldcg(logits + chosen) : NAN;
    const int n_top = vocab < kLogprobsTop ? vocab : kLogprobsTop;
    out->n_top = n_top;
    for (int i = 0; i < n_top; ++i) {
      out->top[i] = argmax_unpack(s[i]);
      out->top_logit[i] = key_value(s[i]);
    }
    count[row] = 0;  // for the next launch
  }
}

}  // namespace

cudaError_t set_sample_probe(unsigned long long* fields) {
  return cudaMemcpyToSymbol(g_sample_probe, &fields, sizeof(fields));
}

size_t sample_lists_bytes(int vocab) {
  return sizeof(unsigned long long) * static_cast<size_t>((vocab + kChunk - 1) / kChunk) * kDrawMaxTopK;
}

cudaError_t launch_sample(const float* logits, int vocab, const DrawArgs* args, const int32_t* step_token,
                          unsigned long long* lists, unsigned int* count, int32_t* out, cudaStream_t stream) {
  if (vocab <= 0 || vocab > kSampleMaxVocab) return cudaErrorInvalidValue;
  return launch_kernel(sample_kernel, dim3((vocab + kChunk - 1) / kChunk), dim3(kThreads), 0, stream, logits, vocab,
                       args, step_token, lists, count, out);
}

size_t logprobs_scratch_bytes(int vocab, int rows) {
  const size_t blocks = static_cast<size_t>((vocab + kChunk - 1) / kChunk);
  return static_cast<size_t>(rows) * blocks * (sizeof(unsigned long long) * kLogprobsKp + sizeof(double2));
}

cudaError_t launch_logprobs(const float* logits, int vocab, int rows, const unsigned long long* chosen_key,
                            const int32_t* chosen_id, void* scratch, unsigned int* count, LogprobsOut* out,
                            cudaStream_t stream) {
  if (vocab <= 0 || vocab > kSampleMaxVocab || rows <= 0 || rows > kLogprobsMaxRows ||
      (chosen_key == nullptr) == (chosen_id == nullptr) || (chosen_key != nullptr && rows != 1)) {
    return cudaErrorInvalidValue;
  }
  const int blocks = (vocab + kChunk - 1) / kChunk;
  auto* lists = static_cast<unsigned long long*>(scratch);
  auto* partials = reinterpret_cast<double2*>(lists + static_cast<size_t>(rows) * blocks * kLogprobsKp);
  return launch_kernel(logprobs_kernel, dim3(blocks, rows), dim3(kThreads), 0, stream, logits, vocab, chosen_key,
                       chosen_id, lists, partials, count, out);
}

}  // namespace minfer::kernels

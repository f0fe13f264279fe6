// The draw from a request's k best logits — top-p, min-p, temperature and the
// weighted pick — in arithmetic that gives the same bits on the host and on
// the device, so that a token drawn inside a CUDA decode step
// (kernels::launch_sample) is the token the host sampler
// (engine/sampling/top_k_draw.h) draws from the same logits and the same
// uniform. Every rounding is spelled out: a multiply and an add the compiler
// may contract into one fused multiply-add on one side and not on the other
// (nvcc does by default; so does GCC on aarch64, Jetson's host) would round
// differently, and expf / std::exp differ by an ulp, so exp is our own.
//
// Plain C++ on the host (no CUDA headers needed); __host__ __device__ under nvcc.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MINFER_DRAW_FN __host__ __device__ __forceinline__
#else
#define MINFER_DRAW_FN inline
#endif
// The pick's loops run in one device thread: unrolled there, the loads of
// the next weights go out while the sums wait on the last add (4.3 µs of a
// 0.5B draw's 35 on the H200 rolled). No effect on the results' bits.
#if defined(__CUDA_ARCH__)
#define MINFER_DRAW_UNROLL _Pragma("unroll 8")
#else
#define MINFER_DRAW_UNROLL
#endif

namespace minfer::kernels {

// What a draw in the step takes at most: the candidates the CUDA kernel keeps
// a block (a power of two), logit-bias entries staged with the step, and the
// tokens the penalties look at (llama.cpp's penalty_last_n; its default).
inline constexpr int kDrawMaxTopK = 128;
inline constexpr int kDrawMaxBias = 64;
inline constexpr int kDrawMaxPenaltyLastN = 64;

// A draw's parameters, uploaded with each step that draws (device memory for
// launch_sample; StepInput::draw on the host). Bias is added to the logits in
// entry order, then the penalties change the logits of the tokens in their
// window, then the k best are chosen.
//
// The penalties' window is the last penalty_last_n tokens of the sequence up
// to and including the step's own input token. The host knows every token
// before that one (`recent`, newest last); the step's own is the step's
// input, which the device may have drawn itself (a step queued before the
// host saw the token), so the backend adds it: `penalize_step_token`.
struct DrawArgs {
  int32_t top_k = 0;            // 1..kDrawMaxTopK, below the vocabulary size
  float inv_temperature = 1.0f;
  float top_p = 1.0f;           // 1: off
  float min_p = 0.0f;           // 0: off
  float u = 0.0f;               // the draw's uniform, [0, 1)
  int32_t n_bias = 0;
  int32_t bias_token[kDrawMaxBias] = {};
  float bias[kDrawMaxBias] = {};
  float repeat_penalty = 1.0f;     // 1: off
  float frequency_penalty = 0.0f;  // 0: off
  float presence_penalty = 0.0f;   // 0: off
  int32_t penalize_step_token = 0; // 1: the step's input token is in the window
  int32_t n_recent = 0;            // 0..kDrawMaxPenaltyLastN - 1
  int32_t recent[kDrawMaxPenaltyLastN - 1] = {};
};

namespace draw {

// Correctly rounded single operations that no compiler fuses with their
// neighbours: CUDA's _rn intrinsics are never contracted, and a call to fmaf
// is not contracted on the host (fma(a, b, 0) is not a * b where a * b is -0,
// so the compiler cannot turn it back into a multiply).
MINFER_DRAW_FN float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
MINFER_DRAW_FN float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return std::fma(a, b, 0.0f);
#endif
}
MINFER_DRAW_FN float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return std::fma(a, 1.0f, b);
#endif
}

MINFER_DRAW_FN float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;  // IEEE division, correctly rounded: nothing to contract
#endif
}

// Whether any penalty changes a logit (the same test on both sides).
MINFER_DRAW_FN bool penalties_on(float repeat, float frequency, float presence) {
  return repeat != 1.0f || frequency != 0.0f || presence != 0.0f;
}

// A logit of a token seen `count` times (>= 1) in the penalties' window,
// as llama.cpp's penalties: a positive one divided by the repeat penalty, a
// negative one multiplied, then count * frequency + presence taken off.
MINFER_DRAW_FN float penalize(float l, int count, float repeat, float frequency, float presence) {
  l = l > 0.0f ? div(l, repeat) : mul(l, repeat);
  return add(l, -fma(static_cast<float>(count), frequency, presence));
}

// e^x for x <= 0: Cody-Waite reduction by ln 2 (cephes' split, whose high
// part has 9 bits, so n·C1 is exact), a degree-6 Taylor polynomial on
// |r| <= ln2/2 (truncation below 1.2e-7, relative) and the power of two put
// into the exponent. 0 below -80 (e^-80 is 1.8e-35 of the top token's
// weight) and for NaN; e^0 is exactly 1.
MINFER_DRAW_FN float exp_nonpositive(float x) {
  if (!(x >= -80.0f)) return 0.0f;
#if defined(__CUDA_ARCH__)
  const float n = rintf(mul(x, 1.44269504088896341f));
#else
  const float n = std::nearbyint(mul(x, 1.44269504088896341f));  // ties to even, as rintf
#endif
  float r = fma(n, -0.693359375f, x);
  r = fma(n, 2.12194440e-4f, r);
  float p = 1.0f / 720.0f;
  p = fma(p, r, 1.0f / 120.0f);
  p = fma(p, r, 1.0f / 24.0f);
  p = fma(p, r, 1.0f / 6.0f);
  p = fma(p, r, 0.5f);
  p = fma(p, r, 1.0f);
  p = fma(p, r, 1.0f);
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;  // n in [-116, 0]
  float scale;
#if defined(__CUDA_ARCH__)
  scale = __uint_as_float(bits);
#else
  std::memcpy(&scale, &bits, sizeof scale);
#endif
  return mul(p, scale);
}

// Candidate i's two weights, given its logit l and the best one's, l0:
// *e = e^(l - l0) (top-p's and min-p's, before temperature) and
// *t = e^((l - l0) / T) (the draw's). Independent per candidate: the device
// works them out a thread each.
MINFER_DRAW_FN void terms(float l, float l0, float inv_temperature, float* e, float* t) {
  const float d = add(l, -l0);
  *e = exp_nonpositive(d);
  *t = exp_nonpositive(mul(d, inv_temperature));
}

// The pick among n candidates in order (best first) from their terms():
// top-p keeps the fewest whose mass reaches top_p of the n (llama.cpp's chain:
// over what top-k kept), min-p those whose probability is at least min_p of
// the best's, and u in [0, 1) walks the tempered weights of what is left.
// Sums run in candidate order, one after another: the same bits everywhere.
MINFER_DRAW_FN int select(const float* e, const float* t, int n, float top_p, float min_p, float u) {
  int keep = n;
  if (top_p < 1.0f) {
    float total = 0.0f;
    MINFER_DRAW_UNROLL
    for (int i = 0; i < n; ++i) total = add(total, e[i]);
    const float target = mul(top_p, total);
    float cum = 0.0f;
    MINFER_DRAW_UNROLL
    for (int i = 0; i < n; ++i) {
      cum = add(cum, e[i]);
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
  }
  if (min_p > 0.0f) {
    int k = 1;
    while (k < keep && e[k] >= min_p) ++k;
    keep = k;
  }
  float total = 0.0f;
  MINFER_DRAW_UNROLL
  for (int i = 0; i < keep; ++i) total = add(total, t[i]);
  float r = mul(u, total);
  MINFER_DRAW_UNROLL
  for (int i = 0; i < keep; ++i) {
    r = add(r, -t[i]);
    if (r < 0.0f) return i;
  }
  return keep - 1;
}

}  // namespace draw
}  // namespace minfer::kernels

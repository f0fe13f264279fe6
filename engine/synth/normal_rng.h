// Deterministic random numbers for synthetic weights: the same seed gives the
// same bits on every platform and compiler. std::mt19937_64 is fully
// specified by the standard, but std::normal_distribution is not (libstdc++
// and libc++ differ), and std::log may differ in the last bit between C
// libraries; so the normal deviates here use only operations IEEE 754
// rounds exactly (+ - * / sqrt) and bit operations. normal_rng.cpp is compiled with
// -ffp-contract=off so no compiler fuses a*b+c differently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string_view>

namespace minfer::synth {

// splitmix64's finaliser: spreads a 64-bit value over all bits.
uint64_t mix64(uint64_t x);
// FNV-1a of a name: a stable per-tensor seed component.
uint64_t hash_name(std::string_view name);

// N(0, 1) deviates by Marsaglia's polar method, made in batches: each
// 64-bit output of the engine gives one candidate pair (its two 32-bit
// halves as uniforms in [-1, 1)), the accepted pairs' logs and square roots
// are then independent computations the CPU overlaps. ~4x faster than one
// pair at a time, and the sequence is fixed by the seed alone.
class NormalRng {
 public:
  explicit NormalRng(uint64_t seed) : engine_(seed) {}
  // Writes n deviates times `scale` (rounded to float) to out.
  void fill(float* out, size_t n, float scale);

 private:
  std::mt19937_64 engine_;
};

// Natural logarithm of a normal double x > 0 from exact operations only
// (see above); other inputs go to std::log.
// Accurate to ~1e-16 relative; exposed for its test.
double deterministic_log(double x);

}  // namespace minfer::synth

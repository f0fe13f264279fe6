// NormalRng and its helpers. See normal_rng.h for why nothing here calls libm
// beyond sqrt (exact).
#include "engine/synth/normal_rng.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace minfer::synth {
namespace {

constexpr double kLn2 = 0.6931471805599453094;        // ln 2, rounded to double
constexpr double kSqrtHalf = 0.70710678118654752440;  // 1/sqrt(2)
constexpr double kTwoPow31Inv = 1.0 / 2147483648.0;
constexpr int kBatchPairs = 64;

}  // namespace

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;  // FNV prime
  }
  return h;
}

double deterministic_log(double x) {
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln x = e ln 2 + ln m, and
  // ln m = 2 atanh(t) with t = (m - 1) / (m + 1), |t| < 0.172: the odd series
  // up to t^21 leaves a relative error below 1e-17.
  if (!(x >= std::numeric_limits<double>::min())) return std::log(x);  // 0, subnormal, negative, NaN: not used here
  // Split x by its bits (exact, and inlined, unlike a call to frexp).
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1022;
  bits = (bits & 0x000fffffffffffffull) | (uint64_t{1022} << 52);  // m in [0.5, 1)
  double m;
  std::memcpy(&m, &bits, sizeof m);
  if (m < kSqrtHalf) {
    m *= 2.0;
    --e;
  }
  const double t = (m - 1.0) / (m + 1.0);
  const double t2 = t * t;
  double p = 1.0 / 21.0;
  for (int k = 19; k >= 1; k -= 2) p = p * t2 + 1.0 / k;
  return 2.0 * t * p + e * kLn2;
}

void NormalRng::fill(float* out, size_t n, float scale) {
  double u[kBatchPairs];
  double v[kBatchPairs];
  double f[kBatchPairs];
  size_t done = 0;
  while (done < n) {
    int accepted = 0;
    for (int i = 0; i < kBatchPairs; ++i) {
      const uint64_t x = engine_();
      const double a = static_cast<double>(x >> 32) * kTwoPow31Inv - 1.0;           // exact
      const double b = static_cast<double>(x & 0xffffffffu) * kTwoPow31Inv - 1.0;  // exact
      const double s = a * a + b * b;
      u[accepted] = a;
      v[accepted] = b;
      f[accepted] = s;
      // Keep points inside the unit circle; branch-free, since a fifth are
      // rejected at random and a branch would mispredict on them.
      accepted += static_cast<int>(s < 1.0) & static_cast<int>(s > 0.0);
    }
    for (int i = 0; i < accepted; ++i) f[i] = std::sqrt(-2.0 * deterministic_log(f[i]) / f[i]);
    for (int i = 0; i < accepted && done < n; ++i) {
      out[done++] = static_cast<float>(scale * u[i] * f[i]);
      if (done < n) out[done++] = static_cast<float>(scale * v[i] * f[i]);
    }
  }
}

}  // namespace minfer::synth

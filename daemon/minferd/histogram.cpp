#include "daemon/minferd/histogram.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace minfer::daemon {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::observe(double value) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_nano_.fetch_add(static_cast<int64_t>(std::llround(value * 1e9)), std::memory_order_relaxed);
}

double Histogram::sum() const { return static_cast<double>(sum_nano_.load(std::memory_order_relaxed)) * 1e-9; }

void Histogram::render(std::string* out, std::string_view name, std::string_view help) const {
  *out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  cumulative += buckets_[bounds_.size()].load(std::memory_order_relaxed);
  *out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cumulative, name, sum(), name,
                      cumulative);
}

double Histogram::quantile(double q) const {
  std::vector<uint64_t> counts(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) total += counts[i] = buckets_[i].load(std::memory_order_relaxed);
  if (total == 0) return 0.0;
  const double rank = q * static_cast<double>(total);
  uint64_t below = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (static_cast<double>(below + counts[i]) >= rank) {
      const double lo = i == 0 ? 0.0 : bounds_[i - 1];
      const double frac = counts[i] == 0 ? 0.0 : (rank - static_cast<double>(below)) / static_cast<double>(counts[i]);
      return lo + (bounds_[i] - lo) * frac;
    }
    below += counts[i];
  }
  return bounds_.empty() ? 0.0 : bounds_.back();  // in the +Inf bucket: the largest finite bound
}

}  // namespace minfer::daemon

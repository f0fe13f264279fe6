// A Prometheus histogram with fixed bucket bounds, safe to observe from any
// thread (one atomic add per bucket hit; the sum is kept in nanounits so it is
// an integer add too).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::daemon {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending; +Inf is implied

  void observe(double value);

  // Appends "# HELP", "# TYPE" and the _bucket/_sum/_count lines.
  void render(std::string* out, std::string_view name, std::string_view help) const;

  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const;
  // The value below which `q` of the observations fall, interpolated within
  // its bucket (what Prometheus's histogram_quantile computes).
  double quantile(double q) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bound, not cumulative; last: +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<int64_t> sum_nano_{0};
};

}  // namespace minfer::daemon

// Chrome trace-event JSON (opens in Perfetto or chrome://tracing) with one
// complete event per graph node per step: op, shapes, backend, device or host
// time, and statistics of the node's output (min, max, mean, NaN/Inf count).
// For people who debug: a backend that traces runs eagerly and reads every
// output back, so it is slow by design.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "engine/common/expected.h"

namespace minfer {

struct TensorStats {
  float min = 0.0f, max = 0.0f;
  double mean = 0.0;
  int64_t nan = 0, inf = 0, count = 0;
  static TensorStats of(const float* x, int64_t n);
};

class TraceWriter {
 public:
  static Expected<std::unique_ptr<TraceWriter>> open(const std::string& path);
  ~TraceWriter();  // closes the JSON array

  // One node of one step. start_us is relative to the writer's creation.
  void node(const std::string& name, const char* op, const char* backend, int step, int rows, int width,
            double start_us, double duration_us, const TensorStats& stats);
  double now_us() const;

 private:
  TraceWriter() = default;
  std::FILE* f_ = nullptr;
  bool first_ = true;
  std::mutex mutex_;
  int64_t t0_ns_ = 0;
};

}  // namespace minfer

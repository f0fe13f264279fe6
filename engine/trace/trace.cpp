#include "engine/trace/trace.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

namespace minfer {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// JSON numbers cannot be NaN or Inf.
std::string json_number(double v) {
  if (std::isnan(v)) return "\"nan\"";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  return fmt::format("{:.6g}", v);
}

}  // namespace

TensorStats TensorStats::of(const float* x, int64_t n) {
  TensorStats s;
  s.min = std::numeric_limits<float>::infinity();
  s.max = -std::numeric_limits<float>::infinity();
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (std::isnan(v)) {
      ++s.nan;
      continue;
    }
    if (std::isinf(v)) ++s.inf;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
    sum += v;
    ++s.count;
  }
  s.mean = s.count > 0 ? sum / static_cast<double>(s.count) : 0.0;
  return s;
}

Expected<std::unique_ptr<TraceWriter>> TraceWriter::open(const std::string& path) {
  std::unique_ptr<TraceWriter> w(new TraceWriter());
  w->f_ = std::fopen(path.c_str(), "w");
  if (w->f_ == nullptr) {
    return unexpected(ErrorCode::kIo, fmt::format("cannot open trace file '{}': {}", path, std::strerror(errno)));
  }
  std::fputs("[\n", w->f_);
  w->t0_ns_ = steady_ns();
  return w;
}

TraceWriter::~TraceWriter() {
  if (f_ != nullptr) {
    std::fputs("\n]\n", f_);
    std::fclose(f_);
  }
}

double TraceWriter::now_us() const { return static_cast<double>(steady_ns() - t0_ns_) / 1000.0; }

void TraceWriter::node(const std::string& name, const char* op, const char* backend, int step, int rows, int width,
                       double start_us, double duration_us, const TensorStats& s) {
  std::lock_guard lock(mutex_);
  fmt::print(f_,
             "{}{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":1,\"tid\":\"{}\",\"ts\":{:.3f},\"dur\":{:.3f},"
             "\"args\":{{\"step\":{},\"op\":\"{}\",\"shape\":[{},{}],\"min\":{},\"max\":{},\"mean\":{},\"nan\":{},\"inf\":{}}}}}",
             first_ ? "" : ",\n", name, op, backend, start_us, duration_us, step, op, rows, width, json_number(s.min),
             json_number(s.max), json_number(s.mean), s.nan, s.inf);
  first_ = false;
  std::fflush(f_);
}

}  // namespace minfer

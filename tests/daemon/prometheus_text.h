// Reads one series' value from Prometheus text (what GET /metrics returns).
#pragma once

#include <cstdlib>
#include <string>

#include "tests/daemon/http_test_client.h"

namespace minfer::test {

// The value of the line starting with `series` + " " (e.g.
// `minfer_cancellations_total{reason="client_gone"}`); -1 when absent.
inline double metric_value(const std::string& text, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const size_t pos = ("\n" + text).find(key);
  if (pos == std::string::npos) return -1;
  return std::strtod(text.c_str() + pos + key.size() - 1, nullptr);
}

inline double scrape(const std::string& socket, const std::string& series) {
  return metric_value(http_request(socket, "GET", "/metrics").body, series);
}

}  // namespace minfer::test

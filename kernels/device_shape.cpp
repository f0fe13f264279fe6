// MINFER_DEVICE_SHAPE: the text of a smaller device for the one present to
// run as (kernels.h, DeviceShape). Plain C++: the CPU suites test the parse.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <utility>
#include <vector>

#include "kernels/kernels.h"

namespace minfer::kernels {
namespace {

// Jetson AGX Orin 64 GB: compute capability 8.7 (the CUDA programming guide's
// table of technical specifications), 2,048 CUDA cores in 16 SMs.
DeviceShape orin() {
  DeviceShape s;
  s.name = "orin";
  s.cc_major = 8;
  s.cc_minor = 7;
  s.sms = 16;
  s.smem_per_block = 163 * 1024;
  s.smem_per_sm = 164 * 1024;
  s.threads_per_sm = 1536;
  s.blocks_per_sm = 16;
  return s;
}

// The parts one after the other.
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s.append(p);
  return s;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A whole positive decimal number up to 2^30.
std::optional<int> positive(std::string_view v) {
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n <= 0 || n > (1 << 30)) return std::nullopt;
  return n;
}

// "8.7" or "87" (and "10.0" or "100"): major, minor.
std::optional<std::pair<int, int>> capability(std::string_view v) {
  if (const size_t dot = v.find('.'); dot != std::string_view::npos) {
    const auto major = positive(v.substr(0, dot));
    const std::string_view minor_text = v.substr(dot + 1);
    if (!major || minor_text.size() != 1 || minor_text[0] < '0' || minor_text[0] > '9') return std::nullopt;
    return std::pair{*major, minor_text[0] - '0'};
  }
  const auto n = positive(v);
  if (!n || *n < 10) return std::nullopt;
  return std::pair{*n / 10, *n % 10};
}

}  // namespace

std::optional<DeviceShape> parse_device_shape(std::string_view text, std::string* error) {
  auto fail = [&](std::string why) {
    *error = std::move(why);
    return std::nullopt;
  };
  text = trim(text);
  if (text.empty()) return fail("the shape is empty; give a preset (orin) or key=value pairs");
  DeviceShape shape;
  shape.name = "custom";
  std::vector<std::string> seen;  // the keys given
  bool first = true;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view part = trim(text.substr(0, comma));
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      if (!first) return fail(cat({"'", part, "' is not key=value (a preset comes first)"}));
      if (part != "orin") return fail(cat({"unknown preset '", part, "' (known: orin)"}));
      shape = orin();
    } else {
      const std::string key(trim(part.substr(0, eq)));
      const std::string_view value = trim(part.substr(eq + 1));
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) return fail(cat({"'", key, "' is given twice"}));
      seen.push_back(key);
      if (key == "cc") {
        const auto cc = capability(value);
        if (!cc) return fail(cat({"cc='", value, "' is not a compute capability such as 8.7 or 87"}));
        shape.cc_major = cc->first;
        shape.cc_minor = cc->second;
      } else {
        int* field = key == "sms"              ? &shape.sms
                     : key == "smem_per_block" ? &shape.smem_per_block
                     : key == "smem_per_sm"    ? &shape.smem_per_sm
                     : key == "threads_per_sm" ? &shape.threads_per_sm
                     : key == "blocks_per_sm"  ? &shape.blocks_per_sm
                                               : nullptr;
        if (field == nullptr) {
          return fail(cat({"unknown key '", key,
                               "' (known: sms, cc, smem_per_block, smem_per_sm, threads_per_sm, blocks_per_sm)"}));
        }
        const auto n = positive(value);
        if (!n) return fail(cat({key, "='", value, "' is not a positive whole number"}));
        *field = *n;
      }
    }
    first = false;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return shape;
}

const std::optional<DeviceShape>& device_shape(std::string* error) {
  static std::string parse_error;
  static const std::optional<DeviceShape> shape = [] {
    const char* text = std::getenv("MINFER_DEVICE_SHAPE");
    if (text == nullptr || trim(text).empty()) return std::optional<DeviceShape>{};
    return parse_device_shape(text, &parse_error);
  }();
  if (error != nullptr) *error = parse_error;
  return shape;
}

}  // namespace minfer::kernels

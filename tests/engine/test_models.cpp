#include "tests/engine/test_models.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <mutex>

namespace minfer::test {

std::string synth_model(const std::string& preset, const std::string& type, int layers, int vocab, uint64_t seed) {
  static std::mutex mutex;
  static std::map<std::string, std::string> written;
  const std::string key = fmt::format("{}-{}-{}-{}-{}", preset, type, layers, vocab, seed);
  std::lock_guard lock(mutex);
  if (auto it = written.find(key); it != written.end()) return it->second;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("minfer-test-{}", static_cast<long>(getpid()));
  std::filesystem::create_directories(dir);
  synth::Options o;
  auto p = synth::find_preset(preset);
  EXPECT_TRUE(p.has_value()) << "no preset " << preset;
  if (!p) return {};
  o.preset = *p;
  o.layers = layers;
  o.vocab = vocab;
  o.type = type;
  o.seed = seed;
  o.output_path = (dir / (key + ".gguf")).string();
  auto r = synth::write_model(o);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  written[key] = o.output_path;
  return o.output_path;
}

// Removes the per-process directory at exit.
struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    std::filesystem::remove_all(
        std::filesystem::temp_directory_path() / fmt::format("minfer-test-{}", static_cast<long>(getpid())), ec);
  }
} g_cleanup;

}  // namespace minfer::test

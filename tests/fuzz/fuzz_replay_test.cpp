// Replays every checked-in input of the fuzz targets (seed corpora and the
// reproducers of fixed crashes, tests/fuzz/{corpus,regressions}/<target>/)
// through the targets' own functions, in the ordinary test builds. A
// regression is a crash or sanitizer report here, or a failed check inside
// the target (they abort with a message). The per-crash GoogleTests with
// asserted values live with the module that was fixed; this keeps every
// reproducer running too.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int fuzz_gguf_one(const uint8_t*, size_t);
extern "C" int fuzz_tokenizer_spm_one(const uint8_t*, size_t);
extern "C" int fuzz_tokenizer_spm_init(int*, char***);
extern "C" int fuzz_tokenizer_bpe_one(const uint8_t*, size_t);
extern "C" int fuzz_tokenizer_bpe_init(int*, char***);
extern "C" int fuzz_chat_template_one(const uint8_t*, size_t);
extern "C" int fuzz_chat_template_init(int*, char***);
extern "C" int fuzz_http_request_one(const uint8_t*, size_t);
extern "C" int fuzz_json_schema_one(const uint8_t*, size_t);

namespace {

namespace fs = std::filesystem;
using Entry = int (*)(const uint8_t*, size_t);

// Files of tests/fuzz/<kind>/<target>/, sorted.
std::vector<fs::path> inputs(const std::string& kind, const std::string& target) {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(MINFER_FUZZ_DIR) / kind / target;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t replay(const std::string& target, Entry entry) {
  size_t n = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    for (const fs::path& p : inputs(kind, target)) {
      std::ifstream in(p, std::ios::binary);
      const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      SCOPED_TRACE(p.string());
      EXPECT_EQ(entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
      ++n;
    }
  }
  EXPECT_GT(n, 0u) << "no seeds for " << target;
  return n;
}

TEST(FuzzReplay, Gguf) { replay("gguf", fuzz_gguf_one); }
TEST(FuzzReplay, TokenizerSpm) {
  fuzz_tokenizer_spm_init(nullptr, nullptr);
  replay("tokenizer_spm", fuzz_tokenizer_spm_one);
}
TEST(FuzzReplay, TokenizerBpe) {
  fuzz_tokenizer_bpe_init(nullptr, nullptr);
  replay("tokenizer_bpe", fuzz_tokenizer_bpe_one);
}
TEST(FuzzReplay, ChatTemplate) {
  fuzz_chat_template_init(nullptr, nullptr);
  replay("chat_template", fuzz_chat_template_one);
}
TEST(FuzzReplay, HttpRequest) { replay("http_request", fuzz_http_request_one); }
TEST(FuzzReplay, JsonSchema) { replay("json_schema", fuzz_json_schema_one); }

}  // namespace

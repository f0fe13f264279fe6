// libFuzzer target: the GGUF reader on arbitrary bytes, then everything
// minferd reads from a parsed file before it serves: the metadata accessors,
// the model configuration, the weight table, the tokenizer and the chat
// template. A hostile or truncated model must be an Error, never a crash, a
// sanitizer report, a leak or an allocation beyond the file's size.
// Seeds: tests/fuzz/corpus/gguf (real files with their tensor data cut off,
// and truncations of them; tests/fuzz/make_seeds.sh).
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/chat/chat_template.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace minfer;
  auto file = gguf::File::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file) return 0;
  const gguf::File& f = **file;
  for (const auto& [key, value] : f.metadata()) {
    (void)value.to_string(8, 64);
    (void)f.get_string(key);
    (void)f.get_u64(key);
    (void)f.get_f32_array(key);
    (void)f.get_i32_array(key);
  }
  for (const gguf::TensorInfo& t : f.tensors()) {
    (void)t.shape_string();
    if (t.size_bytes > 0 && (t.data < data || t.data + t.size_bytes > data + size)) __builtin_trap();  // outside the file
  }
  if (auto config = ModelConfig::from_gguf(f)) (void)ModelWeights::from_gguf(f, *config);
  if (auto tok = Tokenizer::from_gguf(f)) {
    const std::vector<TokenId> ids = (*tok)->encode("Hello world <s> 123", {true, false, true});
    (void)(*tok)->decode(ids, true);
  }
  const ChatTemplate tmpl = ChatTemplate::from_gguf(f);
  (void)tmpl.apply({{"system", "s"}, {"user", "u"}}, true);
  return 0;
}

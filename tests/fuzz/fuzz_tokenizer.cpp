// libFuzzer target: a real vocabulary's encode and decode of arbitrary bytes
// (built twice: SPM with the llama-spm vocabulary; byte-level BPE with the
// gpt-2 vocabulary and the real Qwen tokenizer imported from
// tests/data/qwen-tokenizer). The first input byte picks the options (and for
// BPE the vocabulary); the rest is the text, and read as little-endian u16
// pairs also a sequence of token ids, in range or not.
// Checks the contracts of tokenizer.h: encode gives ids inside the
// vocabulary; the StreamDecoder emits only valid UTF-8 and, for ids that
// decode to valid UTF-8, its chunks add up to decode().
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/hf_import.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using namespace minfer;

struct Loaded {
  std::vector<uint8_t> bytes;  // backs `file` when built in memory
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tok;
};

[[noreturn]] void die(const std::string& what) {
  fprintf(stderr, "fuzz_tokenizer: %s\n", what.c_str());
  abort();
}

// The tokenizer of a parsed (or opened) file.
std::unique_ptr<Loaded> with_tokenizer(std::unique_ptr<Loaded> l, Expected<std::unique_ptr<gguf::File>> f) {
  if (!f) die(f.error().message);
  l->file = std::move(*f);
  auto t = Tokenizer::from_gguf(*l->file);
  if (!t) die(t.error().message);
  l->tok = std::move(*t);
  return l;
}

std::unique_ptr<Loaded> load_gguf(const std::string& path) {
  return with_tokenizer(std::make_unique<Loaded>(), gguf::File::open(path));
}

#ifdef MINFER_FUZZ_BPE
std::unique_ptr<Loaded> load_qwen() {
  auto l = std::make_unique<Loaded>();
  gguf::Writer writer;
  auto imported = import_hf_tokenizer(std::string(MINFER_TEST_DATA_DIR) + "/qwen-tokenizer/tokenizer.json", 0, writer);
  if (!imported) die(imported.error().message);
  l->bytes = writer.serialize();
  auto f = gguf::File::parse(l->bytes, "qwen-tokenizer.gguf");
  return with_tokenizer(std::move(l), std::move(f));
}
#endif

std::vector<std::unique_ptr<Loaded>>& vocabs() {
  static std::vector<std::unique_ptr<Loaded>> v = [] {
    std::vector<std::unique_ptr<Loaded>> out;
    const std::string dir = std::string(MINFER_TEST_DATA_DIR) + "/vocab/";
#ifdef MINFER_FUZZ_BPE
    out.push_back(load_gguf(dir + "ggml-vocab-gpt-2.gguf"));
    out.push_back(load_qwen());
#else
    out.push_back(load_gguf(dir + "ggml-vocab-llama-spm.gguf"));
    out.push_back(load_gguf(std::string(MINFER_TEST_DATA_DIR) + "/models/stories260K.gguf"));
#endif
    return out;
  }();
  return v;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

void check_stream(const Tokenizer& tok, const std::vector<TokenId>& ids, bool render_special) {
  StreamDecoder dec(tok, render_special);
  std::string joined;
  for (TokenId id : ids) {
    const std::string chunk = dec.push(id);
    if (!valid_utf8(chunk)) die("StreamDecoder emitted invalid UTF-8");
    joined += chunk;
  }
  const std::string tail = dec.flush();
  if (!valid_utf8(tail)) die("StreamDecoder::flush emitted invalid UTF-8");
  joined += tail;
  const std::string whole = tok.decode(ids, render_special);
  if (valid_utf8(whole) && joined != whole) die("StreamDecoder chunks differ from decode()");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)vocabs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const auto& all = vocabs();
  const Tokenizer& tok = *all[(flags >> 4) % all.size()]->tok;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  EncodeOptions opts;
  opts.add_bos = flags & 1;
  opts.add_eos = flags & 2;
  opts.parse_special = flags & 4;
  const bool render_special = flags & 8;
  const std::vector<TokenId> ids = tok.encode(text, opts);
  for (TokenId id : ids) {
    if (id < 0 || id >= tok.vocab_size()) die("encode produced an id outside the vocabulary");
  }
  (void)tok.decode(ids, render_special);
  check_stream(tok, ids, render_special);

  // The same bytes as raw ids (the daemon's /detokenize and token prompts
  // check the range first; the decoder must survive either way).
  std::vector<TokenId> raw;
  for (size_t i = 1; i + 1 < size; i += 2) {
    const int v = data[i] | (data[i + 1] << 8);
    raw.push_back((v & 0x8000) ? v % (tok.vocab_size() + 8) - 4 : v % tok.vocab_size());
  }
  for (TokenId id : raw) (void)tok.token_bytes(id, render_special);
  check_stream(tok, raw, render_special);
  return 0;
}

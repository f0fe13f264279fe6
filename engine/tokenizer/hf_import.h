// Converts a Hugging Face `tokenizer.json` (byte-level BPE, as Qwen and Llama-3
// ship) into the GGUF `gpt2` tokenizer keys the way llama.cpp's converter
// writes them, so that synthetic models tokenize like the real GGUF files.
#pragma once

#include <cstdint>
#include <string>

#include "engine/common/expected.h"

namespace minfer::gguf {
class Writer;
}

namespace minfer {

struct HfImportResult {
  int32_t n_tokens = 0;        // tokens written (after padding)
  std::string pre;             // tokenizer.ggml.pre chosen ("qwen2", "llama-bpe", ...)
  bool has_chat_template = false;
};

// Reads `tokenizer_json_path` (and tokenizer_config.json beside it when
// present: chat template, add_bos_token, eos/pad tokens) and sets on `writer`:
// tokenizer.ggml.model = "gpt2", .pre, .tokens, .token_type, .merges,
// .bos/.eos/.padding_token_id, .add_bos_token, tokenizer.chat_template.
// The vocabulary is padded with "[PAD<i>]" tokens up to `pad_to` entries
// (the model's embedding rows) when pad_to is larger.
Expected<HfImportResult> import_hf_tokenizer(const std::string& tokenizer_json_path, int32_t pad_to,
                                             gguf::Writer& writer);

}  // namespace minfer

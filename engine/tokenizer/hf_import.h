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

// Reads `tokenizer_json_path` (and beside it, when present:
// tokenizer_config.json for the chat template, add_bos/add_eos_token and the
// bos/eos/unk/pad tokens by text; chat_template.jinja; config.json for
// *_token_id still missing) and sets on `writer`:
// tokenizer.ggml.model = "gpt2", .pre, .tokens, .token_type, .merges,
// .bos/.eos/.unknown/.padding_token_id, .add_bos/.add_eos_token,
// tokenizer.chat_template.
// Token types as llama.cpp's converter: added tokens that are special or look
// special (<|...|>) are CONTROL, other added tokens USER_DEFINED.
// .pre comes from the pre-tokenizer's split regex (Qwen2's → "qwen2",
// Llama-3's → "llama-bpe", GPT-2's → "gpt-2"); another regex is kUnsupported.
// The vocabulary is padded with "[PAD<i>]" tokens (type UNUSED) up to
// `pad_to` entries (the model's embedding rows) when pad_to is larger; a
// pad_to smaller than the vocabulary is kInvalidArgument.
Expected<HfImportResult> import_hf_tokenizer(const std::string& tokenizer_json_path, int32_t pad_to,
                                             gguf::Writer& writer);

}  // namespace minfer

// GPT-2's byte-level alphabet: every byte is written as one printable code
// point (bytes_to_unicode in OpenAI's encoder.py), so that byte-level BPE
// vocabularies are plain text. Printable Latin-1 bytes map to themselves;
// the other 68 bytes map to U+0100.. in byte order (space → U+0120 'Ġ').
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace minfer::byte_level {

uint32_t byte_to_codepoint(uint8_t byte);
// The byte a code point stands for, or -1 when it is not in the alphabet.
int codepoint_to_byte(uint32_t cpt);

// Raw bytes → the vocabulary's spelling.
std::string encode(std::string_view bytes);
// The vocabulary's spelling → raw bytes. A code point outside the alphabet is
// copied as its own UTF-8 (llama.cpp writes "[UNK_BYTE_...]" instead; keeping
// the text is more useful and such pieces do not occur in byte-level vocabs).
std::string decode(std::string_view text);

}  // namespace minfer::byte_level

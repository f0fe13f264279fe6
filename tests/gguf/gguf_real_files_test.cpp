// Real GGUF files from tests/data, with expected values from
// tests/data/PROVENANCE.md (read there by an independent Python reader).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/gguf/gguf.h"

namespace minfer::gguf {
namespace {

const std::string kData = MINFER_TEST_DATA_DIR;

std::unique_ptr<File> open_or_fail(const std::string& path) {
  auto f = File::open(path);
  EXPECT_TRUE(f.has_value()) << f.error().message;
  return f ? std::move(*f) : nullptr;
}

TEST(GgufRealFiles, Stories260K) {
  auto f = open_or_fail(kData + "/models/stories260K.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->file_size(), 1185376u);
  EXPECT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(f->alignment(), 32u);  // no general.alignment key
  EXPECT_FALSE(f->has(kAlignmentKey));
  EXPECT_EQ(f->data_offset(), 14176u);
  ASSERT_EQ(f->tensors().size(), 48u);

  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(*f->get_u32("llama.block_count"), 5u);
  EXPECT_EQ(*f->get_u32("llama.feed_forward_length"), 172u);
  EXPECT_EQ(*f->get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(*f->get_u32("llama.context_length"), 2048u);
  EXPECT_EQ(*f->get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(*f->get_u32("tokenizer.ggml.seperator_token_id"), 4294967295u);  // sic
  EXPECT_FALSE(f->has("llama.rope.freq_base"));

  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[511], "\xe2\x80\x8a");  // U+200A
  const auto scores = f->get_f32_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.has_value());
  EXPECT_EQ(scores->back(), -252.0f);
  const auto types = f->get_i32_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.has_value());
  EXPECT_EQ(std::vector<int32_t>(types->begin(), types->begin() + 4), (std::vector<int32_t>{2, 3, 3, 6}));

  const TensorInfo* gate = f->find_tensor("blk.0.ffn_gate.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->type, DType::kF32);
  EXPECT_EQ(gate->n_dims, 2);
  EXPECT_EQ(gate->shape_string(), "[64, 172]");
  EXPECT_EQ(gate->offset, 311808u);
  EXPECT_EQ(gate->size_bytes, 64u * 172u * 4u);
  EXPECT_EQ(f->tensors()[0].name, "token_embd.weight");
  EXPECT_EQ(f->find_tensor("output.weight")->offset, 131328u);
  EXPECT_EQ(f->find_tensor("blk.4.ffn_up.weight")->offset, 1126912u);

  // The data section ends exactly at the end of the file.
  uint64_t end = 0;
  for (const TensorInfo& t : f->tensors()) end = std::max(end, f->data_offset() + t.offset + t.size_bytes);
  EXPECT_EQ(end, f->file_size());
  // Trained weights: finite, and the norms are not all zero.
  const TensorInfo* norm = f->find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  float sum = 0;
  for (uint64_t i = 0; i < norm->ne[0]; ++i) {
    float v;
    std::memcpy(&v, norm->data + 4 * i, 4);
    ASSERT_TRUE(std::isfinite(v));
    sum += std::fabs(v);
  }
  EXPECT_GT(sum, 1.0f);
}

TEST(GgufRealFiles, LlamaTinyRandom) {
  auto f = open_or_fail(kData + "/models/llama-2-tiny-random.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->metadata().size(), 18u);
  EXPECT_EQ(f->data_offset(), 724416u);
  ASSERT_EQ(f->tensors().size(), 12u);
  EXPECT_EQ(*f->get_u32("general.file_type"), 1u);
  EXPECT_EQ((*f->get_string_array("tokenizer.ggml.tokens")).size(), 32000u);
  const TensorInfo* out = f->find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->type, DType::kF16);
  EXPECT_EQ(out->shape_string(), "[8, 32000]");
  EXPECT_EQ(out->offset, 514144u);
  EXPECT_EQ(f->data_offset() + out->offset + out->size_bytes, f->file_size());
}

struct VocabCase {
  const char* file;
  size_t n_tokens;
  const char* arch;
};

// n_vocab and arch from the PROVENANCE.md table.
const VocabCase kVocabs[] = {
    {"ggml-vocab-baichuan.gguf", 64000, "baichuan"},
    {"ggml-vocab-bert-bge.gguf", 30522, "bert"},
    {"ggml-vocab-deepseek-coder.gguf", 32256, "llama"},
    {"ggml-vocab-deepseek-llm.gguf", 102400, "llama"},
    {"ggml-vocab-falcon.gguf", 65024, "falcon"},
    {"ggml-vocab-gpt-2.gguf", 50257, "gpt2"},
    {"ggml-vocab-gpt-neox.gguf", 50432, "gptneox"},
    {"ggml-vocab-llama-spm.gguf", 32000, "llama"},
    {"ggml-vocab-mpt.gguf", 50432, "mpt"},
    {"ggml-vocab-phi-3.gguf", 32064, "phi3"},
    {"ggml-vocab-refact.gguf", 49216, "refact"},
    {"ggml-vocab-starcoder.gguf", 49152, "starcoder2"},
};

TEST(GgufRealFiles, AllTwelveVocabFilesLoad) {
  for (const VocabCase& c : kVocabs) {
    SCOPED_TRACE(c.file);
    auto f = open_or_fail(kData + "/vocab/" + c.file);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->tensors().size(), 0u);
    EXPECT_EQ(*f->get_string("general.architecture"), c.arch);
    auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.has_value()) << tokens.error().message;
    EXPECT_EQ(tokens->size(), c.n_tokens);
  }
}

TEST(GgufRealFiles, VocabFileEndsBeforeTheAlignedDataOffset) {
  // PROVENANCE.md: baichuan is 1,340,998 bytes; its aligned data offset would be 1,341,024.
  auto f = open_or_fail(kData + "/vocab/ggml-vocab-baichuan.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->file_size(), 1340998u);
  EXPECT_EQ(f->data_offset(), 1341024u);
}

}  // namespace
}  // namespace minfer::gguf

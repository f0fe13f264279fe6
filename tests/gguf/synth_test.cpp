// engine/synth: presets, the tensor plan and Q4_K_M choices, the vocabulary,
// deterministic weights, and files the GGUF reader reads back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>

#include "engine/common/half.h"
#include "engine/gguf/gguf.h"
#include "engine/quant/quant.h"
#include "engine/synth/normal_rng.h"
#include "engine/synth/spm_vocab.h"
#include "engine/synth/synth.h"
#include "engine/tokenizer/tokenizer.h"

namespace minfer::synth {
namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/synth_test_" + name; }

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Options small_options(const std::string& preset, const std::string& type, int layers, int vocab) {
  Options o;
  o.preset = *find_preset(preset);
  o.type = type;
  o.layers = layers;
  o.vocab = vocab;
  return o;
}

// Writes `o` to a temp file and opens it; the file is removed when the
// returned File is (its mapping keeps the data alive meanwhile).
std::unique_ptr<gguf::File> write_and_open(Options o, const std::string& name) {
  o.output_path = temp_path(name);
  const Expected<uint64_t> written = write_model(o);
  EXPECT_TRUE(written.has_value()) << written.error().message;
  if (!written) return nullptr;
  auto f = gguf::File::open(o.output_path);
  std::remove(o.output_path.c_str());
  EXPECT_TRUE(f.has_value()) << f.error().message;
  if (!f) return nullptr;
  EXPECT_EQ((*f)->file_size(), *written);
  return std::move(*f);
}

std::vector<float> as_f32(const gguf::TensorInfo& t) {
  std::vector<float> out(t.n_elements());
  const uint64_t rows = t.n_elements() / t.ne[0];
  const uint64_t row_bytes = row_size(t.type, t.ne[0]);
  for (uint64_t r = 0; r < rows; ++r) {
    quant::dequantize_row(t.type, t.data + r * row_bytes, out.data() + r * t.ne[0], static_cast<int64_t>(t.ne[0]));
  }
  return out;
}

// --- presets and plans --------------------------------------------------------

TEST(SynthPresets, ValuesFromConfigJson) {
  const Preset q05 = *find_preset("qwen2.5-0.5b");
  EXPECT_EQ(q05.arch, "qwen2");
  EXPECT_EQ(q05.n_layers, 24);
  EXPECT_EQ(q05.d_model, 896);
  EXPECT_EQ(q05.n_heads, 14);
  EXPECT_EQ(q05.n_kv_heads, 2);
  EXPECT_EQ(q05.head_dim, 64);
  EXPECT_EQ(q05.d_ff, 4864);
  EXPECT_EQ(q05.vocab_size, 151936);
  EXPECT_EQ(q05.n_ctx, 32768);
  EXPECT_TRUE(q05.tied_output && q05.qkv_bias && !q05.qk_norm);
  const Preset q7 = *find_preset("qwen2.5-7b");
  EXPECT_EQ(q7.head_dim, 128);
  EXPECT_EQ(q7.vocab_size, 152064);
  EXPECT_FALSE(q7.tied_output);
  const Preset q3 = *find_preset("qwen3-0.6b");
  EXPECT_EQ(q3.d_model, 1024);
  EXPECT_EQ(q3.head_dim, 128);  // not 1024 / 16
  EXPECT_EQ(q3.n_ctx, 40960);
  EXPECT_TRUE(q3.qk_norm && q3.head_dim_in_config && !q3.qkv_bias);
  const Preset l = *find_preset("llama-3.2-1b");
  EXPECT_EQ(l.vocab_size, 128256);
  EXPECT_EQ(l.rope_base, 500000.0f);
  EXPECT_EQ(l.rms_eps, 1e-5f);
  EXPECT_EQ(preset_names().size(), 6u);
  EXPECT_FALSE(find_preset("gpt-5").has_value());
}

std::map<std::string, DType> types_of(const ModelPlan& plan) {
  std::map<std::string, DType> m;
  for (const PlannedTensor& t : plan.tensors) m[t.name] = t.type;
  return m;
}

// llama.cpp's use_more_bits for 24 layers: < 3, >= 21, and (i - 3) % 3 == 2.
const std::set<int> kMoreBits24 = {0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23};

TEST(SynthRecipe, Q4KMOnQwen25HalfBFallsBackWhereRowsAre896) {
  // 896 = 3.5 x 256: every matrix reading d_model cannot be a K-quant.
  const auto plan = plan_model(small_options("qwen2.5-0.5b", "q4_k_m", -1, -1));
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  EXPECT_EQ(plan->file_type, 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  auto types = types_of(*plan);
  EXPECT_EQ(types.size(), 1u + 24u * 12u + 1u);
  EXPECT_EQ(types["token_embd.weight"], DType::kQ8_0);  // tied: the output rule, 896 % 256 != 0
  EXPECT_EQ(types["output_norm.weight"], DType::kF32);
  for (int l = 0; l < 24; ++l) {
    SCOPED_TRACE(l);
    const std::string b = "blk." + std::to_string(l) + ".";
    const bool more = kMoreBits24.count(l) != 0;
    EXPECT_EQ(types[b + "attn_q.weight"], DType::kQ5_0);  // Q4_K -> Q5_0
    EXPECT_EQ(types[b + "attn_k.weight"], DType::kQ5_0);
    EXPECT_EQ(types[b + "attn_v.weight"], more ? DType::kQ8_0 : DType::kQ5_0);  // Q6_K -> Q8_0
    EXPECT_EQ(types[b + "attn_output.weight"], DType::kQ5_0);
    EXPECT_EQ(types[b + "ffn_gate.weight"], DType::kQ5_0);
    EXPECT_EQ(types[b + "ffn_up.weight"], DType::kQ5_0);
    EXPECT_EQ(types[b + "ffn_down.weight"], more ? DType::kQ6_K : DType::kQ4_K);  // 4864 = 19 x 256
    EXPECT_EQ(types[b + "attn_q.bias"], DType::kF32);
    EXPECT_EQ(types[b + "attn_norm.weight"], DType::kF32);
  }
}

TEST(SynthRecipe, Q4KMOnQwen257BWithSeparateOutput) {
  const auto plan = plan_model(small_options("qwen2.5-7b", "q4_k_m", -1, -1));
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  auto types = types_of(*plan);
  EXPECT_EQ(types["token_embd.weight"], DType::kQ4_K);
  EXPECT_EQ(types["output.weight"], DType::kQ6_K);
  // 28 layers: more bits for < 3, >= 24, (i - 3) % 3 == 2.
  const std::set<int> more = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27};
  int n_q6 = 0;
  for (int l = 0; l < 28; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const DType expect = more.count(l) ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(types[b + "attn_v.weight"], expect) << l;
    EXPECT_EQ(types[b + "ffn_down.weight"], expect) << l;
    EXPECT_EQ(types[b + "attn_q.weight"], DType::kQ4_K) << l;
    n_q6 += types[b + "attn_v.weight"] == DType::kQ6_K;
  }
  EXPECT_EQ(n_q6, 14);  // "about half"
}

TEST(SynthRecipe, Q4KMTiedLlamaUsesQ6KForTheEmbedding) {
  const auto plan = plan_model(small_options("llama-3.2-1b", "q4_k_m", -1, -1));
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  auto types = types_of(*plan);
  EXPECT_EQ(types["token_embd.weight"], DType::kQ6_K);  // 2048 % 256 == 0
  EXPECT_EQ(types.count("output.weight"), 0u);
  EXPECT_EQ(types["rope_freqs.weight"], DType::kF32);
}

TEST(SynthRecipe, UniformTypes) {
  const auto plan = plan_model(small_options("qwen3-0.6b", "bf16", 2, 1024));
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  EXPECT_EQ(plan->file_type, 32u);
  for (const PlannedTensor& t : plan->tensors) {
    const bool matrix = t.ne.size() == 2;
    EXPECT_EQ(t.type, matrix ? DType::kBF16 : DType::kF32) << t.name;
  }
  const std::pair<const char*, uint32_t> ftypes[] = {{"f32", 0},  {"f16", 1},  {"q4_0", 2}, {"q4_1", 3},
                                                      {"q8_0", 7}, {"q5_0", 8}, {"q5_1", 9}, {"q4_k", 15},
                                                      {"q5_k", 17}, {"Q6_K", 18}};
  for (const auto& [name, ftype] : ftypes) {
    const auto p = plan_model(small_options("qwen3-0.6b", name, 1, 1024));
    ASSERT_TRUE(p.has_value()) << name << ": " << p.error().message;
    EXPECT_EQ(p->file_type, ftype) << name;
  }
}

TEST(SynthRecipe, UniformKQuantOnIncompatibleRowsIsAnError) {
  const auto plan = plan_model(small_options("qwen2.5-0.5b", "q4_k", 1, 1024));
  ASSERT_FALSE(plan.has_value());
  EXPECT_EQ(plan.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(plan.error().message.find("tensor 'token_embd.weight' has rows of 896 values, not a multiple of q4_K's "
                                      "block of 256"),
            std::string::npos)
      << plan.error().message;
  const auto bad = plan_model(small_options("qwen2.5-0.5b", "q3_k", 1, 1024));
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("unknown type 'q3_k'; known: f32, f16, bf16"), std::string::npos);
}

TEST(SynthRecipe, Qwen3Shapes) {
  const auto plan = plan_model(small_options("qwen3-0.6b", "f16", 1, 1024));
  ASSERT_TRUE(plan.has_value());
  std::map<std::string, std::vector<uint64_t>> shapes;
  for (const PlannedTensor& t : plan->tensors) shapes[t.name] = t.ne;
  using V = std::vector<uint64_t>;
  EXPECT_EQ(shapes["blk.0.attn_q.weight"], (V{1024, 2048}));  // 16 heads x 128
  EXPECT_EQ(shapes["blk.0.attn_k.weight"], (V{1024, 1024}));  // 8 kv heads x 128
  EXPECT_EQ(shapes["blk.0.attn_output.weight"], (V{2048, 1024}));
  EXPECT_EQ(shapes["blk.0.attn_q_norm.weight"], (V{128}));
  EXPECT_EQ(shapes["blk.0.ffn_down.weight"], (V{3072, 1024}));
  EXPECT_EQ(shapes.count("blk.0.attn_q.bias"), 0u);
  EXPECT_EQ(shapes.count("output.weight"), 0u);
}

// --- vocabulary ---------------------------------------------------------------

TEST(SynthVocab, SentencePieceLayout) {
  const auto v = synthetic_spm_vocab(2000);
  ASSERT_TRUE(v.has_value());
  ASSERT_EQ(v->tokens.size(), 2000u);
  EXPECT_EQ(v->tokens[0], "<unk>");
  EXPECT_EQ(v->tokens[1], "<s>");
  EXPECT_EQ(v->tokens[2], "</s>");
  EXPECT_EQ(v->tokens[3], "<0x00>");
  EXPECT_EQ(v->tokens[3 + 0x0A], "<0x0A>");
  EXPECT_EQ(v->tokens[258], "<0xFF>");
  EXPECT_EQ(v->tokens[259], "\xe2\x96\x81");
  EXPECT_EQ((std::vector<int32_t>(v->types.begin(), v->types.begin() + 4)), (std::vector<int32_t>{2, 3, 3, 6}));
  EXPECT_EQ(v->types[259], 1);
  const std::set<std::string> unique(v->tokens.begin(), v->tokens.end());
  EXPECT_EQ(unique.size(), v->tokens.size());
  for (const char* piece : {"a", "\xe2\x96\x81" "a", "\xe2\x96\x81" "the", "\xe2\x96\x81" "th", "he", "Z", "~"}) {
    EXPECT_EQ(unique.count(piece), 1u) << piece;
  }
  for (size_t i = 260; i < v->scores.size(); ++i) ASSERT_LT(v->scores[i], v->scores[i - 1]) << i;
  const auto full = synthetic_spm_vocab(151936);
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(std::set<std::string>(full->tokens.begin(), full->tokens.end()).size(), 151936u);
  const auto too_small = synthetic_spm_vocab(258);
  ASSERT_FALSE(too_small.has_value());
  EXPECT_NE(too_small.error().message.find("at least 259 tokens"), std::string::npos);
}

// --- random numbers -------------------------------------------------------------

TEST(SynthRandom, LogMatchesLibm) {
  for (double x : {1e-300, 1e-10, 0.001, 0.1, 0.3, 0.5, 0.70710678, 0.9, 0.999999, 1.0, 2.0, 12345.678}) {
    EXPECT_NEAR(deterministic_log(x), std::log(x), 4e-16 * std::max(1.0, std::fabs(std::log(x)))) << x;
  }
}

TEST(SynthRandom, NormalMoments) {
  const int n = 1 << 20;
  std::vector<float> values(n);
  NormalRng(42).fill(values.data(), values.size(), 1.0f);
  double sum = 0, sum2 = 0, sum4 = 0;
  for (float v : values) {
    const double z = v;
    sum += z;
    sum2 += z * z;
    sum4 += z * z * z * z;
  }
  // Standard errors at n = 2^20: mean 0.001, variance 0.0014, kurtosis ~0.005.
  EXPECT_NEAR(sum / n, 0.0, 0.005);
  EXPECT_NEAR(sum2 / n, 1.0, 0.007);
  EXPECT_NEAR(sum4 / n, 3.0, 0.05);
}

// --- written files --------------------------------------------------------------

TEST(SynthFile, Qwen25Q80ReadsBackWithShapesTypesAndMetadata) {
  auto f = write_and_open(small_options("qwen2.5-0.5b", "q8_0", 2, 1024), "q80.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->get_string("general.architecture"), "qwen2");
  EXPECT_EQ(*f->get_u32("qwen2.block_count"), 2u);
  EXPECT_EQ(*f->get_u32("qwen2.context_length"), 32768u);
  EXPECT_EQ(*f->get_u32("qwen2.embedding_length"), 896u);
  EXPECT_EQ(*f->get_u32("qwen2.feed_forward_length"), 4864u);
  EXPECT_EQ(*f->get_u32("qwen2.attention.head_count"), 14u);
  EXPECT_EQ(*f->get_u32("qwen2.attention.head_count_kv"), 2u);
  EXPECT_EQ(*f->get_f32("qwen2.rope.freq_base"), 1000000.0f);
  EXPECT_EQ(*f->get_f32("qwen2.attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_EQ(*f->get_u32("general.file_type"), 7u);
  EXPECT_FALSE(f->has("general.alignment"));
  EXPECT_FALSE(f->has("qwen2.attention.key_length"));  // Qwen2.5's config.json has no head_dim
  EXPECT_EQ(*f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), 1024u);
  EXPECT_EQ(*f->get_u32("tokenizer.ggml.bos_token_id"), 1u);

  ASSERT_EQ(f->tensors().size(), 26u);  // embd, 2 x 12 per block, output_norm (tied: no output)
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);
  struct Expect {
    const char* name;
    const char* shape;
    DType type;
  };
  const Expect expect[] = {
      {"token_embd.weight", "[896, 1024]", DType::kQ8_0},     {"blk.0.attn_q.weight", "[896, 896]", DType::kQ8_0},
      {"blk.0.attn_q.bias", "[896]", DType::kF32},            {"blk.1.attn_k.weight", "[896, 128]", DType::kQ8_0},
      {"blk.1.attn_v.bias", "[128]", DType::kF32},            {"blk.1.attn_output.weight", "[896, 896]", DType::kQ8_0},
      {"blk.0.ffn_gate.weight", "[896, 4864]", DType::kQ8_0}, {"blk.0.ffn_down.weight", "[4864, 896]", DType::kQ8_0},
      {"blk.1.ffn_norm.weight", "[896]", DType::kF32},        {"output_norm.weight", "[896]", DType::kF32},
  };
  for (const Expect& e : expect) {
    const gguf::TensorInfo* t = f->find_tensor(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->shape_string(), e.shape) << e.name;
    EXPECT_EQ(t->type, e.type) << e.name;
  }
  // Norms are exactly 1; weights have std 0.02.
  for (float v : as_f32(*f->find_tensor("blk.1.ffn_norm.weight"))) ASSERT_EQ(v, 1.0f);
  const std::vector<float> w = as_f32(*f->find_tensor("blk.0.ffn_gate.weight"));
  double sum = 0, sum2 = 0;
  for (float v : w) {
    sum += v;
    sum2 += double{v} * v;
  }
  EXPECT_NEAR(sum / w.size(), 0.0, 1e-4);
  EXPECT_NEAR(std::sqrt(sum2 / w.size()), 0.02, 2e-4);
  const std::vector<float> bias = as_f32(*f->find_tensor("blk.0.attn_q.bias"));
  double bias2 = 0;
  for (float v : bias) bias2 += double{v} * v;
  EXPECT_NEAR(std::sqrt(bias2 / bias.size()), 0.02, 0.002);  // 896 samples
}

TEST(SynthFile, QuantizedValuesAreTheF32ValuesRounded) {
  // The same seed draws the same values whatever the type: the Q8_0 file
  // dequantizes to the F32 file within half of Q8_0's step d = max|x| / 127,
  // plus the error of storing d as f16 (relative 2^-11, times |q| <= 127).
  auto f32 = write_and_open(small_options("qwen2.5-0.5b", "f32", 1, 512), "same_f32.gguf");
  auto q8 = write_and_open(small_options("qwen2.5-0.5b", "q8_0", 1, 512), "same_q8.gguf");
  ASSERT_TRUE(f32 && q8);
  const std::vector<float> a = as_f32(*f32->find_tensor("blk.0.attn_k.weight"));
  const std::vector<float> b = as_f32(*q8->find_tensor("blk.0.attn_k.weight"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t blk = 0; blk < a.size(); blk += 32) {
    float amax = 0;
    for (size_t i = blk; i < blk + 32; ++i) amax = std::max(amax, std::fabs(a[i]));
    for (size_t i = blk; i < blk + 32; ++i) ASSERT_LE(std::fabs(a[i] - b[i]), amax / 127.0f * (0.5f + 127.0f / 2048.0f)) << i;
  }
}

TEST(SynthFile, Q4KMFileHasThePlannedTypes) {
  // 8 layers: use_more_bits picks 0, 3, 6 and 7.
  const Options o = small_options("qwen2.5-0.5b", "q4_k_m", 8, 512);
  auto f = write_and_open(o, "q4km.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->get_u32("general.file_type"), 15u);
  const std::set<int> more = {0, 3, 6, 7};
  for (int l = 0; l < 8; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(f->find_tensor(b + "attn_v.weight")->type, more.count(l) ? DType::kQ8_0 : DType::kQ5_0) << l;
    EXPECT_EQ(f->find_tensor(b + "ffn_down.weight")->type, more.count(l) ? DType::kQ6_K : DType::kQ4_K) << l;
    EXPECT_EQ(f->find_tensor(b + "ffn_up.weight")->type, DType::kQ5_0) << l;
  }
  EXPECT_EQ(f->find_tensor("token_embd.weight")->type, DType::kQ8_0);
  // Every K-quant tensor dequantizes to values of the right scale.
  const std::vector<float> down = as_f32(*f->find_tensor("blk.1.ffn_down.weight"));
  double sum2 = 0;
  for (float v : down) sum2 += double{v} * v;
  EXPECT_NEAR(std::sqrt(sum2 / down.size()), 0.02, 0.002);
}

TEST(SynthFile, LlamaMetadataAndRopeFactors) {
  auto f = write_and_open(small_options("llama-3.2-1b", "f16", 1, 300), "llama.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->get_u32("llama.rope.dimension_count"), 64u);
  EXPECT_EQ(*f->get_u32("llama.vocab_size"), 300u);
  EXPECT_EQ(*f->get_u32("llama.attention.key_length"), 64u);
  EXPECT_EQ(*f->get_u32("llama.attention.value_length"), 64u);
  EXPECT_EQ(*f->get_f32("llama.rope.freq_base"), 500000.0f);
  const gguf::TensorInfo* rf = f->find_tensor("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  const std::vector<float> factors = as_f32(*rf);
  ASSERT_EQ(factors.size(), 32u);
  EXPECT_EQ(factors.front(), 1.0f);  // short wavelengths keep their frequency
  EXPECT_EQ(factors.back(), 32.0f);  // long ones are slowed by `factor`
  // i = 30 (factor index 15), by hand: freq = 500000^(-30/64) = e^-6.15111
  // = 2.13112e-3, wavelength 2 pi / freq = 2948.3, inside [2048, 8192];
  // smooth = (8192 / 2948.3 - 1) / 3 = 0.59285,
  // factor = 1 / ((1 - 0.59285) / 32 + 0.59285) = 1.6513.
  EXPECT_NEAR(factors[15], 1.6513f, 0.0005f);
  EXPECT_EQ(factors[13], 1.0f);   // i = 26: wavelength 1298 < 2048
  EXPECT_EQ(factors[18], 32.0f);  // i = 36: wavelength 10089 > 8192
}

TEST(SynthFile, SameSeedSameBytesAnyThreadCount) {
  Options o = small_options("qwen3-0.6b", "q8_0", 1, 600);
  o.seed = 7;
  o.threads = 1;
  o.output_path = temp_path("seed_a.gguf");
  ASSERT_TRUE(write_model(o));
  o.threads = 3;
  o.output_path = temp_path("seed_b.gguf");
  ASSERT_TRUE(write_model(o));
  o.seed = 8;
  o.output_path = temp_path("seed_c.gguf");
  ASSERT_TRUE(write_model(o));
  const auto a = read_all(temp_path("seed_a.gguf"));
  const auto b = read_all(temp_path("seed_b.gguf"));
  const auto c = read_all(temp_path("seed_c.gguf"));
  auto file_c = gguf::File::open(temp_path("seed_c.gguf"));
  for (const char* n : {"seed_a.gguf", "seed_b.gguf", "seed_c.gguf"}) std::remove(temp_path(n).c_str());
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the thread count changed the bytes";
  ASSERT_EQ(a.size(), c.size());  // only values differ (and the seed in general.name)
  ASSERT_TRUE(file_c.has_value());
  // Every tensor but the norms differs between seeds.
  for (const gguf::TensorInfo& t : (*file_c)->tensors()) {
    const bool differs = !std::equal(t.data, t.data + t.size_bytes, a.begin() + static_cast<std::ptrdiff_t>(
                                                                                  (*file_c)->data_offset() + t.offset));
    EXPECT_EQ(differs, t.name.find("norm") == std::string::npos) << t.name;
  }
}

TEST(SynthFile, SyntheticVocabularyTokenizesAscii) {
  auto f = write_and_open(small_options("qwen2.5-0.5b", "q8_0", 1, 4000), "vocab.gguf");
  ASSERT_NE(f, nullptr);
  auto tok = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok.has_value()) << tok.error().message;
  EXPECT_EQ((*tok)->kind(), TokenizerKind::kSpm);
  EXPECT_EQ((*tok)->vocab_size(), 4000);
  const std::string text = "Once upon a time, the little model said: Hello world! {x=42}\n";
  EncodeOptions opts;
  opts.add_bos = (*tok)->special().add_bos;
  const std::vector<TokenId> ids = (*tok)->encode(text, opts);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);  // BOS
  EXPECT_EQ((*tok)->decode(ids), text);
  // Words come out whole, not letter by letter.
  const std::optional<TokenId> the = (*tok)->find_piece("\xe2\x96\x81the");
  ASSERT_TRUE(the.has_value());
  EXPECT_NE(std::find(ids.begin(), ids.end(), *the), ids.end());
  EXPECT_LT(ids.size(), text.size() / 2);
}

TEST(SynthFile, HuggingFaceTokenizerIsCarried) {
  Options o = small_options("qwen2.5-0.5b", "q8_0", 1, -1);
  o.tokenizer_json = std::string(MINFER_TEST_DATA_DIR) + "/qwen-tokenizer/tokenizer.json";
  auto f = write_and_open(o, "hf.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*f->get_string("tokenizer.ggml.pre"), "qwen2");
  // 151,669 tokens padded to the preset's 151,936 embedding rows.
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), 151936u);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->shape_string(), "[896, 151936]");
  // The model keys come first, then the tokenizer's, as the converter orders them.
  EXPECT_EQ(f->metadata().front().first, "general.architecture");
  auto tok = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok.has_value()) << tok.error().message;
  const std::vector<TokenId> ids = (*tok)->encode("Hello world", EncodeOptions{});
  // "Hello" and " world" as in the second string of qwen-tokenizer/reference-vectors.json.
  EXPECT_EQ(ids, (std::vector<TokenId>{9707, 1879}));
}

TEST(SynthFile, PinnedBytes) {
  // Pins the generator end to end (mt19937_64, the polar method, the log,
  // the seeding, f32 -> f16 rounding): the same value must come out on every
  // platform and compiler. Recorded on x86-64 with GCC 12.
  Options o = small_options("qwen2.5-0.5b", "f16", 1, 300);
  o.seed = 1;
  auto f = write_and_open(o, "pinned.gguf");
  ASSERT_NE(f, nullptr);
  const gguf::TensorInfo* t = f->find_tensor("blk.0.attn_k.weight");
  ASSERT_NE(t, nullptr);
  const uint64_t h = hash_name(std::string_view(reinterpret_cast<const char*>(t->data), t->size_bytes));
  uint16_t first;
  std::memcpy(&first, t->data, 2);
  EXPECT_EQ(h, 0x24e90743259e9d68ull) << std::hex << "hash 0x" << h << ", first value " << f16_to_f32(first);
}

}  // namespace
}  // namespace minfer::synth

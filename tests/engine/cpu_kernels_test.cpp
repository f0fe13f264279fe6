// The CPU backend's fast ops against the scalar references, on random data,
// odd sizes and the edge cases (one token, masked cells, GQA groups, head
// dims 64 and 128, non-contiguous cells).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>

#include <unistd.h>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_kernels.h"
#include "engine/gguf/gguf.h"
#include "engine/graph/graph.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/backend/cpu/reference/reference.h"
#include "engine/quant/quant.h"
#include "engine/scheduler/runner.h"
#include "tests/engine/test_models.h"

namespace minfer {
namespace {

std::vector<float> random_vec(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct AttnCase {
  int n_heads, n_kv_heads, head_dim, n_tokens, n_cells;
  DType kv;
};

class CpuAttention : public testing::TestWithParam<AttnCase> {};

TEST_P(CpuAttention, MatchesReference) {
  const AttnCase c = GetParam();
  std::mt19937 rng(c.head_dim * 1000 + c.n_cells);
  const int kv_dim = c.n_kv_heads * c.head_dim;
  const int n_ctx = c.n_cells + 5;
  const size_t elem = c.kv == DType::kF16 ? 2 : 4;
  std::vector<uint8_t> kc(static_cast<size_t>(n_ctx) * kv_dim * elem), vc(kc.size());
  for (int cell = 0; cell < n_ctx; ++cell) {
    auto k = random_vec(static_cast<size_t>(kv_dim), rng), v = random_vec(static_cast<size_t>(kv_dim), rng);
    ref::kv_store_ref(k.data(), kc.data() + static_cast<size_t>(cell) * kv_dim * elem, c.kv, kv_dim);
    ref::kv_store_ref(v.data(), vc.data() + static_cast<size_t>(cell) * kv_dim * elem, c.kv, kv_dim);
  }
  // The sequence's cells in a scattered order; cell j holds position j, the
  // queries are the last n_tokens positions, so the mask is causal.
  std::vector<int32_t> seq_cells(static_cast<size_t>(c.n_cells)), cell_pos(static_cast<size_t>(n_ctx), 1 << 30);
  // A stride coprime with n_ctx: every cell once (a permutation).
  int stride = 7;
  while (std::gcd(stride, n_ctx) != 1) ++stride;
  for (int j = 0; j < c.n_cells; ++j) {
    seq_cells[static_cast<size_t>(j)] = (j * stride + 3) % n_ctx;
    cell_pos[static_cast<size_t>(seq_cells[static_cast<size_t>(j)])] = j;
  }
  std::vector<int32_t> q_pos(static_cast<size_t>(c.n_tokens));
  for (int t = 0; t < c.n_tokens; ++t) q_pos[static_cast<size_t>(t)] = c.n_cells - c.n_tokens + t;
  const int q_dim = c.n_heads * c.head_dim;
  const auto q = random_vec(static_cast<size_t>(c.n_tokens) * q_dim, rng);
  std::vector<float> out(q.size(), NAN), expected(q.size());
  ThreadPool pool(3);
  cpu::AttentionArgs a;
  a.q = q.data();
  a.k_cache = kc.data();
  a.v_cache = vc.data();
  a.seq_cells = seq_cells.data();
  a.n_seq_cells = c.n_cells;
  a.cell_pos = cell_pos.data();
  a.q_pos = q_pos.data();
  a.n_tokens = c.n_tokens;
  a.shape = {c.n_heads, c.n_kv_heads, c.head_dim, c.kv};
  a.out = out.data();
  std::vector<std::vector<float>> scratch;
  cpu::attention(pool, a, scratch);
  for (int t = 0; t < c.n_tokens; ++t) {
    ref::attention_ref(q.data() + static_cast<size_t>(t) * q_dim, kc.data(), vc.data(), seq_cells.data(), c.n_cells,
                       cell_pos.data(), q_pos[static_cast<size_t>(t)], a.shape,
                       expected.data() + static_cast<size_t>(t) * q_dim);
  }
  // f32 arithmetic over ≤ 300 terms of O(1) values: 1e-5 absolute.
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], expected[i], 1e-5) << "first bad index " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuAttention,
                         testing::Values(AttnCase{14, 2, 64, 1, 1, DType::kF16},      // one token, one cell
                                         AttnCase{14, 2, 64, 1, 300, DType::kF16},    // decode, qwen2.5-0.5b heads
                                         AttnCase{16, 8, 128, 7, 37, DType::kF16},    // prefill chunk, qwen3 heads
                                         AttnCase{8, 4, 8, 13, 13, DType::kF32},      // stories260K, full causal
                                         AttnCase{4, 4, 64, 3, 10, DType::kF32},      // MHA
                                         AttnCase{32, 8, 128, 2, 129, DType::kF32},
                                         AttnCase{18, 2, 22, 3, 40, DType::kF32},     // group 9: 8 heads a pass and 1; a row's tail
                                         AttnCase{16, 1, 20, 2, 33, DType::kF16}));   // group 16: two passes of 8

// The softmax's e^x (x ≤ 0): within 2 ulp of e^x rounded to float over the
// normal floats' range, 0 below it and for -inf and NaN.
TEST(CpuSoftmax, ExpIsWithinTwoUlp) {
  auto ulps = [](float a, float b) {
    int32_t ia = 0, ib = 0;
    std::memcpy(&ia, &a, sizeof a);
    std::memcpy(&ib, &b, sizeof b);
    return std::abs(static_cast<int64_t>(ia) - ib);
  };
  int64_t worst = 0;
  float worst_x = 0.0f;
  std::vector<float> xs = {0.0f, -0.0f, -1e-30f, -1e-7f, -0.34657359f, -0.5f, -1.0f, -10.0f, -87.0f, -87.33654f};
  for (int i = 0; i <= 400000; ++i) xs.push_back(-87.33654f * static_cast<float>(i) / 400000.0f);
  for (const float x : xs) {
    const auto want = static_cast<float>(std::exp(static_cast<double>(x)));
    const float got = cpu::softmax_exp(x);
    ASSERT_TRUE(std::isfinite(got)) << "x " << x;
    if (ulps(got, want) > worst) {
      worst = ulps(got, want);
      worst_x = x;
    }
  }
  EXPECT_LE(worst, 2) << "worst at x = " << worst_x;
  EXPECT_EQ(cpu::softmax_exp(0.0f), 1.0f);
  EXPECT_EQ(cpu::softmax_exp(-87.5f), 0.0f);
  EXPECT_EQ(cpu::softmax_exp(-1000.0f), 0.0f);
  EXPECT_EQ(cpu::softmax_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(cpu::softmax_exp(std::numeric_limits<float>::quiet_NaN()), 0.0f);
}

// The weights as the machine's vector form computes them: each one the bits
// of softmax_exp(score - max), 0 for ±inf scores, only the kept places
// written, at every count across the vector width, with keep in one run (a
// causal prefill's) and with gaps; the sum within rounding of the weights'
// sum in double.
TEST(CpuSoftmax, WeightsAreSoftmaxExpsBits) {
  std::mt19937 rng(7);
  for (const bool gaps : {false, true}) {
    for (int n = 0; n <= 37; ++n) {
      auto scores = random_vec(static_cast<size_t>(2 * n + 3), rng, 4.0f);
      if (n > 5) scores[3] = -std::numeric_limits<float>::infinity();
      if (n > 9) scores[7] = std::numeric_limits<float>::infinity();
      std::vector<int32_t> keep;
      for (int j = gaps ? 0 : 1; static_cast<int>(keep.size()) < n; ++j) {
        if (!gaps || j % 3 != 1) keep.push_back(j);  // gaps: every third place is not kept
      }
      float m = -std::numeric_limits<float>::infinity();
      for (const int32_t j : keep) {
        if (std::isfinite(scores[static_cast<size_t>(j)])) m = std::max(m, scores[static_cast<size_t>(j)]);
      }
      auto w = scores;
      const float sum = cpu::softmax_weights(w.data(), keep.data(), n, m);
      double want_sum = 0.0;
      std::vector<bool> kept(w.size(), false);
      for (const int32_t j : keep) {
        const float s = scores[static_cast<size_t>(j)];
        const float want = std::isinf(s) ? 0.0f : cpu::softmax_exp(s - m);
        kept[static_cast<size_t>(j)] = true;
        EXPECT_EQ(0, std::memcmp(&w[static_cast<size_t>(j)], &want, sizeof want)) << "n " << n << " place " << j;
        want_sum += want;
      }
      for (size_t j = 0; j < w.size(); ++j) {
        if (!kept[j]) {
          EXPECT_EQ(0, std::memcmp(&w[j], &scores[j], sizeof(float))) << "n " << n << " place " << j << " written";
        }
      }
      EXPECT_NEAR(sum, want_sum, 1e-6 * std::max(1.0, want_sum)) << "n " << n << (gaps ? " with gaps" : "");
    }
  }
}

TEST(CpuRope, MatchesReferenceForBothPairings) {
  std::mt19937 rng(5);
  for (RopeType type : {RopeType::kNorm, RopeType::kNeox}) {
    ref::RopeParams p;
    p.head_dim = 64;
    p.n_rot = 64;
    p.type = type;
    p.base = 1e6f;
    const int n_heads = 3, n_tokens = 5;
    std::vector<int32_t> pos{0, 1, 17, 1000, 32767};
    auto x = random_vec(static_cast<size_t>(n_tokens) * n_heads * 64, rng);
    auto expected = x;
    for (int t = 0; t < n_tokens; ++t) ref::rope_ref(expected.data() + t * n_heads * 64, n_heads, pos[static_cast<size_t>(t)], p);
    cpu::RopeTable table;
    table.build(p, pos.data(), n_tokens);
    ThreadPool pool(2);
    cpu::rope(pool, x.data(), n_heads * 64, n_tokens, n_heads, p, table);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], expected[i], 2e-6) << "index " << i;
  }
}

TEST(CpuRope, KnownRotation) {
  // Position 1, head_dim 4, base 10000, norm pairing: pair 0 turns by 1 rad,
  // pair 1 by 10000^(-1/2) = 0.01 rad.
  ref::RopeParams p;
  p.head_dim = 4;
  p.n_rot = 4;
  float x[4] = {1.0f, 0.0f, 1.0f, 0.0f};
  ref::rope_ref(x, 1, 1, p);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-7);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-7);
  EXPECT_NEAR(x[2], std::cos(0.01), 1e-7);
  EXPECT_NEAR(x[3], std::sin(0.01), 1e-7);
}

TEST(CpuRmsNorm, KnownValues) {
  // x = [3, 4]: mean square 12.5, scale 1/sqrt(12.5) = 0.28284
  const float x[2] = {3.0f, 4.0f}, w[2] = {1.0f, 2.0f};
  float y[2];
  ref::rms_norm_ref(x, w, y, 2, 0.0f);
  EXPECT_NEAR(y[0], 0.8485281f, 1e-6);
  EXPECT_NEAR(y[1], 2.2627417f, 1e-6);
}

struct MatmulCase {
  DType type;
  double tol;  // max |error| relative to max |reference|; activations quantized to the dot format
};

class CpuMatmul : public testing::TestWithParam<MatmulCase> {};

TEST_P(CpuMatmul, MatchesReferenceAcrossTileEdges) {
  const MatmulCase c = GetParam();
  std::mt19937 rng(11);
  const int64_t k = 512, n_out = 150;  // 150: not a multiple of any tile
  auto wf = random_vec(static_cast<size_t>(k * n_out), rng, 0.05f);
  const uint64_t row_bytes = row_size(c.type, k);
  std::vector<uint8_t> wq(row_bytes * n_out);
  for (int64_t r = 0; r < n_out; ++r) quant::quantize_row(c.type, wf.data() + r * k, wq.data() + r * row_bytes, k);
  Weight w;
  w.name = "w";
  w.type = c.type;
  w.n_in = k;
  w.n_out = n_out;
  w.data = wq.data();
  w.row_bytes = row_bytes;
  auto bias_v = random_vec(static_cast<size_t>(n_out), rng);
  Weight bias;
  bias.type = DType::kF32;
  bias.n_in = n_out;
  bias.n_out = 1;
  bias.data = reinterpret_cast<const uint8_t*>(bias_v.data());
  ThreadPool pool(2);
  for (int n_rows : {1, 3, 70}) {
    auto x = random_vec(static_cast<size_t>(n_rows * k), rng);
    const DType act = quant::vec_dot_type(c.type);
    const size_t stride = act == DType::kF32 ? k * sizeof(float) : row_size(act, k);
    std::vector<uint8_t> xq;
    const void* xp = x.data();
    if (act != DType::kF32) {
      xq.resize(stride * n_rows);
      cpu::quantize_rows(pool, act, x.data(), k, n_rows, k, xq.data(), stride);
      xp = xq.data();
    }
    std::vector<float> y(static_cast<size_t>(n_rows * n_out), NAN), e(static_cast<size_t>(n_out));
    cpu::matmul(pool, w, &bias, xp, stride, n_rows, y.data(), n_out);
    for (int t = 0; t < n_rows; ++t) {
      ref::matmul_ref(w, &bias, x.data() + t * k, e.data());
      double max_ref = 0, max_err = 0;
      for (int64_t r = 0; r < n_out; ++r) {
        max_ref = std::max(max_ref, std::abs(static_cast<double>(e[static_cast<size_t>(r)])));
        max_err = std::max(max_err, std::abs(static_cast<double>(y[static_cast<size_t>(t * n_out + r)] - e[static_cast<size_t>(r)])));
      }
      EXPECT_LE(max_err / max_ref, c.tol) << dtype_name(c.type) << " rows " << n_rows << " token " << t;
    }
  }
}

// F32/F16/BF16 use f32 activations: f32 rounding only. Q8_0/Q8_1 activations
// lose ~0.4% per element (1/127 of the block max); Q8_K similar.
INSTANTIATE_TEST_SUITE_P(Types, CpuMatmul,
                         testing::Values(MatmulCase{DType::kF32, 1e-5}, MatmulCase{DType::kF16, 1e-5},
                                         MatmulCase{DType::kBF16, 1e-5}, MatmulCase{DType::kQ8_0, 1e-2},
                                         MatmulCase{DType::kQ4_0, 1e-2}, MatmulCase{DType::kQ4_1, 1e-2},
                                         MatmulCase{DType::kQ5_0, 1e-2}, MatmulCase{DType::kQ5_1, 1e-2},
                                         MatmulCase{DType::kQ4_K, 1e-2}, MatmulCase{DType::kQ5_K, 1e-2},
                                         MatmulCase{DType::kQ6_K, 1e-2}),
                         [](const testing::TestParamInfo<MatmulCase>& i) { return std::string(dtype_name(i.param.type)); });

}  // namespace
}  // namespace minfer

namespace minfer {
namespace {

// The shipped model on a CPU backend of one thread (a test fails on error).
struct StoriesOnCpu {
  std::unique_ptr<gguf::File> file;
  std::optional<ModelConfig> config;
  std::unique_ptr<ModelWeights> weights;
  CpuBackend backend;
  void load(int n_ctx, int max_tokens) {
    auto f = gguf::File::open(test::stories_path());
    ASSERT_TRUE(f.has_value());
    file = std::move(*f);
    auto c = ModelConfig::from_gguf(*file);
    ASSERT_TRUE(c.has_value());
    config = *c;
    auto w = ModelWeights::from_gguf(*file, *config);
    ASSERT_TRUE(w.has_value());
    weights = std::move(*w);
    BackendOptions o;
    o.n_ctx = n_ctx;
    o.max_tokens = max_tokens;
    o.n_threads = 1;
    ASSERT_TRUE(backend.prepare(*config, *weights, o).has_value());
  }
};

// The error contract: an op the backend does not implement is an error that
// names the op, the node and the backend — never a silent detour.
TEST(CpuBackendErrors, UnsupportedOpNamesTheNode) {
  StoriesOnCpu m;
  ASSERT_NO_FATAL_FAILURE(m.load(16, 4));
  const ModelConfig* config = &*m.config;
  const ModelWeights* weights = m.weights.get();
  CpuBackend& backend = m.backend;
  GraphOptions go;
  go.fuse_qkv = true;  // kQkvTail: the CPU runs the unfused chain only
  const Graph g = build_decoder_graph(*config, *weights, go);
  const int32_t token = 1, pos = 0, cell = 0;
  StepInput in;
  in.n_tokens = 1;
  in.tokens = &token;
  in.positions = &pos;
  in.kv_cells = &cell;
  in.seq_cells = &cell;
  in.n_seq_cells = 1;
  StepOutput out;
  const Status st = backend.run(g, in, &out);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(st.error().message.find("blk.0.qkv_tail"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("cpu backend"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace minfer

namespace minfer {
namespace {

// Steps in flight through the backend's default submit/collect (the CPU
// runs each inside submit) and the runner's decode calls: a fed step gives
// what the host-fed one gives, and misuse is a clear error that changes
// nothing.
TEST(BackendSteps, FedStepsAndMisuseAreClear) {
  StoriesOnCpu m;
  ASSERT_NO_FATAL_FAILURE(m.load(32, 8));
  CpuBackend& backend = m.backend;
  Runner r(*m.config, *m.weights, backend, 32, 8, FusionOptions{false, false});
  StepOutput out;
  // Nothing in flight to collect; nothing submitted before to feed from.
  Status st = backend.collect(&out);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("no step in flight"), std::string::npos) << st.error().message;
  Sequence seq;
  st = r.submit_decode(seq, std::nullopt, true);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(seq.cells.empty()) << "a refused step takes no cell";
  st = r.submit_decode(seq, std::nullopt, false);  // fed steps are greedy
  ASSERT_FALSE(st.has_value());
  // Host-fed, then fed from the device argmax: the same tokens as eval.
  const std::vector<int32_t> prompt{1, 403, 407};
  ASSERT_TRUE(r.eval(seq, prompt, Logits::kLast, true, &out).has_value());
  std::vector<int32_t> fed{out.argmax.at(0)};
  ASSERT_TRUE(r.submit_decode(seq, fed.back(), true).has_value());
  ASSERT_TRUE(r.submit_decode(seq, std::nullopt, true).has_value());
  EXPECT_EQ(backend.in_flight(), 2);
  // A third would pass the backend's two, and eval refuses to run behind them.
  st = r.submit_decode(seq, std::nullopt, true);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("in flight"), std::string::npos) << st.error().message;
  st = r.eval(seq, prompt, Logits::kLast, true, &out);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("in flight"), std::string::npos) << st.error().message;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(r.collect_decode(seq, &out).has_value());
    fed.push_back(out.argmax.at(0));
  }
  EXPECT_EQ(seq.tokens, (std::vector<int32_t>{1, 403, 407, fed[0], fed[1]}));
  EXPECT_EQ(seq.cells.size(), seq.tokens.size());
  // The same three tokens host-fed, from scratch.
  Sequence again;
  ASSERT_TRUE(r.eval(again, prompt, Logits::kLast, true, &out).has_value());
  std::vector<int32_t> host{out.argmax.at(0)};
  for (int i = 0; i < 2; ++i) {
    const int32_t t = host.back();
    ASSERT_TRUE(r.eval(again, std::span(&t, 1), Logits::kLast, true, &out).has_value());
    host.push_back(out.argmax.at(0));
  }
  EXPECT_EQ(fed, host);
  // A drained step gives its cell back and leaves the tokens as they were.
  ASSERT_TRUE(r.submit_decode(again, host.back(), true).has_value());
  EXPECT_EQ(again.cells.size(), again.tokens.size() + 1);
  ASSERT_TRUE(r.drain(again).has_value());
  EXPECT_EQ(again.cells.size(), again.tokens.size());
  EXPECT_EQ(r.in_flight(), 0);
}

// A decode step's logits fetched after it (Backend::fetch_logits, for a
// constrained pick its list did not settle) are the logits the same step
// hands back when asked; fetching with a step in flight, or after a step
// that computed none, is refused. StepInput::score_from outside a scoring
// step's rows is refused by the backend and the runner with its value.
TEST(BackendSteps, FetchedLogitsAndScoreFromMisuse) {
  StoriesOnCpu m;
  ASSERT_NO_FATAL_FAILURE(m.load(32, 8));
  CpuBackend& backend = m.backend;
  Runner r(*m.config, *m.weights, backend, 32, 8, FusionOptions{false, false});
  StepOutput out;
  Status st = r.fetch_logits(&out);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("left no logits"), std::string::npos) << st.error().message;
  const std::vector<int32_t> prompt{1, 403, 407};
  Sequence picked, plain;
  ASSERT_TRUE(r.eval(plain, prompt, Logits::kLast, false, &out).has_value());
  ASSERT_TRUE(r.eval(picked, prompt, Logits::kLast, true, &out).has_value());
  ASSERT_TRUE(r.submit_decode(picked, 261, true).has_value());
  ASSERT_TRUE(r.submit_decode(picked, std::nullopt, true).has_value());
  st = r.fetch_logits(&out);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("in flight"), std::string::npos) << st.error().message;
  ASSERT_TRUE(r.collect_decode(picked, &out).has_value());
  ASSERT_TRUE(r.collect_decode(picked, &out).has_value());
  ASSERT_TRUE(out.logits.empty());  // a step that picks hands back its pick
  ASSERT_TRUE(r.fetch_logits(&out).has_value());
  const std::vector<float> fetched = out.logits;
  // The same two tokens evaluated with their logits handed back.
  const int32_t both[2] = {261, picked.tokens.back()};
  ASSERT_TRUE(r.eval(plain, std::span(both, 1), Logits::kLast, false, &out).has_value());
  ASSERT_TRUE(r.eval(plain, std::span(both + 1, 1), Logits::kLast, false, &out).has_value());
  EXPECT_EQ(fetched, out.logits);
  // A step of context alone computes no logits.
  Sequence scored;
  ASSERT_TRUE(r.eval(scored, prompt, Logits::kNone, false, &out).has_value());
  st = r.fetch_logits(&out);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("left no logits"), std::string::npos) << st.error().message;

  st = r.eval(scored, prompt, Logits::kScore, false, &out, {}, 0, 3);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("score_from 3 in an evaluation of 3 tokens"), std::string::npos) << st.error().message;
  st = r.eval(scored, prompt, Logits::kLast, false, &out, {}, 0, 1);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("score_from 1 in an evaluation of 3 tokens unscored"), std::string::npos)
      << st.error().message;
  const int32_t pos[3] = {3, 4, 5}, cells[3] = {3, 4, 5}, seq_cells[6] = {0, 1, 2, 3, 4, 5};
  StepInput in;
  in.n_tokens = 3;
  in.tokens = prompt.data();
  in.positions = pos;
  in.kv_cells = cells;
  in.seq_cells = seq_cells;
  in.n_seq_cells = 6;
  in.score_from = 1;
  GraphOptions go;  // Logits::kLast: not a scoring step
  st = backend.run(build_decoder_graph(*m.config, *m.weights, go), in, &out);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("cpu backend: score_from 1 in a step of 3 tokens (allowed 0)"), std::string::npos)
      << st.error().message;
  go.logits = Logits::kScore;
  in.score_from = 3;
  st = backend.run(build_decoder_graph(*m.config, *m.weights, go), in, &out);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("cpu backend: score_from 3 in a scoring step of 3 tokens (allowed 0..2)"),
            std::string::npos)
      << st.error().message;
}

}  // namespace
}  // namespace minfer

namespace minfer {
namespace {

// After a GPU upload the engine drops the mapped weights' pages; the data must
// stay readable (the kernel re-reads it from the file) and byte-identical.
TEST(GgufRelease, TensorPagesAreDroppedAndStillReadable) {
  auto file = gguf::File::open(test::stories_path());
  ASSERT_TRUE(file.has_value());
  const gguf::TensorInfo* t = (*file)->find_tensor("output.weight");
  ASSERT_NE(t, nullptr);
  const std::vector<uint8_t> before(t->data, t->data + t->size_bytes);
  // Whole pages from the first page boundary after the data section's start
  // (14176 → 16384) to the end of the 1,185,376-byte file.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = (14176 + page - 1) / page * page;
  EXPECT_EQ((*file)->release_tensor_pages(), 1185376 - start);
  EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->size_bytes), before);
}

}  // namespace
}  // namespace minfer

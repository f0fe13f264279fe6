// The CPU engine's forward pass against a plain float64 forward pass written
// here from the model definition (naive loops, no SIMD, no threads, no KV
// cache, nothing shared with the engine but the GGUF reader and the weight
// dequantizers, which have their own tests).
//
// Bar: every logit within 1e-3 of the reference, relative to the row's
// largest |logit|, for F32/F16/BF16 weights with an f32 KV cache, on both the
// prefill path (matrix products over the prompt) and the decode path (one
// token per step). Quantized weights also quantize the activations (Q8), as
// llama.cpp does, and an f16 cache rounds K/V: those get the looser bounds
// stated where they are checked.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/api.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/quant/quant.h"
#include "engine/sampling/logprobs.h"
#include "engine/scheduler/runner.h"
#include "tests/engine/test_models.h"

namespace minfer {
namespace {

using Mat = std::vector<double>;  // row-major [rows][cols]

struct RefLayer {
  Mat attn_norm, wq, wk, wv, bq, bk, bv, q_norm, k_norm, wo, ffn_norm, w_gate, w_up, w_down;
};

// The model, read straight from the file's metadata and tensors.
struct RefModel {
  std::string arch;
  int n_layers = 0, d = 0, n_heads = 0, n_kv = 0, hd = 0, d_ff = 0, vocab = 0;
  double eps = 1e-5, rope_base = 10000.0;
  bool neox = false;
  Mat rope_freqs;  // llama3-style frequency divisors, when the file has them
  Mat embd, out_norm, out;
  std::vector<RefLayer> layers;
};

Mat read_tensor(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return {};
  const int64_t cols = static_cast<int64_t>(t->ne[0]);
  const int64_t rows = static_cast<int64_t>(t->n_elements()) / cols;
  const uint64_t row_bytes = row_size(t->type, static_cast<uint64_t>(cols));
  std::vector<float> row(static_cast<size_t>(cols));
  Mat m(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    quant::dequantize_row(t->type, t->data + r * row_bytes, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) m[static_cast<size_t>(r * cols + c)] = row[static_cast<size_t>(c)];
  }
  return m;
}

RefModel load_ref(const gguf::File& f) {
  RefModel m;
  m.arch = *f.get_string("general.architecture");
  const std::string a = m.arch + ".";
  m.n_layers = static_cast<int>(*f.get_u64(a + "block_count"));
  m.d = static_cast<int>(*f.get_u64(a + "embedding_length"));
  m.n_heads = static_cast<int>(*f.get_u64(a + "attention.head_count"));
  m.n_kv = static_cast<int>(*f.get_u64(a + "attention.head_count_kv"));
  m.hd = f.has(a + "attention.key_length") ? static_cast<int>(*f.get_u64(a + "attention.key_length")) : m.d / m.n_heads;
  m.d_ff = static_cast<int>(*f.get_u64(a + "feed_forward_length"));
  m.eps = *f.get_f64(a + "attention.layer_norm_rms_epsilon");
  if (f.has(a + "rope.freq_base")) m.rope_base = *f.get_f64(a + "rope.freq_base");
  m.neox = m.arch != "llama";
  m.rope_freqs = read_tensor(f, "rope_freqs.weight");
  m.embd = read_tensor(f, "token_embd.weight");
  m.vocab = static_cast<int>(m.embd.size() / static_cast<size_t>(m.d));
  m.out_norm = read_tensor(f, "output_norm.weight");
  m.out = f.find_tensor("output.weight") ? read_tensor(f, "output.weight") : m.embd;
  for (int i = 0; i < m.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    RefLayer l;
    l.attn_norm = read_tensor(f, p + "attn_norm.weight");
    l.wq = read_tensor(f, p + "attn_q.weight");
    l.wk = read_tensor(f, p + "attn_k.weight");
    l.wv = read_tensor(f, p + "attn_v.weight");
    l.bq = read_tensor(f, p + "attn_q.bias");
    l.bk = read_tensor(f, p + "attn_k.bias");
    l.bv = read_tensor(f, p + "attn_v.bias");
    l.q_norm = read_tensor(f, p + "attn_q_norm.weight");
    l.k_norm = read_tensor(f, p + "attn_k_norm.weight");
    l.wo = read_tensor(f, p + "attn_output.weight");
    l.ffn_norm = read_tensor(f, p + "ffn_norm.weight");
    l.w_gate = read_tensor(f, p + "ffn_gate.weight");
    l.w_up = read_tensor(f, p + "ffn_up.weight");
    l.w_down = read_tensor(f, p + "ffn_down.weight");
    m.layers.push_back(std::move(l));
  }
  return m;
}

std::vector<double> matvec(const Mat& w, const std::vector<double>& x, const Mat& bias) {
  const size_t cols = x.size(), rows = w.size() / cols;
  std::vector<double> y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double s = bias.empty() ? 0.0 : bias[r];
    for (size_t c = 0; c < cols; ++c) s += w[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const double* w, size_t n, double eps) {
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double s = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  std::vector<double> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * s * w[i];
  return y;
}

void rope(double* head, int hd, int pos, double base, bool neox, const Mat& freqs) {
  for (int i = 0; i < hd / 2; ++i) {
    double theta = pos * std::pow(base, -2.0 * i / hd);
    if (!freqs.empty()) theta /= freqs[static_cast<size_t>(i)];
    const int a = neox ? i : 2 * i, b = neox ? i + hd / 2 : 2 * i + 1;
    const double x0 = head[a], x1 = head[b];
    head[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
    head[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
  }
}

// Logits of every position of `tokens`, [n][vocab].
std::vector<std::vector<double>> ref_forward(const RefModel& m, const std::vector<int32_t>& tokens) {
  const size_t n = tokens.size();
  std::vector<std::vector<double>> x(n);
  for (size_t t = 0; t < n; ++t) x[t].assign(m.embd.begin() + tokens[t] * m.d, m.embd.begin() + (tokens[t] + 1) * m.d);
  for (const RefLayer& l : m.layers) {
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      const auto xn = rmsnorm(x[t], l.attn_norm.data(), static_cast<size_t>(m.d), m.eps);
      q[t] = matvec(l.wq, xn, l.bq);
      k[t] = matvec(l.wk, xn, l.bk);
      v[t] = matvec(l.wv, xn, l.bv);
      for (int h = 0; h < m.n_heads; ++h) {
        double* qh = q[t].data() + h * m.hd;
        if (!l.q_norm.empty()) {
          auto nq = rmsnorm(std::vector<double>(qh, qh + m.hd), l.q_norm.data(), static_cast<size_t>(m.hd), m.eps);
          std::copy(nq.begin(), nq.end(), qh);
        }
        rope(qh, m.hd, static_cast<int>(t), m.rope_base, m.neox, m.rope_freqs);
      }
      for (int h = 0; h < m.n_kv; ++h) {
        double* kh = k[t].data() + h * m.hd;
        if (!l.k_norm.empty()) {
          auto nk = rmsnorm(std::vector<double>(kh, kh + m.hd), l.k_norm.data(), static_cast<size_t>(m.hd), m.eps);
          std::copy(nk.begin(), nk.end(), kh);
        }
        rope(kh, m.hd, static_cast<int>(t), m.rope_base, m.neox, m.rope_freqs);
      }
    }
    const int group = m.n_heads / m.n_kv;
    for (size_t t = 0; t < n; ++t) {
      std::vector<double> att(static_cast<size_t>(m.n_heads * m.hd), 0.0);
      for (int h = 0; h < m.n_heads; ++h) {
        const int g = h / group;
        std::vector<double> s(t + 1);
        double mx = -1e300;
        for (size_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (int i = 0; i < m.hd; ++i) dot += q[t][h * m.hd + i] * k[j][g * m.hd + i];
          s[j] = dot / std::sqrt(static_cast<double>(m.hd));
          mx = std::max(mx, s[j]);
        }
        double den = 0.0;
        for (double& e : s) den += (e = std::exp(e - mx));
        for (size_t j = 0; j <= t; ++j) {
          for (int i = 0; i < m.hd; ++i) att[h * m.hd + i] += s[j] / den * v[j][g * m.hd + i];
        }
      }
      const auto o = matvec(l.wo, att, {});
      for (int i = 0; i < m.d; ++i) x[t][i] += o[i];
      const auto xn = rmsnorm(x[t], l.ffn_norm.data(), static_cast<size_t>(m.d), m.eps);
      auto gate = matvec(l.w_gate, xn, {});
      const auto up = matvec(l.w_up, xn, {});
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const auto down = matvec(l.w_down, gate, {});
      for (int i = 0; i < m.d; ++i) x[t][i] += down[i];
    }
  }
  std::vector<std::vector<double>> logits(n);
  for (size_t t = 0; t < n; ++t) {
    logits[t] = matvec(m.out, rmsnorm(x[t], m.out_norm.data(), static_cast<size_t>(m.d), m.eps), {});
  }
  return logits;
}

// Largest |a - b| over the row, relative to the row's largest |b|.
double row_error(const float* a, const std::vector<double>& b) {
  double max_ref = 0.0, max_err = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(b[i]));
    max_err = std::max(max_err, std::abs(a[i] - b[i]));
  }
  return max_err / max_ref;
}

struct Case {
  std::string preset, type, kv;
  double tol_prefill, tol_decode;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string s = info.param.preset + "_" + info.param.type + "_" + info.param.kv;
  for (char& c : s) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// A model file on the CPU backend, for runner-level checks: 64 cells, steps
// of at most 8 tokens, two threads.
struct CpuRunnerModel {
  std::unique_ptr<ModelConfig> config;
  std::unique_ptr<ModelWeights> weights;
  CpuBackend backend;

  // Fails the calling test (and returns false) on error.
  bool load(const gguf::File& file, const std::string& kv) {
    auto c = ModelConfig::from_gguf(file);
    EXPECT_TRUE(c.has_value());
    if (!c) return false;
    config = std::make_unique<ModelConfig>(*c);
    auto w = ModelWeights::from_gguf(file, *config);
    EXPECT_TRUE(w.has_value());
    if (!w) return false;
    weights = std::move(*w);
    BackendOptions bo;
    bo.n_ctx = 64;
    bo.max_tokens = 8;
    bo.kv_type = *dtype_from_name(kv);
    bo.n_threads = 2;
    const Status st = backend.prepare(*config, *weights, bo);
    EXPECT_TRUE(st.has_value()) << st.error().message;
    return st.has_value();
  }
  Runner runner() { return Runner(*config, *weights, backend, 64, 8, FusionOptions{}); }
};

class ForwardReference : public testing::TestWithParam<Case> {};

TEST_P(ForwardReference, LogitsMatchFloat64Reference) {
  const Case& c = GetParam();
  const std::string path = test::synth_model(c.preset, c.type, 2, 512);
  ASSERT_FALSE(path.empty());
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.has_value()) << file.error().message;
  const RefModel ref = load_ref(**file);

  std::mt19937 rng(123);
  std::vector<int32_t> tokens(24);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(ref.vocab));
  const auto expected = ref_forward(ref, tokens);

  // Prefill path: the whole prompt in one step, every row's logits.
  EngineConfig ec;
  ec.model_path = path;
  ec.backend = BackendChoice::kCpu;
  ec.n_ctx = 64;
  ec.kv_type = c.kv;
  ec.n_threads = 2;
  auto engine = Engine::load(ec);
  ASSERT_TRUE(engine.has_value()) << engine.error().message;
  auto logits = (*engine)->eval_logits(tokens);
  ASSERT_TRUE(logits.has_value()) << logits.error().message;
  ASSERT_EQ(logits->size(), tokens.size() * static_cast<size_t>(ref.vocab));
  for (size_t t = 0; t < tokens.size(); ++t) {
    const double err = row_error(logits->data() + t * static_cast<size_t>(ref.vocab), expected[t]);
    EXPECT_LE(err, c.tol_prefill) << "prefill, token " << t;
  }

  // Decode path: one token per step through the runner, last-row logits.
  CpuRunnerModel model;
  ASSERT_TRUE(model.load(**file, c.kv));
  Runner runner = model.runner();
  Sequence seq;
  StepOutput out;
  for (size_t t = 0; t < tokens.size(); ++t) {
    ASSERT_TRUE(runner.eval(seq, std::span(&tokens[t], 1), Logits::kLast, false, &out).has_value());
    ASSERT_EQ(out.rows, 1);
    EXPECT_LE(row_error(out.logits.data(), expected[t]), c.tol_decode) << "decode, token " << t;
  }
}

// A scoring evaluation (Logits::kScore) through the runner: 20 tokens in
// steps of 8, each step's row t scored against the token after it — the
// next step's first for a step's last row, none (-1, a NaN logit) for the
// prompt's last — with the host's arithmetic on the rows Logits::kAll hands
// back (step_logprobs_raw: the same bits on the CPU), and the step's last
// row's logits handed back as with Logits::kLast. An argmax with it is
// refused.
TEST(RunnerScoring, EachRowIsScoredAgainstTheTokenAfterIt) {
  const std::string path = test::synth_model("qwen2.5-0.5b", "q8_0", 2, 512);
  ASSERT_FALSE(path.empty());
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.has_value()) << file.error().message;
  CpuRunnerModel model;
  ASSERT_TRUE(model.load(**file, "f32"));
  std::mt19937 rng(5);
  std::vector<int32_t> tokens(20);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 512u);
  const int vocab = model.config->vocab_size;

  Runner runner = model.runner();
  std::vector<std::vector<float>> rows;  // every row's logits, Logits::kAll
  {
    Sequence seq;
    StepOutput out;
    auto keep = [&]() -> Status {
      for (int r = 0; r < out.rows; ++r) {
        rows.emplace_back(out.logits.begin() + static_cast<ptrdiff_t>(r) * vocab,
                          out.logits.begin() + static_cast<ptrdiff_t>(r + 1) * vocab);
      }
      return ok_status();
    };
    ASSERT_TRUE(runner.eval(seq, tokens, Logits::kAll, false, &out, keep).has_value());
  }
  ASSERT_EQ(rows.size(), tokens.size());
  Sequence seq;
  StepOutput out;
  std::vector<kernels::LogprobsOut> scored;
  std::vector<int> step_rows;
  auto keep = [&]() -> Status {
    step_rows.push_back(static_cast<int>(out.row_logprobs.size()));
    EXPECT_EQ(out.rows, 1);
    EXPECT_EQ(out.logits, rows[scored.size() + out.row_logprobs.size() - 1]) << "the step's last row's logits";
    scored.insert(scored.end(), out.row_logprobs.begin(), out.row_logprobs.end());
    return ok_status();
  };
  ASSERT_TRUE(runner.eval(seq, tokens, Logits::kScore, false, &out, keep).has_value());
  EXPECT_EQ(step_rows, (std::vector<int>{8, 8, 4}));
  ASSERT_EQ(scored.size(), tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t) {
    SCOPED_TRACE(testing::Message() << "row " << t);
    const int32_t next = t + 1 < tokens.size() ? tokens[t + 1] : -1;
    const kernels::LogprobsOut want = step_logprobs_raw(rows[t], next);
    const kernels::LogprobsOut& got = scored[t];
    EXPECT_EQ(got.chosen, next);
    EXPECT_EQ(got.log_z, want.log_z);
    if (next < 0) {
      EXPECT_TRUE(std::isnan(got.chosen_logit));
    } else {
      EXPECT_EQ(got.chosen_logit, rows[t][static_cast<size_t>(next)]);
    }
    ASSERT_EQ(got.n_top, kernels::kLogprobsTop);
    for (int i = 0; i < got.n_top; ++i) {
      EXPECT_EQ(got.top[i], want.top[i]);
      EXPECT_EQ(got.top_logit[i], want.top_logit[i]);
    }
  }
  Sequence other;
  const Status refused = runner.eval(other, tokens, Logits::kScore, true, &out);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("a scored evaluation hands back logits, not an argmax"), std::string::npos);
  EXPECT_TRUE(other.tokens.empty());
}

// Tolerances: F32/F16/BF16 weights keep f32 activations: the bar, 1e-3 (seen
// ~1e-6). An f16 cache rounds K and V (2^-11 relative): 5e-3. Q8_0 weights
// dot with Q8_0 activations and K-quants with Q8_K (~0.5% per product): 5e-2.
INSTANTIATE_TEST_SUITE_P(
    Cpu, ForwardReference,
    testing::Values(Case{"qwen2.5-0.5b", "f32", "f32", 1e-3, 1e-3}, Case{"qwen2.5-0.5b", "f16", "f32", 1e-3, 1e-3},
                    Case{"qwen2.5-0.5b", "bf16", "f32", 1e-3, 1e-3}, Case{"qwen3-0.6b", "f32", "f32", 1e-3, 1e-3},
                    Case{"qwen3-0.6b", "f16", "f32", 1e-3, 1e-3}, Case{"llama-3.2-1b", "f16", "f32", 1e-3, 1e-3},
                    Case{"qwen2.5-0.5b", "f32", "f16", 5e-3, 5e-3}, Case{"qwen2.5-0.5b", "q8_0", "f32", 5e-2, 5e-2},
                    Case{"qwen3-0.6b", "q4_k_m", "f16", 5e-2, 5e-2}),
    case_name);

}  // namespace
}  // namespace minfer

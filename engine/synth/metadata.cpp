// Key names and order follow convert_hf_to_gguf.py: TextModel
// .set_gguf_parameters writes block_count, context_length, embedding_length,
// feed_forward_length, head_count, head_count_kv, rope.freq_base,
// layer_norm_rms_epsilon, key_length/value_length (only when config.json
// has head_dim) and general.file_type; LlamaModel adds vocab_size and
// rope.dimension_count. general.alignment is left out (the default, 32).
#include "engine/synth/metadata.h"

#include <fmt/format.h>

#include <cmath>

namespace minfer::synth {
namespace {

constexpr uint32_t kQuantVersion = 2;  // GGML_QNT_VERSION

}  // namespace

Status write_model_metadata(const ModelPlan& plan, uint64_t seed, gguf::Writer& w) {
  using gguf::Value;
  const Preset& p = plan.preset;
  const std::string a = p.arch + ".";
  auto u32 = [](int v) { return Value::u32(static_cast<uint32_t>(v)); };
  MINFER_TRY(w.set("general.architecture", Value::string(p.arch)));
  MINFER_TRY(w.set("general.type", Value::string("model")));
  MINFER_TRY(w.set("general.name", Value::string(fmt::format("{} synthetic (seed {})", p.name, seed))));
  MINFER_TRY(w.set(a + "block_count", u32(p.n_layers)));
  MINFER_TRY(w.set(a + "context_length", u32(p.n_ctx)));
  MINFER_TRY(w.set(a + "embedding_length", u32(p.d_model)));
  MINFER_TRY(w.set(a + "feed_forward_length", u32(p.d_ff)));
  MINFER_TRY(w.set(a + "attention.head_count", u32(p.n_heads)));
  MINFER_TRY(w.set(a + "attention.head_count_kv", u32(p.n_kv_heads)));
  MINFER_TRY(w.set(a + "rope.freq_base", Value::f32(p.rope_base)));
  MINFER_TRY(w.set(a + "attention.layer_norm_rms_epsilon", Value::f32(p.rms_eps)));
  if (p.head_dim_in_config) {
    MINFER_TRY(w.set(a + "attention.key_length", u32(p.head_dim)));
    MINFER_TRY(w.set(a + "attention.value_length", u32(p.head_dim)));
  }
  MINFER_TRY(w.set("general.file_type", Value::u32(plan.file_type)));
  if (p.arch == "llama") {
    MINFER_TRY(w.set(a + "vocab_size", u32(p.vocab_size)));
    MINFER_TRY(w.set(a + "rope.dimension_count", u32(p.head_dim)));
  }
  MINFER_TRY(w.set("general.quantization_version", Value::u32(kQuantVersion)));
  return ok_status();
}

std::vector<float> llama3_rope_factors(const Preset& p) {
  // Wavelengths shorter than original_ctx / high_freq_factor keep their
  // frequency, longer than original_ctx / low_freq_factor are slowed by
  // `factor`, and the band between is interpolated. std::pow is the one
  // libm call in synth; it can differ in the last bit between C libraries,
  // which reaches a stored float only in the rare case of a tie.
  const double base = p.rope_base;
  const int dim = p.head_dim;
  const double factor = p.llama3_rope_factor;
  const double low = p.llama3_low_freq_factor;
  const double high = p.llama3_high_freq_factor;
  const double old_ctx = p.llama3_original_ctx;
  const double low_freq_wavelen = old_ctx / low;
  const double high_freq_wavelen = old_ctx / high;
  constexpr double kPi = 3.14159265358979323846;
  std::vector<float> out;
  for (int i = 0; i < dim; i += 2) {
    // The converter computes freqs in float32 (torch.arange(..., float32)).
    const float freq = static_cast<float>(1.0 / std::pow(base, static_cast<float>(i) / static_cast<float>(dim)));
    const double wavelen = 2.0 * kPi / freq;
    double f;
    if (wavelen < high_freq_wavelen) {
      f = 1.0;
    } else if (wavelen > low_freq_wavelen) {
      f = factor;
    } else {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      f = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

}  // namespace minfer::synth

// plan_model and write_model: preset + options -> tensor plan -> GGUF file.
// The metadata comes first (general, architecture, tokenizer, as the
// converter orders it), then the tensors, each generated while it is
// written, so memory stays at about one tensor (the largest, token_embd, is
// ~0.6 GB for Qwen2.5-7B at Q8_0) however large the model.
#include "engine/synth/synth.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "engine/gguf/gguf.h"
#include "engine/synth/layout.h"
#include "engine/synth/metadata.h"
#include "engine/synth/normal_rng.h"
#include "engine/synth/recipe.h"
#include "engine/synth/spm_vocab.h"
#include "engine/synth/tensor_fill.h"
#include "engine/tokenizer/hf_import.h"

namespace minfer::synth {
namespace {

int thread_count(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

Expected<ModelPlan> plan_model(const Options& options, int vocab_rows) {
  ModelPlan plan;
  plan.preset = options.preset;
  if (options.layers > 0) plan.preset.n_layers = options.layers;
  if (vocab_rows > 0) {
    plan.preset.vocab_size = vocab_rows;
  } else if (options.vocab > 0) {
    plan.preset.vocab_size = options.vocab;
  }
  MINFER_TRY(check_preset(plan.preset));
  MINFER_ASSIGN_OR_RETURN(const TypeSpec spec, parse_type_spec(options.type));
  plan.tensors = model_layout(plan.preset);
  MINFER_TRY(assign_types(spec, plan.preset.n_layers, plan.tensors));
  plan.file_type = llama_file_type(spec);
  return plan;
}

Expected<uint64_t> write_model(const Options& options) {
  if (options.output_path.empty()) return Error(ErrorCode::kInvalidArgument, "synth: no output path");

  // The tokenizer decides the embedding rows (a Hugging Face vocabulary is
  // padded up to the preset's size, never cut), so it is read first, into a
  // scratch writer, and copied after the model keys.
  gguf::Writer vocab_keys;
  int vocab_rows = -1;
  if (!options.tokenizer_json.empty()) {
    const int pad_to = options.vocab > 0 ? options.vocab : options.preset.vocab_size;
    MINFER_ASSIGN_OR_RETURN(const HfImportResult imported,
                            import_hf_tokenizer(options.tokenizer_json, pad_to, vocab_keys));
    vocab_rows = imported.n_tokens;
  }
  MINFER_ASSIGN_OR_RETURN(const ModelPlan plan, plan_model(options, vocab_rows));
  if (options.tokenizer_json.empty()) {
    MINFER_ASSIGN_OR_RETURN(const SpmVocab vocab, synthetic_spm_vocab(plan.preset.vocab_size));
    MINFER_TRY(write_spm_vocab(vocab, vocab_keys));
  }

  gguf::Writer w;
  MINFER_TRY(write_model_metadata(plan, options.seed, w));
  for (const auto& [key, value] : vocab_keys.metadata()) MINFER_TRY(w.set(key, value));

  const int n_threads = thread_count(options.threads);
  for (const PlannedTensor& t : plan.tensors) {
    if (t.role == TensorRole::kRopeFreqs) {
      MINFER_TRY(w.add_tensor(t.name, t.type, t.ne, f32_bytes(llama3_rope_factors(plan.preset))));
      continue;
    }
    FillSpec spec;
    spec.type = t.type;
    spec.role = t.role;
    spec.row_width = t.ne[0];
    spec.n_rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) spec.n_rows *= t.ne[d];
    spec.seed = mix64(options.seed ^ hash_name(t.name));
    MINFER_TRY(w.add_tensor_fill(t.name, t.type, t.ne,
                                 [spec, n_threads](std::span<uint8_t> out) { fill_tensor(spec, out, n_threads); }));
  }
  MINFER_TRY(w.write(options.output_path));
  return w.file_size();
}

}  // namespace minfer::synth

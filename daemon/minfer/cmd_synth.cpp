// `minfer synth`: writes a synthetic model (random weights, real shapes and
// metadata of a published model) for tests and benchmarks. See engine/synth.
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "daemon/minfer/command.h"
#include "daemon/minfer/engine_options.h"
#include "engine/synth/synth.h"

namespace minfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: minfer synth --preset NAME --type TYPE [--layers N] [--vocab N] [--seed S]\n"
    "                    [--tokenizer tokenizer.json] [--threads N] -o FILE\n"
    "       minfer synth --list-presets";

void list_presets() {
  fmt::print("{:<14} {:<6} {:>6} {:>7} {:>6} {:>5} {:>8} {:>6} {:>7} {:>7}  {}\n", "preset", "arch", "layers",
             "d_model", "heads", "kv", "head_dim", "d_ff", "vocab", "ctx", "notes");
  for (const std::string& name : synth::preset_names()) {
    const synth::Preset p = *synth::find_preset(name);
    std::string notes = p.tied_output ? "tied output" : "separate output";
    if (p.qkv_bias) notes += ", qkv bias";
    if (p.qk_norm) notes += ", q/k norm";
    if (p.llama3_rope_factor > 0) notes += ", llama3 rope";
    fmt::print("{:<14} {:<6} {:>6} {:>7} {:>6} {:>5} {:>8} {:>6} {:>7} {:>7}  {}\n", p.name, p.arch, p.n_layers,
               p.d_model, p.n_heads, p.n_kv_heads, p.head_dim, p.d_ff, p.vocab_size, p.n_ctx, notes);
  }
}

}  // namespace

int cmd_synth(const std::vector<std::string>& args) {
  std::string preset_name;
  synth::Options o;
  po::options_description desc("minfer synth options");
  desc.add_options()
      ("preset", po::value(&preset_name), "model shapes and metadata to copy (--list-presets)")
      ("type", po::value(&o.type)->default_value(o.type),
       "weight type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k, or the recipe q4_k_m")
      ("layers", po::value(&o.layers), "number of blocks (default: the preset's)")
      ("vocab", po::value(&o.vocab),
       "vocabulary size (default: the preset's); with --tokenizer the vocabulary is padded to it, never cut")
      ("seed", po::value(&o.seed)->default_value(o.seed), "random seed: the same seed writes the same bytes")
      ("tokenizer", po::value(&o.tokenizer_json),
       "a Hugging Face tokenizer.json to carry (default: a synthetic SentencePiece vocabulary)")
      ("threads", po::value(&o.threads)->default_value(0), "generation threads (0: one per core)")
      ("output,o", po::value(&o.output_path), "the GGUF file to write")
      ("list-presets", "print the presets and exit");
  po::variables_map vm;
  int code = 0;
  if (!parse_args(kUsage, desc, nullptr, args, vm, &code)) return code;
  if (vm.count("list-presets") != 0) {
    list_presets();
    return 0;
  }
  if (preset_name.empty() || o.output_path.empty()) {
    std::cerr << "minfer synth: --preset and -o are required\n" << kUsage << "\n";
    return 2;
  }
  const std::optional<synth::Preset> preset = synth::find_preset(preset_name);
  if (!preset) {
    std::string known;
    for (const std::string& n : synth::preset_names()) known += (known.empty() ? "" : ", ") + n;
    std::cerr << "minfer synth: unknown preset '" << preset_name << "'; known: " << known << "\n";
    return 2;
  }
  o.preset = *preset;

  const auto start = std::chrono::steady_clock::now();
  const Expected<uint64_t> written = synth::write_model(o);
  if (!written) {
    std::cerr << "minfer synth: " << written.error().message << "\n";
    return written.error().code == ErrorCode::kInvalidArgument ? 2 : 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("wrote {}: {} bytes ({:.1f} MiB), preset {}, type {}, seed {}, in {:.2f} s\n", o.output_path, *written,
             static_cast<double>(*written) / (1 << 20), o.preset.name, o.type, o.seed, seconds);
  return 0;
}

}  // namespace minfer::cli

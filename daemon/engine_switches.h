// The engine settings that minferd's configuration (command line and
// minferd.conf) and minfer's model-loading commands share beyond the model,
// context and threads: CUDA graph capture, the bounded GPU wait's deadline,
// the A/B switches (each changes speed, never the output), tracing and a
// chat template file that stands in for the model's. The
// defaults are EngineConfig's; the MINFER_* environment switches
// (EngineConfig::apply_environment) still apply on top, so a switch turned
// off in either place is off.
#pragma once

#include <boost/program_options.hpp>
#include <string>

#include "engine/api.h"

namespace minfer {

struct EngineSwitches {
  bool cuda_graphs = EngineConfig{}.cuda_graphs;
  double step_timeout_ms = EngineConfig{}.step_timeout_ms;
  double step_timeout_per_token_ms = EngineConfig{}.step_timeout_per_token_ms;
  bool fuse_qkv = EngineConfig{}.fuse_qkv;
  bool fuse_ffn = EngineConfig{}.fuse_ffn;
  bool fa_prefill = EngineConfig{}.fa_prefill;
  bool fused_gemm = EngineConfig{}.fused_gemm;
  bool lookahead = EngineConfig{}.lookahead != 0;
  bool draw_in_step = EngineConfig{}.draw_in_step;
  bool logprobs_in_step = EngineConfig{}.logprobs_in_step;
  bool constrained_lookahead = EngineConfig{}.constrained_lookahead;
  bool constrained_candidates = EngineConfig{}.constrained_candidates != 0;
  bool prefix_cache = EngineConfig{}.prefix_cache;
  int prefix_cache_entries = EngineConfig{}.prefix_cache_entries;
  int kv_cells = EngineConfig{}.kv_cells;
  std::string trace;  // EngineConfig::trace_path
  std::string chat_template_file;  // EngineConfig::chat_template_file

  // Adds the options (--cuda-graphs, --step-timeout-ms, ...), stored into
  // this object, to `desc`.
  void add_to(boost::program_options::options_description& desc);
  // "" when the values are usable, else an error naming the option and value.
  std::string check() const;
  // Sets the matching EngineConfig fields (the environment is not applied).
  void apply_to(EngineConfig* config) const;
};

}  // namespace minfer

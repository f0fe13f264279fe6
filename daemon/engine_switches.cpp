#include "daemon/engine_switches.h"

#include <fmt/format.h>

#include <cmath>

namespace minfer {

namespace po = boost::program_options;

namespace {
// How --help shows a boolean's default (Boost shows 1 and 0).
const char* shown(bool b) { return b ? "true" : "false"; }
}  // namespace

void EngineSwitches::add_to(po::options_description& desc) {
  desc.add_options()
      ("cuda-graphs", po::value(&cuda_graphs)->default_value(cuda_graphs, shown(cuda_graphs)),
       "capture the decode steps as CUDA graphs at load and replay them (false: eager launches; "
       "MINFER_NO_CUDA_GRAPH=1)")
      ("step-timeout-ms", po::value(&step_timeout_ms)->default_value(step_timeout_ms),
       "GPU deadline of one forward step, plus --step-timeout-per-token-ms for each of its tokens; a step past it "
       "fails its request and marks the engine wedged")
      ("step-timeout-per-token-ms", po::value(&step_timeout_per_token_ms)->default_value(step_timeout_per_token_ms),
       "added to a step's deadline for each token it evaluates (prefill)")
      ("fuse-qkv", po::value(&fuse_qkv)->default_value(fuse_qkv, shown(fuse_qkv)),
       "A/B switch: q/k/v biases, RoPE and the K/V store fused (MINFER_NO_FUSE_QKV=1)")
      ("fuse-ffn", po::value(&fuse_ffn)->default_value(fuse_ffn, shown(fuse_ffn)),
       "A/B switch: gate/up products and SwiGLU fused (MINFER_NO_FUSE_FFN=1)")
      ("fa-prefill", po::value(&fa_prefill)->default_value(fa_prefill, shown(fa_prefill)),
       "A/B switch: flash-attention prefill kernel on CUDA (MINFER_NO_FA_PREFILL=1)")
      ("fused-gemm", po::value(&fused_gemm)->default_value(fused_gemm, shown(fused_gemm)),
       "A/B switch: prefill steps of up to 64 tokens multiply the quantized weights on one fused kernel on CUDA, "
       "instead of dequantizing each weight to f16 for cuBLAS (MINFER_NO_FUSED_GEMM=1)")
      ("lookahead", po::value(&lookahead)->default_value(lookahead, shown(lookahead)),
       "A/B switch: decode steps queued on the GPU ahead of the host's handling of the token before "
       "(MINFER_NO_LOOKAHEAD=1)")
      ("draw-in-step", po::value(&draw_in_step)->default_value(draw_in_step, shown(draw_in_step)),
       "A/B switch: sampled tokens drawn inside the decode step, on the GPU with CUDA (MINFER_NO_DRAW_IN_STEP=1)")
      ("logprobs-in-step", po::value(&logprobs_in_step)->default_value(logprobs_in_step, shown(logprobs_in_step)),
       "A/B switch: log-probabilities computed inside the decode step that picks the token, and a scored prompt's "
       "inside its prefill steps, on the GPU with CUDA, instead of by the host from copied logits "
       "(MINFER_NO_LOGPROBS_IN_STEP=1)")
      ("constrained-lookahead",
       po::value(&constrained_lookahead)->default_value(constrained_lookahead, shown(constrained_lookahead)),
       "A/B switch: greedy JSON-mode, structured-output and tool-call requests take each step's argmax when the "
       "constraint allows it, with steps queued ahead, instead of the host picking from copied logits "
       "(MINFER_CONSTRAINED_LOOKAHEAD=1)")
      ("constrained-candidates",
       po::value(&constrained_candidates)->default_value(constrained_candidates, shown(constrained_candidates)),
       "A/B switch: on CUDA, greedy JSON-mode, structured-output and tool-call requests take the first of each "
       "decode step's best candidates, listed on the GPU, that the constraint allows, and copy the logits only when "
       "it allows none, instead of the host picking from every step's copied logits "
       "(MINFER_NO_CONSTRAINED_CANDIDATES=1)")
      ("prefix-cache", po::value(&prefix_cache)->default_value(prefix_cache, shown(prefix_cache)),
       "reuse the KV cache rows of an earlier request's common prompt prefix")
      ("prefix-cache-entries", po::value(&prefix_cache_entries)->default_value(prefix_cache_entries),
       "earlier requests whose histories stay in the KV cache for prefix reuse until a request needs their cells "
       "(the least recently used go first); 1: the previous request's alone")
      ("kv-cells", po::value(&kv_cells)->default_value(kv_cells),
       "KV cache cells (0: as many as the context): more leave room for the prefix cache's kept histories beside a "
       "request of the whole context, at the cost of their memory")
      ("trace", po::value(&trace)->default_value(trace),
       "write a Chrome trace (Perfetto) of every node of every step to this file; slow: steps run eagerly and "
       "read every output back (MINFER_TRACE=FILE)")
      ("chat-template-file", po::value(&chat_template_file)->default_value(chat_template_file),
       "a Jinja chat template used instead of the model's tokenizer.chat_template (recognised by its text as the "
       "model's would be: ChatML with Qwen's tools, Llama-3, [INST])");
}

std::string EngineSwitches::check() const {
  // A non-finite or non-positive deadline would make every step fail or never
  // fail: neither is a bounded wait.
  if (!std::isfinite(step_timeout_ms) || step_timeout_ms <= 0) {
    return fmt::format("--step-timeout-ms is {}; it must be a positive number of milliseconds", step_timeout_ms);
  }
  if (!std::isfinite(step_timeout_per_token_ms) || step_timeout_per_token_ms < 0) {
    return fmt::format("--step-timeout-per-token-ms is {}; it must be zero or a positive number of milliseconds",
                       step_timeout_per_token_ms);
  }
  if (prefix_cache_entries < 1 || prefix_cache_entries > kMaxPrefixCacheEntries) {
    return fmt::format("--prefix-cache-entries is {}; allowed 1 to {}", prefix_cache_entries, kMaxPrefixCacheEntries);
  }
  if (kv_cells < 0 || kv_cells > kMaxKvCells) {
    return fmt::format("--kv-cells is {}; allowed 0 (the context) to {}", kv_cells, kMaxKvCells);
  }
  return {};
}

void EngineSwitches::apply_to(EngineConfig* config) const {
  config->cuda_graphs = cuda_graphs;
  config->step_timeout_ms = step_timeout_ms;
  config->step_timeout_per_token_ms = step_timeout_per_token_ms;
  config->fuse_qkv = fuse_qkv;
  config->fuse_ffn = fuse_ffn;
  config->fa_prefill = fa_prefill;
  config->fused_gemm = fused_gemm;
  // On: the backend's choice (EngineConfig::lookahead -1: CUDA runs steps
  // ahead, the CPU does not); off: never.
  config->lookahead = lookahead ? EngineConfig{}.lookahead : 0;
  config->draw_in_step = draw_in_step;
  config->logprobs_in_step = logprobs_in_step;
  config->constrained_lookahead = constrained_lookahead;
  // On: the backend's choice (-1: where steps run on a device); off: never.
  config->constrained_candidates = constrained_candidates ? EngineConfig{}.constrained_candidates : 0;
  config->prefix_cache = prefix_cache;
  config->prefix_cache_entries = prefix_cache_entries;
  config->kv_cells = kv_cells;
  config->trace_path = trace;
  config->chat_template_file = chat_template_file;
}

}  // namespace minfer

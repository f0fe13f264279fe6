// model_layout: per block, attention then feed-forward, each weight
// [ne0 = in, ne1 = out] (a GGUF matrix is stored row-major with ne[0] the
// contiguous dimension, so the input dim comes first).
#include "engine/synth/layout.h"

#include <fmt/format.h>

namespace minfer::synth {
namespace {

using U = uint64_t;

void add(std::vector<PlannedTensor>& out, std::string name, std::vector<U> ne, TensorRole role, int layer) {
  PlannedTensor t;
  t.name = std::move(name);
  t.ne = std::move(ne);
  t.role = role;
  t.layer = layer;
  out.push_back(std::move(t));
}

}  // namespace

Status check_preset(const Preset& p) {
  if (p.arch != "llama" && p.arch != "qwen2" && p.arch != "qwen3") {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("preset '{}': architecture '{}' is not one of llama, qwen2, qwen3", p.name, p.arch));
  }
  if (p.n_layers < 1 || p.d_model < 1 || p.n_heads < 1 || p.n_kv_heads < 1 || p.head_dim < 2 || p.d_ff < 1 ||
      p.vocab_size < 1 || p.n_ctx < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("preset '{}': layers {}, d_model {}, heads {}/{}, head_dim {}, d_ff {}, vocab {}, ctx {}: "
                             "every size must be positive",
                             p.name, p.n_layers, p.d_model, p.n_heads, p.n_kv_heads, p.head_dim, p.d_ff,
                             p.vocab_size, p.n_ctx));
  }
  if (p.n_heads % p.n_kv_heads != 0) {
    return Error(ErrorCode::kInvalidArgument, fmt::format("preset '{}': {} heads are not a multiple of {} kv heads",
                                                          p.name, p.n_heads, p.n_kv_heads));
  }
  return ok_status();
}

std::vector<PlannedTensor> model_layout(const Preset& p) {
  const U d = static_cast<U>(p.d_model);
  const U q_dim = static_cast<U>(p.n_heads) * static_cast<U>(p.head_dim);
  const U kv_dim = static_cast<U>(p.n_kv_heads) * static_cast<U>(p.head_dim);
  const U ff = static_cast<U>(p.d_ff);
  const U vocab = static_cast<U>(p.vocab_size);

  std::vector<PlannedTensor> out;
  add(out, "token_embd.weight", {d, vocab}, TensorRole::kWeight, -1);
  if (p.llama3_rope_factor > 0.0f) {
    add(out, "rope_freqs.weight", {static_cast<U>(p.head_dim / 2)}, TensorRole::kRopeFreqs, -1);
  }
  for (int l = 0; l < p.n_layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    add(out, b + "attn_norm.weight", {d}, TensorRole::kNorm, l);
    add(out, b + "attn_q.weight", {d, q_dim}, TensorRole::kWeight, l);
    if (p.qkv_bias) add(out, b + "attn_q.bias", {q_dim}, TensorRole::kBias, l);
    add(out, b + "attn_k.weight", {d, kv_dim}, TensorRole::kWeight, l);
    if (p.qkv_bias) add(out, b + "attn_k.bias", {kv_dim}, TensorRole::kBias, l);
    add(out, b + "attn_v.weight", {d, kv_dim}, TensorRole::kWeight, l);
    if (p.qkv_bias) add(out, b + "attn_v.bias", {kv_dim}, TensorRole::kBias, l);
    if (p.qk_norm) {
      // Qwen3 normalises each head of q and k: one weight of head_dim, shared by the heads.
      add(out, b + "attn_q_norm.weight", {static_cast<U>(p.head_dim)}, TensorRole::kNorm, l);
      add(out, b + "attn_k_norm.weight", {static_cast<U>(p.head_dim)}, TensorRole::kNorm, l);
    }
    add(out, b + "attn_output.weight", {q_dim, d}, TensorRole::kWeight, l);
    add(out, b + "ffn_norm.weight", {d}, TensorRole::kNorm, l);
    add(out, b + "ffn_gate.weight", {d, ff}, TensorRole::kWeight, l);
    add(out, b + "ffn_up.weight", {d, ff}, TensorRole::kWeight, l);
    add(out, b + "ffn_down.weight", {ff, d}, TensorRole::kWeight, l);
  }
  add(out, "output_norm.weight", {d}, TensorRole::kNorm, -1);
  if (!p.tied_output) add(out, "output.weight", {d, vocab}, TensorRole::kWeight, -1);
  return out;
}

}  // namespace minfer::synth

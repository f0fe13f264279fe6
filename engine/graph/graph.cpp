// build_decoder_graph: the llama-family decoder block, written once.
//
//   x = embed(tokens)
//   per layer:  xn = rmsnorm(x) · attn_norm
//               q, k, v = Wq xn (+bq), Wk xn (+bk), Wv xn (+bv)
//               [qwen3] q, k = headnorm(q) · q_norm, headnorm(k) · k_norm
//               q, k = rope(q), rope(k);  cache[cells] = k, v
//               x += Wo · attention(q, cache)
//               xn = rmsnorm(x) · ffn_norm
//               x += Wdown · (silu(Wgate xn) * (Wup xn))
//   logits = Wout · (rmsnorm(x) · output_norm)
#include "engine/graph/graph.h"

#include <fmt/format.h>

namespace minfer {

const char* op_name(Op op) {
  switch (op) {
    case Op::kEmbed: return "embed";
    case Op::kRmsNorm: return "rms_norm";
    case Op::kMatmul: return "matmul";
    case Op::kHeadNorm: return "head_norm";
    case Op::kRope: return "rope";
    case Op::kKvStore: return "kv_store";
    case Op::kAttention: return "attention";
    case Op::kAdd: return "add";
    case Op::kSwiglu: return "swiglu";
    case Op::kArgmax: return "argmax";
    case Op::kSample: return "sample";
    case Op::kLogprobs: return "logprobs";
    case Op::kQkvTail: return "qkv_tail";
    case Op::kGateUpSwiglu: return "gate_up_swiglu";
    case Op::kCount: break;
  }
  return "?";
}

const char* buf_name(Buf buf) {
  switch (buf) {
    case Buf::kNone: return "none";
    case Buf::kX: return "x";
    case Buf::kXNorm: return "xnorm";
    case Buf::kQ: return "q";
    case Buf::kK: return "k";
    case Buf::kV: return "v";
    case Buf::kAttn: return "attn";
    case Buf::kProj: return "proj";
    case Buf::kGate: return "gate";
    case Buf::kUp: return "up";
    case Buf::kLogits: return "logits";
    case Buf::kCount: break;
  }
  return "?";
}

int buf_width(Buf buf, const ModelConfig& c) {
  switch (buf) {
    case Buf::kX:
    case Buf::kXNorm:
    case Buf::kProj: return c.d_model;
    case Buf::kQ:
    case Buf::kAttn: return c.q_dim();
    case Buf::kK:
    case Buf::kV: return c.kv_dim();
    case Buf::kGate:
    case Buf::kUp: return c.d_ff;
    case Buf::kLogits: return c.vocab_size;
    case Buf::kNone:
    case Buf::kCount: break;
  }
  return 0;
}

namespace {

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}

  // The reference is valid only until the next add() (the vector may grow).
  Node& add(Op op, std::string name, Buf dst, Buf src = Buf::kNone, const Weight* w = nullptr) {
    Node& n = g_.nodes.emplace_back();
    n.op = op;
    n.name = std::move(name);
    n.layer = layer_;
    n.dst = dst;
    n.src = src;
    n.w = w;
    return n;
  }

  void set_layer(int layer) { layer_ = layer; }

 private:
  Graph& g_;
  int layer_ = -1;
};

const Weight* opt(const Weight& w) { return w.present() ? &w : nullptr; }

}  // namespace

Graph build_decoder_graph(const ModelConfig& c, const ModelWeights& mw, const GraphOptions& options) {
  Graph g;
  g.options = options;
  Builder b(g);
  b.add(Op::kEmbed, "token_embd", Buf::kX, Buf::kNone, &mw.token_embd);

  for (int il = 0; il < c.n_layers; ++il) {
    const LayerWeights& l = mw.layers[static_cast<size_t>(il)];
    const std::string p = fmt::format("blk.{}.", il);
    b.set_layer(il);
    b.add(Op::kRmsNorm, p + "attn_norm", Buf::kXNorm, Buf::kX, &l.attn_norm);
    // Unfused, the biases ride on the matmuls; fused, the tail adds them.
    const bool bias_in_matmul = !options.fuse_qkv;
    b.add(Op::kMatmul, p + "attn_q", Buf::kQ, Buf::kXNorm, &l.wq).bias = bias_in_matmul ? opt(l.bq) : nullptr;
    b.add(Op::kMatmul, p + "attn_k", Buf::kK, Buf::kXNorm, &l.wk).bias = bias_in_matmul ? opt(l.bk) : nullptr;
    b.add(Op::kMatmul, p + "attn_v", Buf::kV, Buf::kXNorm, &l.wv).bias = bias_in_matmul ? opt(l.bv) : nullptr;
    if (options.fuse_qkv) {
      Node& t = b.add(Op::kQkvTail, p + "qkv_tail", Buf::kQ, Buf::kK);
      t.src2 = Buf::kV;
      t.bq = opt(l.bq);
      t.bk = opt(l.bk);
      t.bv = opt(l.bv);
      t.q_norm = opt(l.q_norm);
      t.k_norm = opt(l.k_norm);
    } else {
      if (c.qk_norm) {
        b.add(Op::kHeadNorm, p + "attn_q_norm", Buf::kQ, Buf::kNone, &l.q_norm).n_heads = c.n_heads;
        b.add(Op::kHeadNorm, p + "attn_k_norm", Buf::kK, Buf::kNone, &l.k_norm).n_heads = c.n_kv_heads;
      }
      b.add(Op::kRope, p + "rope_q", Buf::kQ).n_heads = c.n_heads;
      b.add(Op::kRope, p + "rope_k", Buf::kK).n_heads = c.n_kv_heads;
      b.add(Op::kKvStore, p + "kv_store", Buf::kNone, Buf::kK).src2 = Buf::kV;
    }
    b.add(Op::kAttention, p + "attention", Buf::kAttn, Buf::kQ);
    b.add(Op::kMatmul, p + "attn_output", Buf::kProj, Buf::kAttn, &l.wo);
    b.add(Op::kAdd, p + "attn_residual", Buf::kX, Buf::kProj);
    b.add(Op::kRmsNorm, p + "ffn_norm", Buf::kXNorm, Buf::kX, &l.ffn_norm);
    if (options.fuse_ffn) {
      b.add(Op::kGateUpSwiglu, p + "ffn_gate_up", Buf::kGate, Buf::kXNorm, &l.w_gate).w2 = &l.w_up;
    } else {
      b.add(Op::kMatmul, p + "ffn_gate", Buf::kGate, Buf::kXNorm, &l.w_gate);
      b.add(Op::kMatmul, p + "ffn_up", Buf::kUp, Buf::kXNorm, &l.w_up);
      b.add(Op::kSwiglu, p + "ffn_swiglu", Buf::kGate, Buf::kUp);
    }
    b.add(Op::kMatmul, p + "ffn_down", Buf::kProj, Buf::kGate, &l.w_down);
    b.add(Op::kAdd, p + "ffn_residual", Buf::kX, Buf::kProj);
  }

  b.set_layer(-1);
  if (options.logits == Logits::kNone) return g;
  const Rows rows = options.logits == Logits::kAll || options.logits == Logits::kScore ? Rows::kAll : Rows::kLast;
  // A scoring step's head takes the rows from StepInput::score_from.
  b.add(Op::kRmsNorm, "output_norm", Buf::kXNorm, Buf::kX, &mw.output_norm).rows =
      options.logits == Logits::kScore ? Rows::kScored : rows;
  // After output_norm with Rows::kLast, xnorm holds one row: the head reads
  // row 0; with Rows::kScored, the scored rows from row 0.
  b.add(Op::kMatmul, "output", Buf::kLogits, Buf::kXNorm, &mw.output).rows = rows;
  if (options.argmax) b.add(Op::kArgmax, "argmax", Buf::kNone, Buf::kLogits).rows = rows;
  if (options.sample && !options.argmax) b.add(Op::kSample, "sample", Buf::kNone, Buf::kLogits).rows = Rows::kLast;
  if (g.has_logprobs()) {
    b.add(Op::kLogprobs, "logprobs", Buf::kNone, Buf::kLogits).rows = Rows::kLast;
  }
  if (g.scores_rows()) b.add(Op::kLogprobs, "prompt_logprobs", Buf::kNone, Buf::kLogits).rows = Rows::kAll;
  return g;
}

}  // namespace minfer

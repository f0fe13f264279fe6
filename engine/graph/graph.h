// The forward pass as data: a list of nodes that every backend runs.
//
// The graph's topology and node arguments never depend on how many tokens
// are in the KV cache: positions, the cells new K/V rows go to and the cells a
// sequence attends to are step inputs (StepInput), read by the ops at run
// time. That is what lets the CUDA backend capture a decode step once and
// replay it (ARCHITECTURE.md rule 1).
//
// Activations live in a fixed set of buffers (Buf), each [n_tokens][width];
// layers reuse them. Fused ops (kQkvTail, kGateUpSwiglu) replace the chain
// they stand for only when the backend supports them, and must give the same
// result (rule 6).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "kernels/draw.h"

namespace minfer {

enum class Op : uint8_t {
  kEmbed,         // dst[t] = token_embd row tokens[t]
  kRmsNorm,       // dst[t] = src[t] / rms(src[t]) * w
  kMatmul,        // dst[t] = W · src[t] (+ bias)
  kHeadNorm,      // in place: each head_dim slice of dst[t] RMS-normalised with w (qwen3 q/k norm)
  kRope,          // in place: rotate dst[t]'s heads by positions[t]
  kKvStore,       // K = src, V = src2 rows → the layer's cache at cells kv_cells[t]
  kAttention,     // dst[t] = softmax(q·Kᵀ / sqrt(head_dim), causal by position) · V over the sequence's cells
  kAdd,           // dst += src
  kSwiglu,        // dst = silu(dst) * src
  kArgmax,        // argmax of each logits row (greedy decoding copies back one id)
  kSample,        // a token drawn from the last logits row with StepInput::draw (sampled decoding, one id back)
  kLogprobs,      // after kArgmax / kSample: the last row's log-probabilities (kernels/logprobs.h) of the step's pick;
                  // Rows::kAll (Logits::kScore): every row's, of the token after the row's (StepOutput::row_logprobs;
                  // the rows from StepInput::score_from)
  // Fused forms, used only where the backend supports them:
  kQkvTail,       // biases + head norms + RoPE on q/k + K/V store, for one layer
  kGateUpSwiglu,  // dst = silu(W_gate · src) * (W_up · src)
  kCount,
};

const char* op_name(Op op);

// Activation buffers. Widths: kX/kXNorm/kProj d_model; kQ/kAttn q_dim;
// kK/kV kv_dim; kGate/kUp d_ff; kLogits vocab_size.
enum class Buf : uint8_t { kNone, kX, kXNorm, kQ, kK, kV, kAttn, kProj, kGate, kUp, kLogits, kCount };

const char* buf_name(Buf buf);
int buf_width(Buf buf, const ModelConfig& c);

// Which rows a node reads and writes: all rows of src, or only its last row,
// written to row 0 of dst (dst then holds one row) — the output head when only
// the next token's logits are wanted — or the rows from StepInput::score_from
// on, written from row 0 of dst (a scoring step's output norm: the rows of
// context before them get no head). Backends track each buffer's row count
// as they walk the graph: kEmbed sets n_tokens, a kLast node sets 1.
enum class Rows : uint8_t { kAll, kLast, kScored };

// The first row of src a node reads and how many.
struct RowRange {
  int first = 0, count = 0;
};
inline RowRange node_rows(Rows rows, int src_rows, int score_from) {
  switch (rows) {
    case Rows::kLast: return {src_rows - 1, 1};
    case Rows::kScored: return {score_from, src_rows - score_from};
    case Rows::kAll: break;
  }
  return {0, src_rows};
}

struct Node {
  Op op = Op::kAdd;
  std::string name;        // "blk.3.attn_q", for errors and traces
  int layer = -1;
  Rows rows = Rows::kAll;
  Buf dst = Buf::kNone;
  Buf src = Buf::kNone;
  Buf src2 = Buf::kNone;
  const Weight* w = nullptr;     // matmul weight, norm weight, embedding table
  const Weight* w2 = nullptr;    // kGateUpSwiglu: W_up
  const Weight* bias = nullptr;  // kMatmul bias
  // kQkvTail: the per-layer vectors it folds in (any may be absent).
  const Weight* bq = nullptr;
  const Weight* bk = nullptr;
  const Weight* bv = nullptr;
  const Weight* q_norm = nullptr;
  const Weight* k_norm = nullptr;
  int n_heads = 0;               // kHeadNorm / kRope: heads in dst
};

// Which logits a step produces: none (a prefill chunk that is not the last),
// the last token's (generation), or every token's (tests, scoring on the
// host). kScore: every token's on the backend, each row scored against the
// token after it (Op::kLogprobs over all rows: StepOutput::row_logprobs),
// and the last token's handed back as with kLast.
enum class Logits : uint8_t { kNone, kLast, kAll, kScore };

struct GraphOptions {
  Logits logits = Logits::kLast;
  bool argmax = false;      // append kArgmax on the logits
  bool sample = false;      // append kSample instead (Logits::kLast)
  bool logprobs = false;    // then kLogprobs (with argmax or sample, Logits::kLast): StepOutput::logprobs
  bool fuse_qkv = false;    // use kQkvTail
  bool fuse_ffn = false;    // use kGateUpSwiglu
};

struct Graph {
  std::vector<Node> nodes;
  GraphOptions options;
  // The step picks its token itself (kArgmax or kSample): StepOutput::argmax.
  bool picks_token() const { return options.argmax || options.sample; }
  // It ends with kLogprobs: StepOutput::logprobs.
  bool has_logprobs() const { return options.logprobs && picks_token() && options.logits == Logits::kLast; }
  // It scores every row (Logits::kScore): StepOutput::row_logprobs.
  bool scores_rows() const { return options.logits == Logits::kScore; }
};

// The decoder forward pass for llama / qwen2 / qwen3.
Graph build_decoder_graph(const ModelConfig& config, const ModelWeights& weights, const GraphOptions& options);

// One step's inputs. Arrays are host memory; backends copy them to wherever
// their ops read them (device memory for CUDA).
struct StepInput {
  int n_tokens = 0;
  const int32_t* tokens = nullptr;     // [n_tokens]
  const int32_t* positions = nullptr;  // [n_tokens]
  const int32_t* kv_cells = nullptr;   // [n_tokens] cache cell receiving each token's K/V
  const int32_t* seq_cells = nullptr;  // [n_seq_cells] cells the sequence attends to (incl. this step's)
  int n_seq_cells = 0;
  // Decode ahead (Backend::submit): the step's one token is the one the step
  // submitted just before it picked (its argmax or its draw), which may not have reached the host
  // yet; `tokens` is not read.
  bool token_from_previous = false;
  // kSample's draw (a graph with options.sample), read during submit()/run()
  // only; null otherwise.
  const kernels::DrawArgs* draw = nullptr;
  // A scoring step (Logits::kScore): the token after the step's last, which
  // its last row is scored against; -1: none (the prompt's end).
  int32_t next_token = -1;
  // A scoring step: its rows before this one are context, neither put
  // through the head nor scored (Rows::kScored); StepOutput::row_logprobs
  // then starts at it. 0 .. n_tokens - 1.
  int score_from = 0;
};

}  // namespace minfer

// Launchers for every CUDA kernel: the only way host code reaches kernels/.
// Plain C++ (cuda_runtime_api.h only). Each launcher enqueues on `stream` and
// returns the launch status; shapes are checked by the caller (the CUDA
// backend validates once at prepare time). Pointers are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/draw.h"
#include "kernels/logprobs.h"
#include "kernels/weight_layout.h"

namespace minfer::kernels {

// ---- activations -----------------------------------------------------------

// The order of an f16 copy of activations (a prefill product's x). kNatural:
// each row's values in order. kLanes, read by launch_gemm_fused alone, for
// rows whose width is a multiple of 128: within each 128 values, the
// fused product's lane t of a token takes the 8-value pieces at 8t, 32 + 8t,
// 64 + 8t and 96 + 8t, so that each warp load brings a token's values in 64
// consecutive bytes. In the natural order a lane's pieces sit where its weight
// bytes' elements are (Q4_K: 0-15 and 32-47 for lane 0), and each load took
// four pieces of 16 bytes 32 bytes apart: half of every 32-byte sector it
// touched unused (Nsight Compute, session 56). The order is the one Q4_K's
// and Q5_K's lanes read; Q6_K's read whole sectors in it too, the other
// types as many as in the natural order.
enum class X16Order : uint8_t { kNatural, kLanes };
// Where value c (0-127) of a span of 128 goes in kLanes order: lane t's runs
// of 16 are Q4_K's, 64 (t / 2) + 16 (t % 2) and 32 more; the 8-value piece i
// of its run h goes to 64 h + 32 i + 8 t.
constexpr int x16_lanes_pos(int c) {
  const int t = 2 * (c / 64) + (c % 32) / 16, h = (c % 64) / 32, i = (c % 16) / 8;
  return 64 * h + 32 * i + 8 * t + c % 8;
}
// Where value i of a row-major array of such rows goes (any width: kNatural).
constexpr int64_t x16_index(int64_t i, X16Order order) {
  return order == X16Order::kNatural ? i : (i & ~int64_t{127}) + x16_lanes_pos(static_cast<int>(i & 127));
}

// Q8 activations (see common.cuh): values [rows][k] int8, scales [rows][k/32] float2.
struct Q8Rows {
  int8_t* q = nullptr;
  void* ds = nullptr;  // float2
};

// y[r] = x[r] / sqrt(mean(x[r]²) + eps) * w, for `rows` rows of width n.
// Any of y_f32 / y_f16 / yq may be null; yq (Q8) needs n % 32 == 0, y_f16 in
// kLanes order n % 128 == 0.
cudaError_t launch_rms_norm(const float* x, const float* w, int rows, int n, float eps, float* y_f32, void* y_f16,
                            Q8Rows yq, cudaStream_t stream, X16Order y_f16_order = X16Order::kNatural);
// The deferred-scale RMS norm of one row (decode; n % 32 == 0): yq gets Q8
// blocks of x ⊙ w without the norm's scale, *scale the scale
// 1 / sqrt(mean(x²) + eps); a product given it (MatvecInput::defer_scale)
// multiplies its results by it. See norm.cuh.
cudaError_t launch_rms_norm_deferred(const float* x, const float* w, int n, float eps, Q8Rows yq, float* scale,
                                     cudaStream_t stream);
// Q8 quantization of `rows` rows of width n (n % 32 == 0).
cudaError_t launch_quantize_q8(const float* x, int rows, int n, Q8Rows yq, cudaStream_t stream);
// f32 → f16, n elements (rows of row_n; in kLanes order row_n % 128 == 0).
cudaError_t launch_to_f16(const float* x, void* y, int64_t n, cudaStream_t stream, X16Order order = X16Order::kNatural,
                          int row_n = 0);

// ---- matrix-vector products (decode) ----------------------------------------

// One weight's part of a batched matvec: y[r] (+)= W[r] · x (+ bias[r]).
struct MatvecTask {
  DeviceWeight w;
  float* y = nullptr;
  const float* bias = nullptr;  // [n_rows] or null
  bool accumulate = false;      // y += (the residual add)
  // Greedy decoding: also fold every row's value into *argmax as
  // argmax_pack(value, row) with atomicMax (zero it first); the largest value
  // wins, the lowest row on ties, NaN never. Decode with argmax_unpack.
  unsigned long long* argmax = nullptr;
};
constexpr int32_t argmax_unpack(unsigned long long key) { return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu)); }
struct QkvTailArgs;  // the q/k/v tail (attention, below)
struct MatvecInput {
  const float* x = nullptr;     // [k] f32, for float weights
  Q8Rows xq;                    // [k] Q8, for quantized weights
  // RMS norm fused into the input (decode): when norm_w is set, every block
  // normalises norm_x (the residual stream, [k]) with norm_w into shared memory
  // (f32 and Q8) and ignores x/xq. Bit-identical to launch_rms_norm followed
  // by the plain matvec (norm_deferred: see below). Needs matvec_norm_fits(k).
  const float* norm_x = nullptr;
  const float* norm_w = nullptr;
  float norm_eps = 0.0f;
  // RMS norm folded into the product's end (decode; one task accumulating
  // into the residual stream, rows % 32 == 0): the last block to finish (a
  // count in *tail_counter, which must be zero before the launch and is zero
  // again after it) normalises the whole of y with tail_norm_w into
  // tail_norm_y (f32) and tail_norm_q (Q8), with the norm kernel's code, so
  // the same bits as launch_rms_norm after the matvec, one launch fewer.
  const float* tail_norm_w = nullptr;
  float tail_norm_eps = 0.0f;
  float* tail_norm_y = nullptr;
  Q8Rows tail_norm_q;
  int* tail_counter = nullptr;
  // The deferred-scale norm (launch_rms_norm_deferred; quantized weights
  // only): xq holds Q8 of x ⊙ w without the norm's scale, *defer_scale the
  // scale; each row value is multiplied by it before its bias, residual add
  // and argmax.
  const float* defer_scale = nullptr;
  // With norm_w: the prologue writes the deferred form into shared memory
  // (one pass) and the kernel applies the scale as above (eps: norm_eps):
  // the same bits as launch_rms_norm_deferred followed by the product with
  // defer_scale.
  bool norm_deferred = false;
  // The q/k/v tail folded into the product (decode, one token): tasks q, k
  // and v in that order, their y the tail's q, k and v, without a bias,
  // residual or argmax of their own. Each row value then gets what
  // launch_qkv_tail would do to it after the product — its bias, RoPE for q
  // and k, the K/V store into the cache — in the same launch, with the same
  // bits. The rows of q and k are computed in rotation pairs (NeoX: row i
  // beside row i + n_rot / 2), so that a pair's two values meet in one
  // block. Not with per-head norms (qwen3: cudaErrorInvalidValue);
  // cudaErrorNotSupported, launching nothing, where the launch would take a
  // pipelined or streamed kernel: the caller launches the product and the
  // tail then.
  const QkvTailArgs* tail = nullptr;
};
// Shared memory of the norm prologue fits a block (k f32 + k int8 + scales).
bool matvec_norm_fits(int k);
constexpr int kMaxMatvecTasks = 3;
// Up to three weights sharing one input in one launch (q, k, v).
cudaError_t launch_matvec(const MatvecTask* tasks, int n_tasks, MatvecInput in, cudaStream_t stream);
// Launches with the q/k/v tail folded in so far (tests and benchmarks check
// that the path ran).
uint64_t matvec_tail_launches();

// Fused FFN input: h = silu(W_gate · x) * (W_up · x), written as f32 and as Q8
// (the down projection's input). Gate and up rows must be a multiple of 32.
cudaError_t launch_gate_up_swiglu(const DeviceWeight& gate, const DeviceWeight& up, MatvecInput in, float* h,
                                  Q8Rows hq, cudaStream_t stream);

// ---- element-wise ----------------------------------------------------------

// y = silu(g) * u, n elements (f32) in rows of row_n, also as Q8 when hq.q is
// set (row_n % 32 == 0) and f16 when y_f16 is set (kLanes: row_n % 128 == 0).
cudaError_t launch_swiglu(const float* g, const float* u, int64_t n, float* y, void* y_f16, Q8Rows hq, int row_n,
                          cudaStream_t stream, X16Order y_f16_order = X16Order::kNatural);
// y += x, n elements.
cudaError_t launch_add(float* y, const float* x, int64_t n, cudaStream_t stream);
// y[r] += b for `rows` rows of width n.
cudaError_t launch_add_bias(float* y, const float* b, int rows, int n, cudaStream_t stream);
// Logits argmax: out[r] = argmax over row r (first index on ties), rows of width n.
cudaError_t launch_argmax(const float* x, int rows, int n, int32_t* out, cudaStream_t stream);
// The first kernel of a decode step that picks its token: zeroes *key (the
// step's fused argmax) after, when *feed asks for it, setting *token to the
// token the step before picked — *feed 1: argmax_unpack(*key), 2: argmax[0]
// (an unfused head, or launch_sample's draw), 0: the token stays as uploaded. So a step can be enqueued before the host has
// seen the token it evaluates.
cudaError_t launch_step_start(int32_t* token, const int32_t* feed, unsigned long long* key, const int32_t* argmax,
                              cudaStream_t stream);
// x[t] = dequantized row tokens[t] of the embedding table.
cudaError_t launch_embed(const DeviceWeight& table, const int32_t* tokens, int n_tokens, float* x, cudaStream_t stream);
// The whole matrix as f16 [n_rows][k] (prefill GEMM operand).
cudaError_t launch_dequantize_f16(const DeviceWeight& w, void* out, cudaStream_t stream);

// ---- prefill products of few tokens (gemm_fused.cu) -------------------------

// y[t][n] (+)= Σ_i W[n][i] · x16[t][i] for `tokens` rows of f16 x (ldx apart,
// 16-byte aligned) into f32 y (ldy apart), on tensor cores, the weight read
// once and dequantized in registers: the operands of launch_dequantize_f16 +
// a GEMM without the f16 copy of the weight. Every weight type (Q8_0, Q4_K,
// Q5_K, Q6_K, Q4_0, Q4_1, Q5_0 and Q5_1 unpacked from 16-byte loads, the
// float types through dequant.cuh);
// needs k % 128 == 0 (gemm_fused_supported), else cudaErrorInvalidValue.
// The same bits at every run.
// x16 in either order (X16Order; kLanes: the same bits, faster).
bool gemm_fused_supported(const DeviceWeight& w, int ldx);
cudaError_t launch_gemm_fused(const DeviceWeight& w, const void* x16, int ldx, int tokens, float* y, int ldy,
                              bool accumulate, cudaStream_t stream, X16Order x_order = X16Order::kNatural);
uint64_t gemm_fused_launches();  // launch_gemm_fused calls so far (tests check which path ran)
uint64_t gemm_fused_lanes_launches();  // those of them with x in X16Order::kLanes
// Where a warp's chunks of the weight go on their way (Q8_0, Q4_K and Q6_K
// weights): 0 by the launch's tokens — up to 8 as cp.async into stages in
// shared memory, 7 chunks ahead of the one multiplied, more into registers,
// four chunks at a time, then multiplied; 1 registers at every size; 2 or
// more stages at every size (sm_80 and later). The same bits either way.
void set_gemm_fused_stages(int stages);
uint64_t gemm_fused_piped_launches();  // launches of the pipelined form so far
// true: every type's values through dequant.cuh's element-wise dequantizer
// (dequant8), as the float types go, instead of unpacked from the lane's
// 16-byte loads (A/B runs and bug hunts; the same f16 operands).
void set_gemm_fused_generic(bool on);
// Blocks of steps of more than 32 tokens: 0 by the weight's rows — 64
// tokens (8 tiles) where its blocks of 16 rows are at least the SMs, else
// 32 —, 4 or 8 tiles at every such size (tests, A/B runs). The same bits.
void set_gemm_fused_tiles(int tiles);

// ---- sampling (decode) -----------------------------------------------------

// The largest vocabulary launch_sample takes (64 blocks of 4,096 logits).
inline constexpr int kSampleMaxVocab = 262144;
// launch_sample's scratch for a vocabulary of `vocab`: each block's best keys.
size_t sample_lists_bytes(int vocab);
// A token drawn from logits[vocab] (f32, device) with *args (device memory,
// draw.h: bias, penalties, the k best, top-p, min-p, temperature, args->u)
// into out[0] — the token engine/sampling/top_k_draw.h's draw_in_step()
// gives on the host. *step_token (device) is the step's input token, which
// the penalties' window ends with where args->penalize_step_token says.
// *count must be zero at the first launch; each launch leaves it zero.
// cudaErrorInvalidValue past kSampleMaxVocab.
cudaError_t launch_sample(const float* logits, int vocab, const DrawArgs* args, const int32_t* step_token,
                          unsigned long long* lists, unsigned int* count, int32_t* out, cudaStream_t stream);

// The most rows launch_logprobs takes at once (a grid's y dimension).
inline constexpr int kLogprobsMaxRows = 65535;
// launch_logprobs's scratch for `rows` rows of a vocabulary of `vocab`.
size_t logprobs_scratch_bytes(int vocab, int rows = 1);
// Log-probabilities (logprobs.h) of each of logits[rows][vocab] (f32,
// device) into out[rows] (device): log_z, the kLogprobsTop best, and the
// logit of a token — of one row, a decode step's pick:
// argmax_unpack(*chosen_key) (a fused argmax) or *chosen_id (kArgmax's or
// launch_sample's out); of every row r, chosen_id[r] (a scored prompt's
// next token; out of range: its logit NaN). Exactly one of chosen_key and
// chosen_id given, chosen_key only for one row. count[rows] must be zero at
// the first launch; each launch leaves them zero. cudaErrorInvalidValue past
// kSampleMaxVocab or kLogprobsMaxRows.
cudaError_t launch_logprobs(const float* logits, int vocab, int rows, const unsigned long long* chosen_key,
                            const int32_t* chosen_id, void* scratch, unsigned int* count, LogprobsOut* out,
                            cudaStream_t stream);

// ---- attention -------------------------------------------------------------

struct RopeArgs {
  int head_dim = 0;
  int n_rot = 0;
  bool neox = false;
  float base = 10000.0f;
  float scale = 1.0f;
  const float* freq_factors = nullptr;  // [n_rot / 2] or null (device)
  // [n_rot / 2] base^(-2i / n_rot) in double, computed once by the host with
  // the same expression as the CPU backend (device); null: computed per call.
  const double* inv_freq = nullptr;
};

// The decode/prefill tail of q, k, v for `n_tokens` rows (one launch): adds
// the biases, applies the per-head RMS norms (qwen3), rotates q and k by
// positions[t], and stores k and v rows into the cache at kv_cells[t]. Any of
// bq/bk/bv/q_norm/k_norm may be null. cache_f16: the cache holds f16 (else f32).
struct QkvTailArgs {
  float* q = nullptr;  // [n_tokens][n_heads * head_dim], rotated in place
  float* k = nullptr;  // [n_tokens][n_kv_heads * head_dim], rotated in place
  const float* v = nullptr;
  const float* bq = nullptr;
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float eps = 1e-6f;
  int n_tokens = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  RopeArgs rope;
  const int32_t* positions = nullptr;  // [n_tokens] device
  const int32_t* kv_cells = nullptr;   // [n_tokens] device
  void* k_cache = nullptr;             // [n_ctx][n_kv_heads * head_dim]
  void* v_cache = nullptr;
  bool cache_f16 = true;
  int32_t* cell_pos = nullptr;         // [n_ctx]: position stored per cell (written for each token)
};
cudaError_t launch_qkv_tail(const QkvTailArgs& a, cudaStream_t stream);
// The same steps as separate launches (the unfused graph, MINFER_NO_FUSE_QKV);
// they run the fused kernel's device functions with its thread mapping, so the
// results are bit-identical. Biases are added by the matvec epilogue or
// launch_add_bias.
// Per-head RMS norm in place: x [n_tokens][n_heads][head_dim], w [head_dim].
cudaError_t launch_head_norm(float* x, int n_tokens, int n_heads, int head_dim, const float* w, float eps,
                             cudaStream_t stream);
// RoPE in place on x [n_tokens][n_heads][head_dim] at positions[t] (device).
cudaError_t launch_rope(float* x, int n_tokens, int n_heads, const RopeArgs& rope, const int32_t* positions,
                        cudaStream_t stream);
// K/V rows → cache cells (and cell_pos), using a.k, a.v, a.kv_cells, a.positions.
cudaError_t launch_kv_store(const QkvTailArgs& a, cudaStream_t stream);

struct AttentionArgs {
  const float* q = nullptr;            // [n_tokens][n_heads * head_dim]
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  bool cache_f16 = true;
  const int32_t* seq_cells = nullptr;  // [n_seq] device
  const int32_t* n_seq = nullptr;      // device scalar: cells in the sequence
  const int32_t* cell_pos = nullptr;   // [n_ctx]
  const int32_t* q_pos = nullptr;      // [n_tokens] device
  int n_tokens = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int max_cells = 0;                   // upper bound of *n_seq (sizes the grid; fixed for graph capture)
  float* out = nullptr;                // [n_tokens][n_heads * head_dim] f32
  Q8Rows out_q;                        // optional Q8 copy of out (the O projection's input)
  void* out_f16 = nullptr;             // optional f16 copy of out (prefill GEMM input)
  X16Order out_f16_order = X16Order::kNatural;  // kLanes: n_heads * head_dim % 128 == 0
  float* partials = nullptr;           // scratch, attention_partials_floats() floats, zeroed before first use
  bool decode_split = false;           // decode: split and combine (below) instead of one launch
  // Decode (split kernel): the cell this step's q/k/v tail writes (device,
  // written before the step; null: unknown). The kernel then stages the
  // other cells' K and V rows before its PDL wait, that one after it.
  const int32_t* kv_cells = nullptr;
};
// Attention for n_tokens == 1 (attention_decode.cu). One launch: a block per
// (query head, 256-cell chunk); a sequence of one chunk is done by one block,
// longer ones are split and the last block of each head combines the chunks
// (counters at the end of `partials`, left at zero by every launch: zero the
// scratch once before the first). With decode_split (even head dims): split-K
// in one launch, a block per (KV head, range of cells) for the whole query
// group (each K/V row read once, not once a query head: faster deep into long
// contexts), as many ranges as fill the GPU, and the last block of each KV
// head combines them.
size_t attention_partials_floats(int n_heads, int head_dim, int max_cells);
cudaError_t launch_attention_decode(const AttentionArgs& a, cudaStream_t stream);
// Cells a block of the one-launch decode attention takes: sequences of up to
// this many are done by one block a head, with no combine.
constexpr int kAttentionChunkCells = 256;
// Kernels launch_attention_decode launches: one (and a Q8 quantization when
// the head dimension is not a multiple of 32).
int attention_decode_launches(const AttentionArgs& a);
// Flash attention for prefill (n_tokens ≥ 1): tiles of 64 queries against
// streamed K/V tiles on tensor cores (mma.sync f16, f32 accumulate), online
// softmax, causal mask from device positions. head_dim 64 or 128.
bool attention_prefill_supported(int head_dim);
cudaError_t launch_attention_prefill(const AttentionArgs& a, cudaStream_t stream);
// Any head_dim ≤ 256, any n_tokens, without tensor cores: one block per
// (token, KV head) walks the history with an online softmax. The prefill path
// for head dims the flash kernel lacks, and the A/B reference for it
// (MINFER_NO_FA_PREFILL).
cudaError_t launch_attention_generic(const AttentionArgs& a, cudaStream_t stream);

// ---- launch ------------------------------------------------------------------

// Programmatic dependent launch for every kernel launched from now on (only
// on sm_90+ devices: the caller checks). Off by default.
void set_pdl(bool on);
// Threads a block of the one-launch decode attention (attention_decode.cu):
// 256 or 512, or 0 (the default) for 512 on head dims of 128 and more and
// 256 below. Other bits of the sums either way (the cells are shared out
// between twice the thread groups), each within rounding of the reference.
void set_attention_threads(int threads);
int attention_threads();
// Whether the one-launch decode kernel copies each block's V rows into shared
// memory with its K loads (cp.async, sm_80; rows of up to 256 bytes whose
// pieces a warp holds) instead of pulling them into L1 (on by default). The
// same bits either way.
void set_attention_stage_v(bool on);
bool attention_stage_v();
// Launches that staged them so far (tests check that the path ran).
uint64_t attention_staged_v_launches();
// Whether its blocks load as many K rows at once as the cells they hold need
// (2, 4, 8 or 16 a thread, picked on the device from the sequence's length)
// instead of always 16 (on by default). The same bits either way.
void set_attention_fit_batch(bool on);
bool attention_fit_batch();
// Whether its blocks for the models' head shapes with an f16 cache (head dims
// 64 and 128, either block size) take kernels compiled for that shape rather
// than the one that reads the shape from its arguments (on by default). The
// same bits either way. The split kernel (below) takes it too: head dims 64
// and 128 with up to 8 query heads a KV head, either cache type (the same
// bits as its general form).
void set_attention_fixed_shape(bool on);
bool attention_fixed_shape();
// Splits a KV head of the split decode attention: 0 (the default) as many as
// fill the GPU once (its SMs over the KV heads), else that many, up to twice
// the default. For A/B runs and tests (1: one block walks the whole sequence
// in passes; a few: the combine over long ranges).
void set_attention_split_blocks(int blocks);
int attention_split_blocks();
// Launches of the split decode attention so far (tests check which variant ran).
uint64_t attention_split_launches();
// Launches of the shape-compiled kernels so far, the split kernel's among
// them (tests check that the path ran).
uint64_t attention_fixed_shape_launches();
// How decode matvecs schedule a row's loads (dot.cuh row_dot_t): 0 one unit
// at a time (the loop checks each index), 1 groups of units whose loads are
// all issued first, 2 groups twice as large; -1 (the default) picks per
// launch from the kernel, the weight type and the row width (matvec_kernels.cuh). The
// sums are the same bits either way. For A/B runs and tests.
void set_matvec_schedule(int schedule);
int matvec_schedule();
// Lanes a row in the decode matvecs and gate/up of quantized weights: 32 (a
// warp a row) or 8 (a quarter-warp a row, four rows a warp); 0 (the
// default) picks per launch (matvec_kernels.cuh). The same bits either way.
void set_matvec_lanes(int lanes);
int matvec_lanes();
// Decode matvecs of short rows a quarter-warp a row (schedule 2) in launches
// of at most one block an SM, and gate/up of such rows in launches of at
// most two: the weights go into registers before the PDL wait
// (matvec_kernels.cuh kPreload). On by default; the same bits either way.
void set_matvec_preload(bool on);
bool matvec_preload();
// Decode matvecs of two weight types in one launch (q/k/v of the K-quant
// mixes) on a kernel compiled for both (matvec.cu kTwoTypes) instead of the
// one that reads each unit's type at run time. On by default; the same bits
// either way.
void set_matvec_two_types(bool on);
bool matvec_two_types();
// Launches that took a two-type kernel so far (tests check that it ran).
uint64_t matvec_two_type_launches();
// Decode matvecs and gate/up whose weights stream through shared memory by
// bulk copies (matvec_stream.cu; sm_90 and later only: the caller checks).
// Applies to Q8_0, Q4_K, Q5_K and Q6_K weights of one type a launch, without
// the norm prologue; the results are the same bits as the plain kernels'.
// Off by default.
void set_matvec_stream(bool on);
bool matvec_stream();
// Streamed launches so far (tests and benchmarks check that the path ran).
uint64_t matvec_stream_launches();
// For benchmarks: warps a block (matvec only, 1-8), units a slice (32 or 64)
// and stages (2-8, fewer if they do not fit); 0 keeps the default.
void set_matvec_stream_shape(int warps, int units, int stages);

// Decode matvecs and gate/up with each lane's weights pipelined through
// shared memory (matvec_piped.cu; sm_80 and later): rows of at least 32
// units a warp a row, one type a launch (matvec: Q8_0, Q4_K, Q5_K, Q6_K;
// gate/up: Q8_0, Q4_K), with the deferred norm's scale but without the norm
// prologue or the tail norm. Mode 0 off, 1 every such launch, -1 (the
// default) those of at least 16 MiB of weights. The same bits as the plain
// kernels either way.
void set_gate_up_piped(int mode);
int gate_up_piped();
void set_matvec_piped(int mode);
int matvec_piped();
// Pipelined launches so far (tests and benchmarks check that the path ran).
uint64_t piped_launches();
// Whether these weights take the pipelined kernel on this device when every
// launch is asked to (mode 1): a type and rows it takes, and stages that fit
// a block's shared memory — Jetson Orin's 163 KiB (MINFER_DEVICE_SHAPE=orin)
// holds no gate/up of 7B's 18,944-wide Q8_0 rows, which the H200's 227
// holds. `deferred`: with the deferred norm's scale. Tests.
bool matvec_fits_piped(const MatvecTask* tasks, int n_tasks, bool deferred);
bool gate_up_fits_piped(const DeviceWeight& gate, const DeviceWeight& up, bool deferred);
// Steps of weights a pipelined launch keeps in flight (stages): as many as
// fit, at least 2 and at most kDefaultPipedStages unless set_piped_stages
// gives another limit (2 to 8; 0: the default). set_piped_early: how many of
// them a warp issues before the PDL wait (0: all). The same bits either way.
// last_piped_stages: the last pipelined launch's stages (tests, benchmarks).
constexpr int kDefaultPipedStages = 4;
void set_piped_stages(int max_stages);
void set_piped_early(int steps);
int last_piped_stages();

// ---- the bridge between two sub-layers (decode) ----------------------------

// One launch for a seam of a decode step (matvec_bridge.cu; sm_80 and
// later): a pipelined product that adds to the residual stream (attn_output,
// ffn_down), the deferred norm of the stream it completes, and the
// pipelined products of that norm (gate/up + SwiGLU, or q, k and v). Every
// block waits at a barrier in global memory for the whole stream, then
// normalises it itself; the products' weights stream on meanwhile. The same
// bits as launch_matvec with the residual, launch_rms_norm_deferred and
// launch_gate_up_swiglu / launch_matvec with defer_scale, one after the
// other.
struct BridgeArgs {
  MatvecTask product;  // accumulate = true, y = the residual stream ([product.w.n_rows])
  Q8Rows x;            // the product's input
  const float* norm_w = nullptr;
  float norm_eps = 0.0f;
  Q8Rows norm_q;                // the deferred norm's outputs, as
  float* norm_scale = nullptr;  // launch_rms_norm_deferred writes them
  // Then either gate/up + SwiGLU of the norm (gate.q set; the outputs of
  // launch_gate_up_swiglu) ...
  DeviceWeight gate, up;
  float* h = nullptr;
  Q8Rows hq;
  // ... or up to three matvecs of it, of one type (n_next; without argmax).
  MatvecTask next[kMaxMatvecTasks];
  int n_next = 0;
  // Two words of device memory, zeroed once before the first launch; the
  // launches keep them. Launches that use one pair must not run at once.
  unsigned int* barrier = nullptr;
};
// cudaErrorNotSupported, launching nothing, where the bridge does not apply
// (mode off, a device before sm_80, types without a pipelined kernel or
// pair, rows of fewer units than a warp has lanes, unaligned planes, a
// shape whose stages do not fit); the caller then launches the three steps.
// Mode 0 off (the default: slower than the three launches on the H200,
// matvec_bridge.cu), 1 every such seam, -1 where the second product would
// be pipelined (set_gate_up_piped, set_matvec_piped). Its grid is one block
// an SM and needs every block resident at once: a device shared with other
// work may hold it at the barrier, which the bounded wait turns into a
// wedge.
cudaError_t launch_bridge(const BridgeArgs& a, cudaStream_t stream);
void set_bridge(int mode);
int bridge();
// Bridge launches so far (tests and benchmarks check that the path ran).
uint64_t bridge_launches();
// Diagnostics (gpu_decode_timeline): with a zeroed device buffer of
// 2 * kBridgeProbeBlocks * kBridgeProbeFields words set, every bridge launch
// adds, for each of its first kBridgeProbeBlocks blocks, at [kind][block]
// (kind 1: into gate/up): 1 to field 0, then the SM cycles the block spent
// up to its input staged (the PDL wait), on the first product, at the
// barrier, on the norm, and on the second product. nullptr: off.
constexpr int kBridgeProbeBlocks = 256;
constexpr int kBridgeProbeFields = 6;
cudaError_t set_bridge_probe(unsigned long long* buf);

// Phase probes of two latency-bound kernels of a decode step: with a zeroed
// buffer of kPhaseProbeKinds * kPhaseProbeFields words set, thread 0 of every
// block of decode attention's one-launch kernel over one chunk (kind 0:
// before the wait, the wait, the scores, their max, the sum of exp, the
// weighted V sum, the cell groups' sum, the output) and of the deferred norm
// (kind 1: before the wait, the wait, the pass over x, the scale) and of the
// pipelined gate/up (kind 2: the first stages out and the wait, the
// activations staged, the rows, the Q8 blocks of h; then the slowest
// block's rows (a maximum), and the rows and count of the blocks with a
// group of 32 rows more than the fewest) and of the sampling draw (kind 3,
// every block: the wait, its keys loaded and sorted by thread, the bound,
// its candidates sorted, its list published; kind 4, the last block: the
// merge, the weights, the pick) and of the split decode attention (kind 5,
// every block: before the wait, the wait, the K/V rows staged, the scores,
// the softmax, the V sums — each summed over the block's passes — then the
// partial written and counted, or the output where one block takes the
// sequence; kind 6, the last block of a KV head: the splits' statistics
// loaded, their weights, the sums over the splits, the output) adds 1 to
// its kind's word 0 and each phase's SM clock cycles to the words after it
// (tests/gpu/decode_timeline.cpp, MINFER_PHASE_PROBE=1, prints their means).
// Null (the default): off. Compiled in only with -DMINFER_PHASE_PROBES=ON
// (cudaErrorNotSupported otherwise): the kernels' code is then unchanged.
constexpr int kPhaseProbeKinds = 7;
constexpr int kPhaseProbeFields = 9;
cudaError_t set_phase_probe(unsigned long long* buf);

// ---- the device --------------------------------------------------------------

// What the launchers size their grids and shared memory by: the current
// device's SM count, the dynamic shared memory a block may opt into, its
// compute capability — no newer than the kernels' own code (kernels_ptx_arch)
// — and what an SM holds (shared memory, threads, blocks); zeros where the
// runtime cannot tell. Asked once a process. Where
// MINFER_DEVICE_SHAPE names a smaller device (below), each is the smaller of
// the device's and the shape's, and `shaped` says so.
struct DeviceLimits {
  int sms = 0;
  int max_smem = 0;
  int cc_major = 0, cc_minor = 0;
  int smem_per_sm = 0;
  int threads_per_sm = 0;
  int blocks_per_sm = 0;
  bool shaped = false;
};
DeviceLimits device_limits();

// A smaller device for the one present to run as: MINFER_DEVICE_SHAPE, read
// once a process. The product runs on Jetson Orin (sm_87: 16 SMs on AGX Orin
// 64 GB, 163 KiB of shared memory a block, 1,536 threads and 16 blocks an
// SM) and is tested on an H200 (sm_90: 132 SMs, 227 KiB, 2,048 threads, 32
// blocks). Shaped as Orin, the H200 takes Orin's launch shapes — grids over
// 16 SMs, pipelines cut to its shared memory, the products that then do not
// fit on their plain kernels, no programmatic dependent launch (sm_90 only)
// — and with kernels built for compute_87 alone (CMAKE_CUDA_ARCHITECTURES=
// 87-virtual, JIT-compiled by the driver) Orin's device code too; only its
// clocks and its memory are not Orin's. tests/gpu/run_on_device.sh jetson
// runs the GPU suites so.
//
// The text: a preset, then `key=value` overrides, comma-separated; or only
// overrides. Presets: `orin` (Jetson AGX Orin 64 GB, as above). Keys: `sms`
// (Orin NX and Orin Nano 8 GB have 8, Orin Nano 4 GB 4, AGX Orin 32 GB 14),
// `cc` (8.7 or 87), `smem_per_block`, `smem_per_sm` (bytes),
// `threads_per_sm`, `blocks_per_sm`. A field left out is the device's.
struct DeviceShape {
  std::string name;  // the preset, or "custom"
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  int smem_per_block = 0;
  int smem_per_sm = 0;
  int threads_per_sm = 0;
  int blocks_per_sm = 0;
};
// nullopt with *error saying which part does not parse.
std::optional<DeviceShape> parse_device_shape(std::string_view text, std::string* error);
// MINFER_DEVICE_SHAPE's shape (nullopt when unset or empty); *error is set
// when it is given but does not parse (the limits are then the device's:
// the CUDA backend refuses to start, cuda_util.cpp).
const std::optional<DeviceShape>& device_shape(std::string* error);
// The virtual architecture (PTX) the kernels on this device came from, as
// 10 * major + minor (87, 90), or 0 where the runtime cannot tell: with a
// shape, whether the device code is the shape's or the device's own.
int kernels_ptx_arch();
// Blocks of an empty kernel an SM holds with `threads` threads and `smem`
// bytes of dynamic shared memory, as the launchers reckon it (launch.cuh's
// blocks_per_sm: the shape's SM where there is one). Tests.
int empty_kernel_blocks_per_sm(int threads, size_t smem);

// ---- faults (tests only) ---------------------------------------------------

// A kernel that spins until *release != 0 or `max_ns` pass (fault injection
// for the bounded-wait tests; never launched by the serving path).
cudaError_t launch_spin(const volatile int32_t* release, int64_t max_ns, cudaStream_t stream);

}  // namespace minfer::kernels

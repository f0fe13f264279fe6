#include "engine/backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "engine/backend/cuda/bounded_wait.h"
#include "engine/backend/cuda/cublas_loader.h"
#include "engine/backend/cuda/repack.h"
#include "engine/sampling/top_k_draw.h"
#include "platform/log.h"

namespace minfer {
namespace {

using Clock = std::chrono::steady_clock;

Status cublas_check(cublasStatus_t st, const char* call, const char* file, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return ok_status();
  const ErrorCode code = st == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kOutOfMemory : ErrorCode::kDevice;
  return unexpected(code, fmt::format("cuBLAS error {} in {} at {}:{}", static_cast<int>(st), call, file, line));
}
#define CUBLAS_TRY(call) MINFER_TRY(cublas_check((call), #call, __FILE__, __LINE__))

bool has_q8_copy(Buf b) { return b == Buf::kXNorm || b == Buf::kAttn || b == Buf::kGate; }

// The widest row whose RMS norm folds into the next matvec unless
// MINFER_FUSE_NORM says otherwise (see prepare()).
constexpr int kFuseNormMaxWidth = 1024;

}  // namespace

CudaBackend::CudaBackend(cuda::DeviceFacts facts) : facts_(std::move(facts)) {}

CudaBackend::~CudaBackend() {
  for (auto& [g, c] : captured_) {
    if (c.exec) cudaGraphExecDestroy(c.exec);
  }
  if (cublas_ && blas_) blas_->destroy(static_cast<cublasHandle_t>(cublas_));
  for (void* p : weight_mem_) cudaFree(p);
  for (Slot& slot : slots_) {
    if (slot.h_header) cudaFreeHost(slot.h_header);
    if (slot.h_seq_cells) cudaFreeHost(slot.h_seq_cells);
    if (slot.h_argmax_key) cudaFreeHost(slot.h_argmax_key);
    if (slot.h_argmax) cudaFreeHost(slot.h_argmax);
    if (slot.h_logprobs) cudaFreeHost(slot.h_logprobs);
    if (slot.done) cudaEventDestroy(slot.done);
  }
  if (h_logits_) cudaFreeHost(h_logits_);
  if (h_row_logprobs_) cudaFreeHost(h_row_logprobs_);
  // A stall left unreleased would keep the device busy for its 30 s.
  debug_release_stall();
  if (done_) cudaEventDestroy(done_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string CudaBackend::description() const {
  return fmt::format("{}, graphs {}", facts_.describe(), graphs_enabled_ ? "on" : "off");
}

bool CudaBackend::supports(Op op) const {
  // A draw in the step takes vocabularies up to kSampleMaxVocab (asked after prepare()).
  if (op == Op::kSample || op == Op::kLogprobs) return config_.vocab_size <= kernels::kSampleMaxVocab;
  return op != Op::kCount;
}

bool CudaBackend::supports_weight_type(DType type) const {
  return kernels::wtype_supported(static_cast<uint32_t>(type), dtype_traits(type).block_elems);
}

kernels::DeviceWeight CudaBackend::dw(const Weight& w) const { return dweights_.at(w.data); }

const float* CudaBackend::dv(const Weight* w) const {
  if (w == nullptr) return nullptr;
  return dvectors_.at(w->data);
}

kernels::RopeArgs CudaBackend::rope_args() const {
  kernels::RopeArgs r;
  r.head_dim = config_.head_dim;
  r.n_rot = config_.n_rot;
  r.neox = config_.rope_type == RopeType::kNeox;
  r.base = config_.rope_base;
  r.scale = config_.rope_scale;
  r.freq_factors = weights_->rope_freqs.present() ? dv(&weights_->rope_freqs) : nullptr;
  r.inv_freq = inv_freq_;
  return r;
}

void CudaBackend::wedge(const std::string& why) {
  if (wedged_.empty()) {
    wedged_ = why;
    log::error("cuda backend wedged: {}", why);
  }
}

Status CudaBackend::prepare(const ModelConfig& config, const ModelWeights& weights, const BackendOptions& options) {
  if (options.n_ctx <= 0 || options.max_tokens <= 0) {
    return unexpected(ErrorCode::kInvalidArgument, fmt::format("cuda backend: n_ctx {} and max_tokens {} must be positive",
                                                               options.n_ctx, options.max_tokens));
  }
  if (options.kv_type != DType::kF16 && options.kv_type != DType::kF32) {
    return unexpected(ErrorCode::kUnsupported, fmt::format("cuda backend: KV cache type {} is not supported; use f16 or f32",
                                                           dtype_name(options.kv_type)));
  }
  const int group = config.n_heads / config.n_kv_heads;
  if (config.head_dim > 256 || group > 16) {
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("cuda backend: head_dim {} (max 256) or query group {} (max 16) is beyond the attention "
                                  "kernels",
                                  config.head_dim, group));
  }
  config_ = config;
  weights_ = &weights;
  options_ = options;
  graphs_enabled_ = options.cuda_graphs;
  // Decode attention (cuda_backend.h, attn_mode_): a block a query head
  // (heads) until a layer's K/V rows reach kSplitKvBytes or the sequence
  // kSplitMaxCells cells, then a block a KV head and range of cells (split).
  // The heads kernel reads each K/V row once a query head, from L2 after the
  // first, and takes fewer round trips; the split kernel reads each once.
  // tg128 tok/s, heads / split, same build and run (H100, 2026-12-06,
  // bench/results/2026-12-06-session51, run 4): 7B Q4_K_M (4 KV heads of
  // 128: 2 KiB of K/V a layer a cell) 2,048 deep 417 / 408, 4,096 deep 365 /
  // 394, 8,192 deep 306 / 358; 0.5B Q8_0 (2 KV heads of 64: 512 bytes a
  // cell) 4,096 deep 1,505 / 1,373, 8,192 deep 1,227 / 1,296. So 8 MiB (4,096
  // cells on 7B) or 8,192 cells, whichever comes first: each point measured
  // falls on its faster side. (Session 36 had set 8 MiB alone from H200 runs
  // of the split kernel before its V sums took a pair of dimensions of every
  // head a thread.)
  const char* attn = std::getenv("MINFER_ATTN_DECODE");
  const std::string_view attn_sv = attn != nullptr ? attn : "";
  attn_mode_ = attn_sv == "split" ? AttnDecode::kSplit : attn_sv == "heads" ? AttnDecode::kHeads : AttnDecode::kAuto;
  // The one-launch kernel's blocks: 512 threads on head dims of 128 and
  // more, 256 below (kernels.h), unless MINFER_ATTN_THREADS=256|512 forces
  // one (A/B runs).
  const char* attn_threads = std::getenv("MINFER_ATTN_THREADS");
  kernels::set_attention_threads(attn_threads != nullptr ? std::atoi(attn_threads) : 0);
  // Its V rows staged in shared memory with the K loads unless
  // MINFER_ATTN_STAGE_V=0 (A/B runs; the same bits either way).
  const char* stage_v = std::getenv("MINFER_ATTN_STAGE_V");
  kernels::set_attention_stage_v(stage_v == nullptr || std::string_view(stage_v) != "0");
  // Its K loads batched to the cells a block holds unless
  // MINFER_ATTN_FIT_BATCH=0 (A/B runs; the same bits either way).
  const char* fit_batch = std::getenv("MINFER_ATTN_FIT_BATCH");
  kernels::set_attention_fit_batch(fit_batch == nullptr || std::string_view(fit_batch) != "0");
  // Its kernels compiled for the models' head shapes unless
  // MINFER_ATTN_FIXED_SHAPE=0 (A/B runs; the same bits either way).
  const char* fixed_shape = std::getenv("MINFER_ATTN_FIXED_SHAPE");
  kernels::set_attention_fixed_shape(fixed_shape == nullptr || std::string_view(fixed_shape) != "0");
  constexpr int64_t kSplitKvBytes = int64_t{8} << 20;
  constexpr int64_t kSplitMaxCells = 8192;
  const int64_t kv_cell_bytes = int64_t{2} * config.n_kv_heads * config.head_dim * (options.kv_type == DType::kF16 ? 2 : 4);
  attn_split_cells_ = static_cast<int>(
      std::max<int64_t>(kernels::kAttentionChunkCells, std::min(kSplitMaxCells, kSplitKvBytes / kv_cell_bytes)));
  if (const char* cells = std::getenv("MINFER_ATTN_SPLIT_CELLS"); cells != nullptr && std::atoi(cells) > 0) {
    attn_split_cells_ = std::atoi(cells);
  }
  // The split kernel's blocks a KV head (kernels.h set_attention_split_blocks;
  // 0 or unset: as many as fill the GPU once). For A/B runs.
  const char* split_blocks = std::getenv("MINFER_ATTN_SPLIT_BLOCKS");
  kernels::set_attention_split_blocks(split_blocks != nullptr ? std::atoi(split_blocks) : 0);
  const char* split_early = std::getenv("MINFER_ATTN_SPLIT_EARLY");
  attn_split_early_ = split_early == nullptr || std::string_view(split_early) != "0";
  // Programmatic dependent launch overlaps each kernel's launch with its
  // predecessor's run (Hopper and newer, with kernels built for it: the
  // capability kernels::device_limits gives); MINFER_NO_PDL=1 turns it off.
  const char* no_pdl = std::getenv("MINFER_NO_PDL");
  kernels::set_pdl(kernels::device_limits().cc_major >= 9 && (no_pdl == nullptr || std::string_view(no_pdl) == "0"));
  // Every kernel triggers right after its wait. Tried on the H200
  // (2026-12-02, not kept): the deferred norm, the q/k/v tail and decode
  // attention triggering at their start, so that the next kernel's blocks
  // take SMs and load earlier — tg128 7B Q4_K_M 526 / 534 / 530 / 526 tok/s
  // (as now / the norm / tail and attention / all three), Q8_0 407 / 404 /
  // 405 / 408, 0.5B Q8_0 1,885 / - / 1,850 / 1,900 (same run): time moved
  // between neighbours (all three on 7B Q8_0: attention 8.95 → 6.92 µs a
  // launch, attn_output 2.87 → 4.10, q/k/v 6.08 → 7.87;
  // bench/results/2026-12-02-h200-session18).
  // Folding a layer's one-row RMS norms into the matvecs that read them
  // (q/k/v, gate/up) saves 2 launches a layer, but every block of the matvec
  // redoes the norm in a prologue (matvec_kernels.cuh), before its weights stream. On
  // the H200 (2026-12-01, same run) that won on narrow rows and lost on wide
  // ones: 0.5B Q8_0 (896) tg128 1,083 / 1,062 vs 1,019 tok/s apart; 7B
  // Q4_K_M (3,584) 275 vs 336. So by default rows of at most
  // kFuseNormMaxWidth fold; MINFER_FUSE_NORM=0|1 forces either way (the same
  // bits either way). Also tried there (2026-12-01, not kept): 7B's norms
  // folded only into the pipelined products, whose blocks (one an SM) would
  // normalise the row once an SM — 7B Q4_K_M tg128 447 vs 464 tok/s, Q8_0
  // 385 vs 404: without the one-block norm launch before it, gate/up's
  // blocks can no longer become resident while it runs, and start late
  // (bench/results/2026-12-01-h200-session12). Nor (H200, 2026-12-03, not
  // kept) the norm folded at every width into q/k/v alone, the deferred
  // prologue in each of 7B's 1,152 q/k/v blocks: q/k/v 4.8-5.2 → 19.7-20.1
  // µs a layer, the norm launch it saved 4.7; CUPTI step 7B Q4_K_M 1,680.1
  // → 2,032.3 µs, Q8_0 2,236.8 → 2,516.7, 0.5B Q8_0 (its gate/up's norm then
  // a launch) 446.4 → 462.6 (bench/results/2026-12-03-h200-session25).
  // Nor (H200, 2026-12-04, same builds and runs, not kept) q, k and v in one
  // pipelined block an SM that copies all its rows' weights (a 7B block: ~35
  // rows, 70 KB) before the PDL wait, normalises the row itself after it and
  // ends with the q/k/v tail, so that the norm before q/k/v is no launch: the
  // same bits (kernel and engine tests), one launch a layer fewer, and the
  // seam as long — its share 9.3-10.1 µs a 7B Q4_K_M layer against the norm
  // launch's 4.7 and q/k/v's 4.7-5.2 (phase probe: the row behind the
  // weights in flight 2.6 µs, warp 0's rows 2.4, the tail 1.1); its row
  // loaded before the later stages went out, or 0-2 steps before the wait,
  // moved nothing. tg128 7B Q4_K_M 584-590 vs 588-592 tok/s, Q8_0 439-445
  // vs 442-447, 1.5B Q8_0 1,031-1,033 vs 1,084-1,086
  // (bench/results/2026-12-04-h200-session37, qkv-piped.patch).
  // Nor (H200, 2026-12-03, same build and run, not kept) the one-block norm
  // split into blocks of 8-32 of the row's 32-element groups, each writing
  // its Q8 groups and sums of squares, every product working the scale out
  // from the sums (the same bits): the norm's share fell 4.62 → 1.37 µs and
  // gate/up's rose 20.69 → 25.71, its duration unmoved — the products after a
  // norm launch when it passes its wait and take as long from their start, so
  // a shorter norm only takes away the time they load weights in before their
  // own wait; tg128 7B Q4_K_M 580 vs 567-569 tok/s, Q8_0 435 vs 423-430, 1.5B
  // Q4_K_M 1,092 vs 1,072-1,076. Nor the norm (either form) triggering its
  // readers' launch before its wait: 7B Q4_K_M 580 → 585-589, Q8_0 438 →
  // 438-441, 1.5B 1,101 → 1,075-1,079 (bench/results/2026-12-03-h200-session26).
  // Nor (H200, 2026-12-03, same build and run, not kept) the norm before
  // gate/up worked out by each pipelined gate/up block from the stream (its
  // staged activations written by the deferred norm's code, the scale from
  // its own block sums; the same bits, no norm launch): the norm's 4.51 µs
  // went and gate/up's share grew 21.23 → 25.62 µs, attn_output's 3.87 →
  // 5.22 (gate/up now the launch behind it); CUPTI step
  // 7B Q4_K_M 1,693.4 → 1,706.0 µs, Q8_0 2,259.9 → 2,294.2; tg128 7B Q4_K_M
  // 584 / 588 vs 577 / 573 tok/s, Q8_0 437 / 439 vs 428 / 426
  // (bench/results/2026-12-03-h200-session28, run3-tree.patch).
  // Matvec load schedule (kernels.h): picked per launch unless
  // MINFER_MATVEC_SCHEDULE=0|1|2 forces one (A/B runs).
  const char* schedule = std::getenv("MINFER_MATVEC_SCHEDULE");
  const std::string_view sched = schedule != nullptr ? schedule : "";
  kernels::set_matvec_schedule(sched == "0" ? 0 : sched == "1" ? 1 : sched == "2" ? 2 : -1);
  // Lanes a row in the quantized decode matvecs (kernels.h): picked per
  // launch unless MINFER_MATVEC_LANES=8|32 forces one (A/B runs).
  const char* lanes = std::getenv("MINFER_MATVEC_LANES");
  const std::string_view lanes_sv = lanes != nullptr ? lanes : "";
  kernels::set_matvec_lanes(lanes_sv == "8" ? 8 : lanes_sv == "32" ? 32 : 0);
  // Short-row matvecs of one wave load their weights into registers before
  // the PDL wait (kernels.h) unless MINFER_MATVEC_PRELOAD=0 (A/B runs).
  const char* preload = std::getenv("MINFER_MATVEC_PRELOAD");
  kernels::set_matvec_preload(preload == nullptr || std::string_view(preload) != "0");
  // Two-type q/k/v launches on kernels compiled for both types (kernels.h)
  // unless MINFER_MATVEC_TWO_TYPES=0 (A/B runs).
  const char* two_types = std::getenv("MINFER_MATVEC_TWO_TYPES");
  kernels::set_matvec_two_types(two_types == nullptr || std::string_view(two_types) != "0");
  // Decode matvecs whose weights stream through shared memory by bulk copies
  // (kernels.h; sm_90 and newer): opt-in (MINFER_MATVEC_STREAM=1) while they
  // lose to the plain kernels on the H200 (7B gate/up Q4_K 37.5 vs 29.7 µs;
  // bench/results/2026-11-30-h200-session4). The same bits either way.
  const char* stream_env = std::getenv("MINFER_MATVEC_STREAM");
  kernels::set_matvec_stream(kernels::device_limits().cc_major >= 9 && stream_env != nullptr && std::string_view(stream_env) == "1");
  // Decode matvecs and gate/up pipelined through shared memory (kernels.h):
  // launches of at least 16 MiB of weights unless
  // MINFER_MATVEC_PIPED / MINFER_GATE_UP_PIPED say 0 (none) or 1 (every
  // eligible one; A/B runs). The same bits either way.
  auto piped_mode = [](const char* name) {
    const char* v = std::getenv(name);
    const std::string_view sv = v != nullptr ? v : "";
    return sv == "0" ? 0 : sv == "1" ? 1 : -1;
  };
  kernels::set_matvec_piped(piped_mode("MINFER_MATVEC_PIPED"));
  kernels::set_gate_up_piped(piped_mode("MINFER_GATE_UP_PIPED"));
  // A seam between sub-layers (residual product, deferred norm, the norm's
  // products) in one launch (kernels::launch_bridge): opt-in, where the
  // second product is pipelined with MINFER_BRIDGE=1, at every eligible seam
  // with MINFER_BRIDGE=all (A/B runs). The same bits either way. Off by
  // default: on the H200 (2026-12-02, bench/results/2026-12-02-h200-session16)
  // it lost — tg128 7B Q4_K_M 433-454 vs 500-502 tok/s, Q8_0 365-367 vs
  // 407-409 — as each block's barrier and norm took 4.6 and 5 µs, the
  // one-block norm launch it replaces 5.4 and 3.6.
  const char* bridge = std::getenv("MINFER_BRIDGE");
  const std::string_view bridge_sv = bridge != nullptr ? bridge : "";
  kernels::set_bridge(bridge_sv == "all" ? 1 : bridge_sv == "1" ? -1 : 0);
  // Their steps of weights in flight, and how many go out before the PDL
  // wait: kernels.h's defaults unless MINFER_PIPED_STAGES=N (2-8) or
  // MINFER_PIPED_EARLY=N say otherwise (A/B runs; the same bits either way).
  auto env_int = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::atoi(v) : 0;
  };
  kernels::set_piped_stages(env_int("MINFER_PIPED_STAGES"));
  kernels::set_piped_early(env_int("MINFER_PIPED_EARLY"));
  // The few-token prefill products' loads (kernels.h set_gemm_fused_stages):
  // MINFER_GEMM_FUSED_STAGES=1 into registers at every size, as before
  // 2026-12-06, =8 pipelined at every size (A/B runs; the same bits).
  kernels::set_gemm_fused_stages(env_int("MINFER_GEMM_FUSED_STAGES"));
  // MINFER_GEMM_FUSED_GENERIC=1: every weight type's values through the
  // element-wise dequantizer instead of unpacked from 16-byte loads (A/B
  // runs; the same operands, within f32 rounding).
  kernels::set_gemm_fused_generic(env_int("MINFER_GEMM_FUSED_GENERIC") == 1);
  // MINFER_GEMM_FUSED_TILES=4 or 8: the token tiles a block in steps of more
  // than 32 tokens whatever the weight's rows (A/B runs; the same bits).
  kernels::set_gemm_fused_tiles(env_int("MINFER_GEMM_FUSED_TILES"));
  // Tried on the H200 (2026-12-01, not kept): the first rows each pipelined
  // gate/up block reads pulled into L2 while attention leaves DRAM idle —
  // spare blocks of the q/k/v tail issuing cp.async.bulk.prefetch.L2 after
  // their wait, 15-45 MiB. The tail then lasted until its bulk requests
  // drained (16 µs a layer on 7B Q8_0, 36 on Q4_K_M, instead of 2), and
  // gate/up was no faster with its first rows in L2 (35.25 vs 35.48 µs a
  // layer on Q8_0, 24.65 vs 24.88 on Q4_K_M): tg128 7B Q4_K_M 336 vs 486
  // tok/s, Q8_0 355 vs 408 (bench/results/2026-12-01-h200-session13).
  // Nor, on the H200 (2026-12-02, not kept), each block's *next* rows (its
  // second group: rows its stages do not cover before the wait), pulled by
  // decode attention's threads once their own loads were out (a line a
  // lane, with evict_last, or a bulk prefetch a range; 8-24 MiB): tg128 7B
  // Q8_0 385-396 vs 399 tok/s, Q4_K_M 501-509 vs 513; gate/up 34.87 → 34.38
  // µs a layer with 16 MiB, attention 10.90 → 13.81
  // (bench/results/2026-12-02-h200-session19).
  // Nor (H200, 2026-12-04, not kept) a layer's later weights (attn_output,
  // gate/up, ffn_down: 15 MB on 0.5B, up to half the L2) pulled into the L2
  // by a kernel on a side stream, forked by an event after the layer's first
  // product and joined at the step's end, so that no kernel of the chain
  // carried the pull: the same bits, but 0.5B Q8_0's CUPTI step 449.7 →
  // 462.1 µs, tg128 2,209 / 2,217 → 2,158 / 2,159 tok/s, 1.5B Q4_K_M 1,120 /
  // 1,116 → 1,104 / 1,101, eager 0.5B 1,949 / 1,851 → 1,556 / 1,489. The
  // small products already load their weights before their PDL wait; what
  // their step waits for is the chain, not the bytes
  // (bench/results/2026-12-04-h200-session34, run1-tree.patch).
  // Nor (H200, 2026-12-04, same build and run, not kept) for 7B, whose
  // layers do not fit: 32-96 rows of each pipelined gate/up block (those
  // after the ones its stages copy before its wait; 17-51 MB) pulled the
  // same way once the layer's q/k/v or attention was launched: the same
  // bits, but the pull's DRAM traffic slowed the seam more than gate/up
  // gained (CUPTI, 64 rows: attention 3.93 → 7.18 µs a layer, gate/up 20.83
  // → 19.95; step 1,693.9 → 1,780.2 µs); tg128 7B Q4_K_M 588 → 554-582
  // tok/s, Q8_0 442 → 391-425 (bench/results/2026-12-04-h200-session37,
  // l2-pull-rows.patch).
  // MINFER_NORM_TAIL=1: a norm of the residual stream right after the
  // product that adds to it rides on that product's last block (one launch
  // fewer, the same bits). Opt-in: on the H200 (2026-12-01, same run) the
  // one block normalising the whole row after everyone else took longer
  // than the launch it saves on wide rows and tied on narrow ones: 7B Q4_K_M
  // tg128 353 vs 381 tok/s, Q8_0 289 vs 308, 0.5B Q8_0 1,355 vs 1,334.
  // Also tried there (2026-12-01, not kept): the deferred norm written by
  // the product's own blocks of 32 rows (each block's quad writing its Q8
  // block and sum of squares, the consumers taking the scale from the
  // sums; no count across blocks, the same bits) — 1024-thread blocks, a
  // block an SM, 112 of 132 SMs for 3,584 rows: the products grew by what
  // the norm launch cost (7B ffn_down Q6_K 16.5 → 23.5 µs a layer, Q4_K
  // 7.9 → 10.3), tg128 7B Q4_K_M 408 vs 411 tok/s, Q8_0 321 vs 319, and
  // 1.5B (48 blocks for 1,536 rows) 773 vs 907. Nor (H200, 2026-12-02, not
  // kept; bench/results/2026-12-02-h200-session21, its patch there) the same
  // written by the product's warps as they are, each 32-row group by the warp
  // whose row completes it (a count a group in global memory, acq_rel
  // atomics; the group read back from L2 and quantized), the products taking
  // the block sums and working the scale out themselves: the one-block norm
  // launch went, but the seam did not get cheaper — the last writers' atomic
  // and read-back queue behind the next product's first stages, which now
  // stream in while the product ends (CUPTI shares a layer, 7B Q8_0: attn_output
  // 3.15 → 9.91 µs, ffn_down 22.65 → 26.18, against the norm's 4.56 twice and
  // gate/up and q/k/v 1.7-1.8 each quicker); where it paid on its own (after
  // the pipelined ffn_down) the products' work on the sums took it back:
  // tg128 7B Q8_0 395 vs 399 tok/s, Q4_K_M 508 vs 511, same run.
  // The q/k/v tail (biases, RoPE, the K/V store) folded into the q/k/v
  // product's launch where its kernel takes it (kernels::MatvecInput::tail;
  // not the pipelined products): one launch a layer fewer, the same bits.
  // MINFER_QKV_TAIL_IN_PRODUCT=0 launches the tail on its own (A/B runs).
  // On the H200 (2026-12-03, same build and run, CUPTI): a greedy decode
  // step 7B Q4_K_M 1,722.4 → 1,680.1 µs (the tail's 1.50 µs a layer gone,
  // q/k/v 4.45-5.79 → 4.75-5.20, attention 4.41 → 4.06), 0.5B Q8_0 469.9 →
  // 446.4 (tail 0.98, q/k/v 3.20 → 3.50); tg128 7B Q4_K_M 571 → 590 tok/s,
  // 1.5B Q4_K_M 1,084 → 1,105, 0.5B Q8_0 2,019 → 2,116, 0.5B Q4_K_M 1,822
  // → 1,847 (bench/results/2026-12-03-h200-session25).
  const char* fold_tail = std::getenv("MINFER_QKV_TAIL_IN_PRODUCT");
  fold_qkv_tail_ = fold_tail == nullptr || *fold_tail == '\0' || std::string_view(fold_tail) != "0";
  const char* norm_tail = std::getenv("MINFER_NORM_TAIL");
  norm_tail_ = norm_tail != nullptr && *norm_tail != '\0' && std::string_view(norm_tail) != "0";
  // The deferred-scale norm (kernels::launch_rms_norm_deferred): a layer's
  // one-row norm read only by products of quantized weights hands them Q8
  // of x ⊙ w and the norm's scale, and they apply the scale last — in the
  // prologue that folds the norm, one pass and one barrier instead of two,
  // or after a one-block norm launch that writes it. On by default;
  // MINFER_DEFER_NORM=0 turns it off (A/B runs: the values are rounded to Q8
  // before the scale instead of after, so the logits differ within that
  // rounding, not bit for bit).
  const char* defer_norm = std::getenv("MINFER_DEFER_NORM");
  defer_norm_ = defer_norm == nullptr || *defer_norm == '\0' || std::string_view(defer_norm) != "0";
  // Prefill products of few tokens on the fused kernel (gemm()):
  // MINFER_FUSED_GEMM_ROWS=N moves the crossover (benchmarks; 0: never).
  fused_gemm_rows_ = std::max(0, options.fused_gemm_rows);
  // The fused products' x in the order their lanes read (x16_order), with
  // MINFER_X16_LANES=1: off until it has run on a GPU (built in session 57,
  // whose device would not start); the same bits either way by design.
  if (const char* v = std::getenv("MINFER_X16_LANES"); v != nullptr) x16_lanes_ = std::string_view(v) == "1";
  if (const char* v = std::getenv("MINFER_FUSED_GEMM_ROWS"); v != nullptr && *v != '\0' && options.fused_gemm_rows > 0) {
    fused_gemm_rows_ = std::max(0, std::atoi(v));
  }
  const char* fuse_norm = std::getenv("MINFER_FUSE_NORM");
  fuse_norm_max_width_ = fuse_norm == nullptr || *fuse_norm == '\0' ? kFuseNormMaxWidth
                        : std::string_view(fuse_norm) != "0"     ? INT_MAX
                                                                 : 0;
  CUDA_TRY(cudaSetDevice(facts_.device));
  CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_TRY(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  MINFER_ASSIGN_OR_RETURN(blas_, cuda::cublas_api());
  cublasHandle_t handle = nullptr;
  CUBLAS_TRY(blas_->create(&handle));
  cublas_ = handle;
  CUBLAS_TRY(blas_->set_stream(handle, stream_));
  MINFER_TRY(upload_weights());
  // Every weight a graph names must be on the device: dw()/dv() rely on it.
  if (!dweights_.count(weights.output.data) || !dweights_.count(weights.token_embd.data)) {
    return unexpected(ErrorCode::kInternal, "cuda backend: the output head or the embedding table was not uploaded");
  }
  MINFER_TRY(alloc_buffers());
  if (!options.fa_prefill || !kernels::attention_prefill_supported(config.head_dim)) {
    log::warn("cuda backend: prefill attention uses the generic kernel ({})",
              options.fa_prefill ? fmt::format("no flash kernel for head_dim {}", config.head_dim)
                                 : std::string("MINFER_NO_FA_PREFILL"));
  }
  return ok_status();
}

Status CudaBackend::upload_weights() {
  const auto deadline = [] { return Clock::now() + std::chrono::seconds(120); };
  // Matrices: split into planes through two pinned staging buffers, so the
  // copy of one chunk overlaps the repacking of the next. The repacking (byte
  // shuffles, 4-10 GB/s a core) is most of an upload's time; rows are
  // independent (weight_layout.h), so a chunk's rows go to a pool of threads.
  constexpr size_t kStaging = 32u << 20;
  ThreadPool pool(options_.n_threads);
  void* staging[2] = {nullptr, nullptr};
  cudaEvent_t staged[2] = {nullptr, nullptr};
  auto cleanup = [&] {
    for (int i = 0; i < 2; ++i) {
      if (staged[i]) cudaEventDestroy(staged[i]);
      if (staging[i]) cudaFreeHost(staging[i]);
    }
  };
  for (int i = 0; i < 2; ++i) {
    if (cudaMallocHost(&staging[i], kStaging) != cudaSuccess || cudaEventCreate(&staged[i]) != cudaSuccess) {
      cleanup();
      return unexpected(ErrorCode::kOutOfMemory, fmt::format("cuda backend: cannot allocate {} bytes of pinned staging memory", kStaging));
    }
  }
  int slot = 0;
  Status result = ok_status();
  for (const Weight* w : weights_->matrices()) {
    if (dweights_.count(w->data)) continue;
    const auto wt = static_cast<kernels::WType>(static_cast<uint32_t>(w->type));
    if (!kernels::wtype_supported(static_cast<uint32_t>(w->type), w->n_in)) {
      result = unexpected(ErrorCode::kUnsupported,
                          fmt::format("cuda backend: weight '{}' of type {} with rows of {} has no kernel", w->name,
                                      dtype_name(w->type), w->n_in));
      break;
    }
    if (!kernels::plane_offsets_fit(wt, w->n_in, w->n_out)) {
      result = unexpected(ErrorCode::kUnsupported,
                          fmt::format("cuda backend: weight '{}' ({} x {}) has a plane of 4 GiB or more", w->name,
                                      w->n_out, w->n_in));
      break;
    }
    const kernels::PlaneSizes ps = kernels::plane_sizes(wt, w->n_in);
    const size_t row_total = ps.q_row + ps.qh_row + ps.meta_row + ps.d_row;
    const size_t n = static_cast<size_t>(w->n_out);
    auto align = [](size_t x) { return (x + 255) / 256 * 256; };
    const size_t off_qh = align(ps.q_row * n), off_meta = off_qh + align(ps.qh_row * n), off_d = off_meta + align(ps.meta_row * n);
    const size_t total = off_d + align(ps.d_row * n);
    void* mem = nullptr;
    if (cudaMalloc(&mem, total) != cudaSuccess) {
      cudaGetLastError();
      result = unexpected(ErrorCode::kOutOfMemory,
                          fmt::format("cuda backend: cudaMalloc of {} bytes for weight '{}' failed", total, w->name));
      break;
    }
    weight_mem_.push_back(mem);
    weight_bytes_ += total;
    auto* base = static_cast<uint8_t*>(mem);
    kernels::DeviceWeight d;
    d.type = wt;
    d.n_rows = static_cast<int>(w->n_out);
    d.k = static_cast<int>(w->n_in);
    d.q = base;
    d.qh = ps.qh_row ? base + off_qh : nullptr;
    d.meta = ps.meta_row ? base + off_meta : nullptr;
    d.d = ps.d_row ? base + off_d : nullptr;
    const size_t rows_per_chunk = std::max<size_t>(1, kStaging / row_total);
    for (size_t r0 = 0; r0 < n && result; r0 += rows_per_chunk) {
      const size_t rows = std::min(rows_per_chunk, n - r0);
      // Wait until this staging buffer's previous copy has finished.
      const cudaError_t es = cudaEventQuery(staged[slot]);
      if (es != cudaSuccess) {
        Status ws = cuda::wait_bounded(stream_, staged[slot], deadline());
        if (!ws) { result = ws; break; }
      }
      auto* st = static_cast<uint8_t*>(staging[slot]);
      uint8_t* sq = st;
      uint8_t* sqh = sq + ps.q_row * rows;
      uint8_t* smeta = sqh + ps.qh_row * rows;
      uint8_t* sd = smeta + ps.meta_row * rows;
      cuda::repack_rows_parallel(pool, wt, w->n_in, w->data + r0 * w->row_bytes, w->row_bytes, static_cast<int64_t>(rows),
                                 sq, ps.qh_row ? sqh : nullptr, ps.meta_row ? smeta : nullptr, ps.d_row ? sd : nullptr);
      auto copy = [&](size_t plane_off, size_t row_bytes, const uint8_t* src) -> Status {
        if (row_bytes == 0) return ok_status();
        CUDA_TRY(cudaMemcpyAsync(base + plane_off + r0 * row_bytes, src, rows * row_bytes, cudaMemcpyHostToDevice, stream_));
        return ok_status();
      };
      if (Status s1 = copy(0, ps.q_row, sq); !s1) { result = s1; break; }
      if (Status s2 = copy(off_qh, ps.qh_row, sqh); !s2) { result = s2; break; }
      if (Status s3 = copy(off_meta, ps.meta_row, smeta); !s3) { result = s3; break; }
      if (Status s4 = copy(off_d, ps.d_row, sd); !s4) { result = s4; break; }
      if (cudaEventRecord(staged[slot], stream_) != cudaSuccess) {
        result = unexpected(ErrorCode::kDevice, "cuda backend: cudaEventRecord failed during upload");
        break;
      }
      slot ^= 1;
    }
    if (!result) break;
    dweights_[w->data] = d;
  }
  if (result) {
    Status ws = cuda::wait_bounded(stream_, done_, deadline());
    if (!ws) result = ws;
  }
  cleanup();
  MINFER_TRY(result);
  // Vectors (norms, biases, RoPE frequency factors): f32 as they are.
  std::vector<const Weight*> vectors{&weights_->output_norm};
  if (weights_->rope_freqs.present()) vectors.push_back(&weights_->rope_freqs);
  for (const LayerWeights& l : weights_->layers) {
    for (const Weight* v : {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm}) {
      if (v->present()) vectors.push_back(v);
    }
  }
  for (const Weight* v : vectors) {
    if (dvectors_.count(v->data)) continue;
    void* mem = nullptr;
    CUDA_TRY(cudaMalloc(&mem, v->row_bytes));
    weight_mem_.push_back(mem);
    weight_bytes_ += v->row_bytes;
    CUDA_TRY(cudaMemcpyAsync(mem, v->data, v->row_bytes, cudaMemcpyHostToDevice, stream_));
    dvectors_[v->data] = static_cast<const float*>(mem);
  }
  return cuda::wait_bounded(stream_, done_, deadline());
}

Status CudaBackend::alloc_buffers() {
  const int max_t = options_.max_tokens;
  for (size_t i = 1; i < acts_.size(); ++i) {
    const Buf b = static_cast<Buf>(i);
    Act& a = acts_[i];
    a.width = buf_width(b, config_);
    if (b == Buf::kLogits) continue;  // sized per step (one row, or all rows for tests)
    MINFER_ASSIGN_OR_RETURN(void* f32, pool_.acquire(sizeof(float) * max_t * a.width));
    a.f32 = static_cast<float*>(f32);
    if (has_q8_copy(b) && a.width % 32 == 0) {
      MINFER_ASSIGN_OR_RETURN(void* q, pool_.acquire(static_cast<size_t>(max_t) * a.width));
      MINFER_ASSIGN_OR_RETURN(void* ds, pool_.acquire(sizeof(float) * 2 * max_t * (a.width / 32)));
      a.q8.q = static_cast<int8_t*>(q);
      a.q8.ds = ds;
      MINFER_ASSIGN_OR_RETURN(void* scale, pool_.acquire(sizeof(float)));
      a.scale = static_cast<float*>(scale);
    }
    if (has_q8_copy(b)) {
      MINFER_ASSIGN_OR_RETURN(void* h, pool_.acquire(2 * static_cast<size_t>(max_t) * a.width));
      a.f16 = h;
    }
  }
  const size_t elem = options_.kv_type == DType::kF16 ? 2 : 4;
  const size_t cache_bytes = static_cast<size_t>(options_.n_ctx) * config_.kv_dim() * elem;
  for (int l = 0; l < config_.n_layers; ++l) {
    MINFER_ASSIGN_OR_RETURN(void* k, pool_.acquire(cache_bytes));
    MINFER_ASSIGN_OR_RETURN(void* v, pool_.acquire(cache_bytes));
    CUDA_TRY(cudaMemsetAsync(k, 0, cache_bytes, stream_));
    CUDA_TRY(cudaMemsetAsync(v, 0, cache_bytes, stream_));
    k_cache_.push_back(k);
    v_cache_.push_back(v);
  }
  {
    // The same expression as the CPU backend's RopeTable (and the same libm).
    std::vector<double> inv(static_cast<size_t>(config_.n_rot / 2));
    for (size_t i = 0; i < inv.size(); ++i) {
      inv[i] = std::pow(static_cast<double>(config_.rope_base), -2.0 * static_cast<double>(i) / config_.n_rot);
    }
    MINFER_ASSIGN_OR_RETURN(void* f, pool_.acquire(sizeof(double) * inv.size()));
    inv_freq_ = static_cast<double*>(f);
    CUDA_TRY(cudaMemcpyAsync(inv_freq_, inv.data(), sizeof(double) * inv.size(), cudaMemcpyHostToDevice, stream_));
    MINFER_TRY(cuda::wait_bounded(stream_, done_, Clock::now() + std::chrono::seconds(60)));  // `inv` is about to go away
  }
  MINFER_ASSIGN_OR_RETURN(void* cp, pool_.acquire(sizeof(int32_t) * options_.n_ctx));
  cell_pos_ = static_cast<int32_t*>(cp);
  // Empty cells are never visible: their position is INT_MAX (0x7f7f7f7f by memset: large enough).
  CUDA_TRY(cudaMemsetAsync(cell_pos_, 0x7f, sizeof(int32_t) * options_.n_ctx, stream_));
  const size_t header_words = header_words_draw() + kDrawWords;
  MINFER_ASSIGN_OR_RETURN(void* in, pool_.acquire(sizeof(int32_t) * header_words));
  d_n_seq_ = static_cast<int32_t*>(in);
  d_tokens_ = d_n_seq_ + 1;
  d_positions_ = d_tokens_ + max_t + 1;
  d_kv_cells_ = d_positions_ + max_t;
  d_feed_ = d_kv_cells_ + max_t;
  d_draw_ = reinterpret_cast<kernels::DrawArgs*>(d_n_seq_ + header_words_draw());
  MINFER_ASSIGN_OR_RETURN(void* sc, pool_.acquire(sizeof(int32_t) * options_.n_ctx));
  d_seq_cells_ = static_cast<int32_t*>(sc);
  MINFER_ASSIGN_OR_RETURN(void* am, pool_.acquire(sizeof(int32_t) * max_t));
  d_argmax_ = static_cast<int32_t*>(am);
  MINFER_ASSIGN_OR_RETURN(void* ak, pool_.acquire(sizeof(unsigned long long)));
  d_argmax_key_ = static_cast<unsigned long long*>(ak);
  MINFER_ASSIGN_OR_RETURN(void* sl, pool_.acquire(kernels::sample_lists_bytes(config_.vocab_size)));
  sample_lists_ = static_cast<unsigned long long*>(sl);
  MINFER_ASSIGN_OR_RETURN(void* sn, pool_.acquire(sizeof(unsigned int)));
  sample_count_ = static_cast<unsigned int*>(sn);
  CUDA_TRY(cudaMemsetAsync(sample_count_, 0, sizeof(unsigned int), stream_));
  MINFER_ASSIGN_OR_RETURN(void* ls, pool_.acquire(kernels::logprobs_scratch_bytes(config_.vocab_size)));
  logprobs_scratch_ = ls;
  MINFER_ASSIGN_OR_RETURN(void* ln, pool_.acquire(sizeof(unsigned int)));
  logprobs_count_ = static_cast<unsigned int*>(ln);
  CUDA_TRY(cudaMemsetAsync(logprobs_count_, 0, sizeof(unsigned int), stream_));
  MINFER_ASSIGN_OR_RETURN(void* lo, pool_.acquire(sizeof(kernels::LogprobsOut)));
  d_logprobs_ = static_cast<kernels::LogprobsOut*>(lo);
  MINFER_ASSIGN_OR_RETURN(void* tc, pool_.acquire(sizeof(int)));
  tail_counter_ = static_cast<int*>(tc);
  CUDA_TRY(cudaMemsetAsync(tail_counter_, 0, sizeof(int), stream_));
  MINFER_ASSIGN_OR_RETURN(void* bb, pool_.acquire(2 * sizeof(unsigned int)));
  bridge_barrier_ = static_cast<unsigned int*>(bb);
  CUDA_TRY(cudaMemsetAsync(bridge_barrier_, 0, 2 * sizeof(unsigned int), stream_));
  const size_t partial_floats = kernels::attention_partials_floats(config_.n_heads, config_.head_dim, options_.n_ctx);
  MINFER_ASSIGN_OR_RETURN(void* pp, pool_.acquire(sizeof(float) * partial_floats));
  partials_ = static_cast<float*>(pp);
  CUDA_TRY(cudaMemsetAsync(partials_, 0, sizeof(float) * partial_floats, stream_));  // the decode counters start at zero
  for (Slot& slot : slots_) {
    CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&slot.h_header), sizeof(int32_t) * header_words));
    CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&slot.h_seq_cells), sizeof(int32_t) * options_.n_ctx));
    CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&slot.h_argmax_key), sizeof(unsigned long long)));
    CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&slot.h_argmax), sizeof(int32_t) * max_t));
    CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&slot.h_logprobs), sizeof(kernels::LogprobsOut)));
    CUDA_TRY(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
  }
  return ok_status();
}

Status CudaBackend::check_input(const StepInput& in) const {
  if (in.n_tokens <= 0 || in.n_tokens > options_.max_tokens) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("cuda backend: step has {} tokens; allowed 1..{}", in.n_tokens, options_.max_tokens));
  }
  if (in.n_seq_cells <= 0 || in.n_seq_cells > options_.n_ctx) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("cuda backend: sequence has {} cells; allowed 1..{}", in.n_seq_cells, options_.n_ctx));
  }
  if (in.token_from_previous && (in.n_tokens != 1 || feed_next_ == 0)) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("cuda backend: a step of {} tokens fed from the previous step's argmax (which {})",
                                  in.n_tokens, feed_next_ == 0 ? "gave none" : "gave one"));
  }
  for (int t = 0; t < in.n_tokens; ++t) {
    const int32_t token = in.token_from_previous ? 0 : in.tokens[t];
    if (token < 0 || token >= config_.vocab_size || in.kv_cells[t] < 0 ||
        in.kv_cells[t] >= options_.n_ctx || in.positions[t] < 0) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("cuda backend: token {} = {} (vocab {}), cell {} (n_ctx {}), position {}", t,
                                    token, config_.vocab_size, in.kv_cells[t], options_.n_ctx, in.positions[t]));
    }
  }
  for (int j = 0; j < in.n_seq_cells; ++j) {
    if (in.seq_cells[j] < 0 || in.seq_cells[j] >= options_.n_ctx) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("cuda backend: sequence cell {} at index {} is outside [0, {})", in.seq_cells[j], j,
                                    options_.n_ctx));
    }
  }
  return ok_status();
}

Status CudaBackend::upload_inputs(const StepInput& in, Slot& slot) {
  const int n = in.n_tokens;
  const int max_t = options_.max_tokens;
  int32_t* header = slot.h_header;
  header[0] = in.n_seq_cells;
  if (in.token_from_previous) {
    header[1] = -1;  // launch_step_start writes it
  } else {
    std::memcpy(header + 1, in.tokens, sizeof(int32_t) * n);
    header[1 + n] = in.next_token;  // a scoring step's last row's token (d_tokens_ + 1 are the rows')
  }
  std::memcpy(header + 2 + max_t, in.positions, sizeof(int32_t) * n);
  std::memcpy(header + 2 + 2 * max_t, in.kv_cells, sizeof(int32_t) * n);
  header[2 + 3 * max_t] = in.token_from_previous ? feed_next_ : 0;
  size_t words = header_words_draw();
  if (in.draw != nullptr) {
    std::memcpy(header + words, in.draw, sizeof(kernels::DrawArgs));
    words += kDrawWords;
  }
  // The slot's own staging: the other slot's copy may not have run yet.
  CUDA_TRY(cudaMemcpyAsync(d_n_seq_, header, sizeof(int32_t) * words, cudaMemcpyHostToDevice, stream_));
  // The sequence's cells change only at the end from one step to the next:
  // copy from the first difference on.
  size_t first = 0;
  const size_t n_cells = static_cast<size_t>(in.n_seq_cells);
  while (first < std::min(n_cells, uploaded_cells_.size()) && uploaded_cells_[first] == in.seq_cells[first]) ++first;
  if (first < n_cells) {
    std::memcpy(slot.h_seq_cells + first, in.seq_cells + first, sizeof(int32_t) * (n_cells - first));
    CUDA_TRY(cudaMemcpyAsync(d_seq_cells_ + first, slot.h_seq_cells + first, sizeof(int32_t) * (n_cells - first),
                             cudaMemcpyHostToDevice, stream_));
  }
  uploaded_cells_.assign(in.seq_cells, in.seq_cells + n_cells);
  return ok_status();
}

Status CudaBackend::launched(cudaError_t st, const Node& n) {
  ++launches_;
  if (st == cudaSuccess) return ok_status();
  return unexpected(ErrorCode::kDevice, fmt::format("cuda backend: node '{}' ({}): launch failed: {} ({})", n.name,
                                                    op_name(n.op), cudaGetErrorName(st), cudaGetErrorString(st)));
}

Status CudaBackend::ensure_q8(Act& a) {
  if (a.q8_ok) return ok_status();
  if (a.q8.q == nullptr) {
    return unexpected(ErrorCode::kInternal, fmt::format("cuda backend: buffer of width {} has no Q8 copy", a.width));
  }
  ++launches_;
  CUDA_TRY(kernels::launch_quantize_q8(a.f32, a.rows, a.width, a.q8, stream_));
  a.q8_ok = true;
  return ok_status();
}

Status CudaBackend::ensure_f16(Act& a, kernels::X16Order order) {
  if (a.f16_ok && a.f16_order == order) return ok_status();
  if (a.f16 == nullptr) return unexpected(ErrorCode::kInternal, "cuda backend: buffer has no f16 copy");
  ++launches_;
  a.f16_order = order;
  CUDA_TRY(kernels::launch_to_f16(a.f32, a.f16, static_cast<int64_t>(a.rows) * a.width, stream_, a.f16_order, a.width));
  a.f16_ok = true;
  return ok_status();
}

kernels::X16Order CudaBackend::x16_order(int rows, int width) const {
  return x16_lanes_ && rows <= fused_gemm_rows_ && width % 128 == 0 ? kernels::X16Order::kLanes : kernels::X16Order::kNatural;
}

Status CudaBackend::gemm(const Weight& w, const Act& src, int first_row, int rows, float* y, int ldy, bool accumulate) {
  //   y[rows][n_out] (+)= x16[rows][k] · W16[n_out][k]ᵀ
  // Few rows: the fused kernel reads the quantized weight once. More: the
  // weight dequantized to f16 whole, then one cuBLAS tensor-core GEMM.
  const kernels::DeviceWeight d = dw(w);
  if (rows <= fused_gemm_rows_ && kernels::gemm_fused_supported(d, src.width)) {
    const void* x16 = static_cast<const uint16_t*>(src.f16) + static_cast<size_t>(first_row) * src.width;
    ++launches_;
    CUDA_TRY(kernels::launch_gemm_fused(d, x16, src.width, rows, y, ldy, accumulate, stream_, src.f16_order));
    return ok_status();
  }
  if (src.f16_order != kernels::X16Order::kNatural) {
    // x16_order gives kLanes only where every product takes the branch above.
    return unexpected(ErrorCode::kInternal, fmt::format("cuda backend: a product of {} rows of width {} ({}) for cuBLAS "
                                                        "has its f16 x in the fused kernel's order",
                                                        rows, src.width, w.name));
  }
  MINFER_TRY(dequantize_for_gemm(w));
  return gemm_dequantized(w, src, first_row, rows, y, ldy, accumulate);
}

Status CudaBackend::dequantize_for_gemm(const Weight& w) {
  const size_t need = static_cast<size_t>(w.n_out) * w.n_in * 2;
  if (need > gemm_w16_bytes_) {
    if (gemm_w16_) pool_.release(gemm_w16_);
    MINFER_ASSIGN_OR_RETURN(gemm_w16_, pool_.acquire(need));
    gemm_w16_bytes_ = need;
  }
  ++launches_;
  CUDA_TRY(kernels::launch_dequantize_f16(dw(w), gemm_w16_, stream_));
  return ok_status();
}

Status CudaBackend::gemm_dequantized(const Weight& w, const Act& src, int first_row, int rows, float* y, int ldy,
                                     bool accumulate) {
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const void* x16 = static_cast<const uint16_t*>(src.f16) + static_cast<size_t>(first_row) * src.width;
  ++launches_;
  CUBLAS_TRY(blas_->gemm_ex(static_cast<cublasHandle_t>(cublas_), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.n_out), rows,
                          static_cast<int>(w.n_in), &alpha, gemm_w16_, CUDA_R_16F, static_cast<int>(w.n_in), x16,
                          CUDA_R_16F, src.width, &beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return ok_status();
}

void CudaBackend::take_pending_norm(Buf src, kernels::MatvecInput& in) {
  if (pending_norm_.buf != src || src == Buf::kNone) return;
  in.norm_x = pending_norm_.x;
  in.norm_w = pending_norm_.w;
  in.norm_eps = config_.rms_eps;
  in.norm_deferred = pending_norm_.deferred;
  pending_norm_ = PendingNorm{};
}

bool CudaBackend::can_defer_norm(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if (!defer_norm_ || trace_ != nullptr || n.op != Op::kRmsNorm || n.layer < 0) return false;
  const Act& dst = act(n.dst);
  if (dst.q8.q == nullptr || dst.scale == nullptr || dst.width % 32 != 0) return false;
  auto quantized = [&](const Weight* w) { return w != nullptr && kernels::wtype_is_quantized_host(dw(*w).type); };
  size_t j = i + 1;
  for (; j < g.nodes.size() && (g.nodes[j].src == n.dst || g.nodes[j].src2 == n.dst); ++j) {
    const Node& m = g.nodes[j];
    const bool product = (m.op == Op::kMatmul && quantized(m.w)) ||
                         (m.op == Op::kGateUpSwiglu && quantized(m.w) && quantized(m.w2));
    if (!product || m.src2 == n.dst) return false;
  }
  return j > i + 1;
}

Status CudaBackend::launch_one_row_norm(Buf buf, const float* x, const float* w) {
  Act& dst = act(buf);
  dst.q8_ok = dst.q8.q != nullptr;
  dst.f16_ok = false;
  ++launches_;
  CUDA_TRY(kernels::launch_rms_norm(x, w, 1, dst.width, config_.rms_eps, dst.f32, nullptr,
                                    dst.q8_ok ? dst.q8 : kernels::Q8Rows{}, stream_));
  return ok_status();
}

Status CudaBackend::materialize_deferred() {
  const DeferredNorm d = deferred_;
  deferred_ = DeferredNorm{};
  return launch_one_row_norm(d.buf, d.x, d.w);
}

Expected<bool> CudaBackend::take_deferred(Buf src, bool all_quantized, kernels::MatvecInput& in) {
  if (deferred_.buf != src || src == Buf::kNone) return false;
  if (!all_quantized) {
    MINFER_TRY(materialize_deferred());
    return false;
  }
  const Act& a = act(src);
  in.xq = a.q8;
  in.defer_scale = a.scale;
  in.norm_eps = config_.rms_eps;
  return true;
}

kernels::QkvTailArgs CudaBackend::qkv_tail_args(const Node& n) {
  const ModelConfig& c = config_;
  kernels::QkvTailArgs a;
  a.q = act(n.op == Op::kQkvTail ? n.dst : Buf::kQ).f32;
  a.k = act(n.src).f32;
  a.v = act(n.src2).f32;
  a.bq = dv(n.bq);
  a.bk = dv(n.bk);
  a.bv = dv(n.bv);
  a.q_norm = dv(n.q_norm);
  a.k_norm = dv(n.k_norm);
  a.eps = c.rms_eps;
  a.n_tokens = act(n.src).rows;
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv_heads;
  a.rope = rope_args();
  a.positions = d_positions_;
  a.kv_cells = d_kv_cells_;
  a.k_cache = k_cache_[static_cast<size_t>(n.layer)];
  a.v_cache = v_cache_[static_cast<size_t>(n.layer)];
  a.cache_f16 = options_.kv_type == DType::kF16;
  a.cell_pos = cell_pos_;
  return a;
}

Status CudaBackend::matvec_group(const std::vector<const Node*>& nodes, const Node* residual_add,
                                 unsigned long long* argmax, const Node* tail_norm, const Node* qkv_tail,
                                 bool* tail_folded) {
  Act& src = act(nodes.front()->src);
  const int first = nodes.front()->rows == Rows::kLast ? src.rows - 1 : 0;
  bool any_quantized = false, all_quantized = true;
  kernels::MatvecTask tasks[kernels::kMaxMatvecTasks];
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = *nodes[i];
    Act& dst = act(n.dst);
    kernels::MatvecTask& t = tasks[i];
    t.w = dw(*n.w);
    t.bias = dv(n.bias);
    t.argmax = argmax;
    const bool quantized = kernels::wtype_is_quantized_host(t.w.type);
    any_quantized |= quantized;
    all_quantized &= quantized;
    if (residual_add != nullptr) {
      t.y = act(residual_add->dst).f32;
      t.accumulate = true;
      act(residual_add->dst).q8_ok = act(residual_add->dst).f16_ok = false;
    } else {
      t.y = dst.f32;
      dst.rows = 1;
      dst.q8_ok = dst.f16_ok = false;
    }
  }
  kernels::MatvecInput in;
  in.x = src.f32 + static_cast<size_t>(first) * src.width;
  take_pending_norm(nodes.front()->src, in);
  MINFER_ASSIGN_OR_RETURN(const bool deferred, take_deferred(nodes.front()->src, all_quantized, in));
  if (tail_norm != nullptr) {
    // The norm that reads the residual stream this product ends: done by
    // the product's last block (kernels::MatvecInput::tail_norm_w).
    Act& xn = act(tail_norm->dst);
    xn.rows = 1;
    xn.q8_ok = xn.q8.q != nullptr;
    xn.f16_ok = false;
    in.tail_norm_w = dv(tail_norm->w);
    in.tail_norm_eps = config_.rms_eps;
    in.tail_norm_y = xn.f32;
    in.tail_norm_q = xn.q8.q != nullptr ? xn.q8 : kernels::Q8Rows{};
    in.tail_counter = tail_counter_;
  }
  if (in.norm_w == nullptr && !deferred && any_quantized) {
    if (first != 0 && !src.q8_ok) {
      return unexpected(ErrorCode::kInternal, "cuda backend: last-row matvec needs the Q8 row its producer writes");
    }
    MINFER_TRY(ensure_q8(src));
    in.xq.q = src.q8.q + static_cast<size_t>(first) * src.width;
    in.xq.ds = static_cast<float2*>(src.q8.ds) + static_cast<size_t>(first) * (src.width / 32);
  }
  const int n_tasks = static_cast<int>(nodes.size());
  if (qkv_tail != nullptr) {
    // The q/k/v tail in the same launch; where the launch would take a
    // kernel without it (pipelined, streamed), the tail node runs after.
    const kernels::QkvTailArgs a = qkv_tail_args(*qkv_tail);
    in.tail = &a;
    const cudaError_t st = kernels::launch_matvec(tasks, n_tasks, in, stream_);
    in.tail = nullptr;
    if (st != cudaErrorNotSupported) {
      if (tail_folded != nullptr) *tail_folded = st == cudaSuccess;
      return launched(st, *nodes.front());
    }
  }
  return launched(kernels::launch_matvec(tasks, n_tasks, in, stream_), *nodes.front());
}

Expected<bool> CudaBackend::try_bridge(const Graph& g, size_t& i) {
  const Node& n = g.nodes[i];
  if (kernels::bridge() == 0 || trace_ != nullptr || i + 3 >= g.nodes.size()) return false;
  const Node& add = g.nodes[i + 1];
  const Node& norm = g.nodes[i + 2];
  Act& src = act(n.src);
  if (src.rows != 1 || add.op != Op::kAdd || add.src != n.dst || norm.op != Op::kRmsNorm || norm.src != add.dst ||
      act(add.dst).rows != 1 || !can_defer_norm(g, i + 2) || pending_norm_.buf == n.src || deferred_.buf == n.src ||
      !kernels::wtype_is_quantized_host(dw(*n.w).type)) {
    return false;
  }
  // The norm's readers (can_defer_norm: products of quantized weights right
  // after it): one gate/up, or matmuls without a residual add.
  size_t end = i + 3;
  while (end < g.nodes.size() && g.nodes[end].src == norm.dst) ++end;
  const Node& first = g.nodes[i + 3];
  const bool gate_up = first.op == Op::kGateUpSwiglu;
  if (gate_up ? end != i + 4 || config_.d_ff % 32 != 0 : end - (i + 3) > static_cast<size_t>(kernels::kMaxMatvecTasks)) {
    return false;
  }
  for (size_t j = i + 3; !gate_up && j < end; ++j) {
    if (g.nodes[j].op != Op::kMatmul) return false;
  }
  if (!gate_up && end < g.nodes.size() && g.nodes[end].op == Op::kAdd && g.nodes[end].src == g.nodes[end - 1].dst) {
    return false;
  }
  Act& stream = act(add.dst);
  Act& xn = act(norm.dst);
  if (!src.q8_ok) return false;
  kernels::BridgeArgs a;
  a.product.w = dw(*n.w);
  a.product.bias = dv(n.bias);
  a.product.y = stream.f32;
  a.product.accumulate = true;
  a.x = src.q8;
  a.norm_w = dv(norm.w);
  a.norm_eps = config_.rms_eps;
  a.norm_q = xn.q8;
  a.norm_scale = xn.scale;
  a.barrier = bridge_barrier_;
  if (gate_up) {
    a.gate = dw(*first.w);
    a.up = dw(*first.w2);
    a.h = act(first.dst).f32;
    a.hq = act(first.dst).q8;
  } else {
    for (size_t j = i + 3; j < end; ++j) {
      kernels::MatvecTask& t = a.next[a.n_next++];
      t.w = dw(*g.nodes[j].w);
      t.bias = dv(g.nodes[j].bias);
      t.y = act(g.nodes[j].dst).f32;
    }
  }
  const cudaError_t st = kernels::launch_bridge(a, stream_);
  if (st == cudaErrorNotSupported) return false;
  MINFER_TRY(launched(st, n));
  stream.q8_ok = stream.f16_ok = false;
  xn.rows = 1;
  xn.q8_ok = xn.f16_ok = false;
  deferred_ = DeferredNorm{norm.dst, stream.f32, a.norm_w};  // a reader that cannot take the scale gets the plain norm
  for (size_t j = i + 3; j < end; ++j) {
    Act& y = act(g.nodes[j].dst);
    y.rows = 1;
    y.q8_ok = gate_up && y.q8.q != nullptr;
    y.f16_ok = false;
  }
  i = end - 1;
  return true;
}

Status CudaBackend::run_node(const Graph& g, size_t& i, int n_tokens) {
  const Node& n = g.nodes[i];
  if (deferred_.buf != Buf::kNone) {
    // Only products apply a deferred norm's scale; anyone else reading the
    // buffer gets the plain norm computed now. A write ends it.
    const bool reads = n.src == deferred_.buf || n.src2 == deferred_.buf;
    if (reads && n.op != Op::kMatmul && n.op != Op::kGateUpSwiglu) MINFER_TRY(materialize_deferred());
    else if (!reads && n.dst == deferred_.buf) deferred_ = DeferredNorm{};
  }
  if (pending_norm_.buf != Buf::kNone && n.src != pending_norm_.buf) {
    // Only a matvec of the normalised buffer may take a pending norm; anyone
    // else gets the norm computed now.
    const PendingNorm p = pending_norm_;
    pending_norm_ = PendingNorm{};
    MINFER_TRY(launch_one_row_norm(p.buf, p.x, p.w));
  }
  const Node* next = i + 1 < g.nodes.size() ? &g.nodes[i + 1] : nullptr;
  const ModelConfig& c = config_;
  switch (n.op) {
    case Op::kEmbed: {
      Act& x = act(n.dst);
      x.rows = n_tokens;
      x.q8_ok = x.f16_ok = false;
      return launched(kernels::launch_embed(dw(*n.w), d_tokens_, n_tokens, x.f32, stream_), n);
    }
    case Op::kRmsNorm: {
      Act& src = act(n.src);
      Act& dst = act(n.dst);
      const auto [first, rows] = node_rows(n.rows, src.rows, score_from_);
      dst.rows = rows;
      // One row of a layer feeding a matvec: the matvec's blocks normalise it
      // themselves (one launch fewer; deferred or bit-identical). Not the
      // output norm: the head's ~38,000 blocks would each redo it. Not while
      // tracing, which reads every node's output.
      const bool defer = rows == 1 && can_defer_norm(g, i);
      if (rows == 1 && src.width <= fuse_norm_max_width_ && n.layer >= 0 && trace_ == nullptr && next != nullptr &&
          next->src == n.dst && (next->op == Op::kMatmul || next->op == Op::kGateUpSwiglu) &&
          kernels::matvec_norm_fits(src.width)) {
        pending_norm_ = PendingNorm{n.dst, src.f32 + static_cast<size_t>(first) * src.width, dv(n.w), defer};
        dst.q8_ok = dst.f16_ok = false;
        return ok_status();
      }
      // Its own launch, deferred: the products apply the scale.
      if (defer) {
        dst.q8_ok = dst.f16_ok = false;
        deferred_ = DeferredNorm{n.dst, src.f32 + static_cast<size_t>(first) * src.width, dv(n.w)};
        return launched(
            kernels::launch_rms_norm_deferred(deferred_.x, deferred_.w, src.width, c.rms_eps, dst.q8, dst.scale, stream_), n);
      }
      // Write every copy a consumer may read: Q8 for matvecs, f16 for GEMMs.
      kernels::Q8Rows q8 = rows == 1 && dst.q8.q ? dst.q8 : kernels::Q8Rows{};
      void* f16 = rows > 1 ? dst.f16 : nullptr;
      dst.q8_ok = q8.q != nullptr;
      dst.f16_ok = f16 != nullptr;
      dst.f16_order = x16_order(rows, src.width);
      return launched(kernels::launch_rms_norm(src.f32 + static_cast<size_t>(first) * src.width, dv(n.w), rows, src.width,
                                               c.rms_eps, dst.f32, f16, q8, stream_, dst.f16_order),
                      n);
    }
    case Op::kMatmul: {
      Act& src = act(n.src);
      const int rows = n.rows == Rows::kLast ? 1 : src.rows;
      const bool residual = next != nullptr && next->op == Op::kAdd && next->src == n.dst;
      if (rows == 1) {
        // A seam between sub-layers: the residual product, the norm and its
        // products in one launch.
        MINFER_ASSIGN_OR_RETURN(const bool bridged, try_bridge(g, i));
        if (bridged) return ok_status();
        // Consecutive matmuls of one input share a launch (q, k, v; gate, up).
        std::vector<const Node*> group{&n};
        while (!residual && group.size() < static_cast<size_t>(kernels::kMaxMatvecTasks) && i + group.size() < g.nodes.size()) {
          const Node& m = g.nodes[i + group.size()];
          if (m.op != Op::kMatmul || m.src != n.src || m.rows != n.rows) break;
          if (i + group.size() + 1 < g.nodes.size() && g.nodes[i + group.size() + 1].op == Op::kAdd &&
              g.nodes[i + group.size() + 1].src == m.dst) {
            break;
          }
          group.push_back(&m);
        }
        // A one-row output head followed by argmax: fold the argmax into the
        // matvec (atomicMax over packed keys), one launch fewer per step. The
        // key was cleared when the step began (enqueue).
        const bool fuse_argmax = group.size() == 1 && next != nullptr && next->op == Op::kArgmax && !residual;
        if (fuse_argmax) argmax_fused_ = true;
        // A residual product followed by the norm of the residual stream
        // (the next sub-layer's, or the output norm): the norm rides on the
        // product's last block, one launch fewer. Not while tracing (it
        // reads every node's output), nor for rows the Q8 blocks do not fit.
        const Node* after = residual && i + 2 < g.nodes.size() ? &g.nodes[i + 2] : nullptr;
        const bool tail_norm = norm_tail_ && trace_ == nullptr && after != nullptr && after->op == Op::kRmsNorm &&
                               after->src == next->dst && group.size() == 1 && act(next->dst).rows == 1 &&
                               act(next->dst).width % 32 == 0;
        // q, k and v of one token followed by their tail (without per-head
        // norms): the tail rides on the products' launch. Not while tracing.
        const Node* qkv_tail = nullptr;
        if (fold_qkv_tail_ && trace_ == nullptr && n_tokens == 1 && group.size() == 3 && i + 3 < g.nodes.size()) {
          const Node& t = g.nodes[i + 3];
          if (t.op == Op::kQkvTail && t.dst == group[0]->dst && t.src == group[1]->dst && t.src2 == group[2]->dst &&
              t.q_norm == nullptr && t.k_norm == nullptr) {
            qkv_tail = &t;
          }
        }
        bool tail_folded = false;
        MINFER_TRY(matvec_group(group, residual ? next : nullptr, fuse_argmax ? d_argmax_key_ : nullptr,
                                tail_norm ? after : nullptr, qkv_tail, &tail_folded));
        i += group.size() - 1 + (residual || fuse_argmax ? 1 : 0) + (tail_norm ? 1 : 0) + (tail_folded ? 1 : 0);
        return ok_status();
      }
      if (g.scores_rows() && n.dst == Buf::kLogits) return score_head(g, i, src);
      // Many rows: tensor-core GEMM, residual folded in as beta = 1.
      MINFER_TRY(ensure_f16(src, x16_order(src.rows, src.width)));
      Act& out = residual ? act(next->dst) : act(n.dst);
      if (!residual) out.rows = rows;
      out.q8_ok = out.f16_ok = false;
      const int first = n.rows == Rows::kLast ? src.rows - 1 : 0;
      MINFER_TRY(gemm(*n.w, src, first, rows, out.f32, out.width, residual));
      if (n.bias != nullptr) MINFER_TRY(launched(kernels::launch_add_bias(out.f32, dv(n.bias), rows, out.width, stream_), n));
      if (residual) ++i;
      return ok_status();
    }
    case Op::kHeadNorm: {
      Act& x = act(n.dst);
      return launched(kernels::launch_head_norm(x.f32, x.rows, n.n_heads, c.head_dim, dv(n.w), c.rms_eps, stream_), n);
    }
    case Op::kRope: {
      Act& x = act(n.dst);
      return launched(kernels::launch_rope(x.f32, x.rows, n.n_heads, rope_args(), d_positions_, stream_), n);
    }
    case Op::kKvStore:
    case Op::kQkvTail: {
      const kernels::QkvTailArgs a = qkv_tail_args(n);
      return launched(n.op == Op::kQkvTail ? kernels::launch_qkv_tail(a, stream_) : kernels::launch_kv_store(a, stream_), n);
    }
    case Op::kAttention: {
      // Tried on the H200 (2026-12-04, not kept): decode attention and the O
      // projection with its residual add in one launch (sm_90 clusters of 8
      // blocks, each cluster computing the whole attention and sharing it in
      // distributed shared memory, then each block its rows of W_o): within
      // rounding of the two launches, one launch a layer fewer, but slower —
      // 13.3 µs a 7B Q4_K_M layer against 4.2 + 3.8, 8.3 on 0.5B Q8_0 against
      // 3.1 + 2.5; tg128 7B 550 vs 589 tok/s, 0.5B 1,939 vs 2,196. Every
      // cluster reading the same K/V rows (2.3-2.8 µs to stage them) and the
      // cluster exchange (1.4-1.7) cost more than the seam it removes
      // (bench/results/2026-12-04-h200-session35, run2-tree.patch). Nor
      // (H200, 2026-12-04, not kept) a block a head and slice of W_o's rows,
      // each computing its head's attention and its rows' dot products with
      // the head's columns, the slice's last block adding the heads' partial
      // sums in head order (sequences of one chunk): a 7B Q4_K_M layer 16.2
      // µs against 3.9 + 3.7, 0.5B Q8_0 9.7 against 3.1 + 2.5; tg128 7B 516
      // vs 588 tok/s, 0.5B 1,838 vs 2,191. The fence, the slice's count and
      // the last block's reads of every head's sums are L2 round trips on the
      // layer's critical path, as many as the launch boundary costs
      // (bench/results/2026-12-04-h200-session38, attention-o.patch).
      Act& q = act(n.src);
      Act& out = act(n.dst);
      out.rows = q.rows;
      kernels::AttentionArgs a;
      a.q = q.f32;
      a.k_cache = k_cache_[static_cast<size_t>(n.layer)];
      a.v_cache = v_cache_[static_cast<size_t>(n.layer)];
      a.cache_f16 = options_.kv_type == DType::kF16;
      a.seq_cells = d_seq_cells_;
      a.n_seq = d_n_seq_;
      a.cell_pos = cell_pos_;
      a.q_pos = d_positions_;
      a.n_tokens = q.rows;
      a.n_heads = c.n_heads;
      a.n_kv_heads = c.n_kv_heads;
      a.head_dim = c.head_dim;
      a.max_cells = options_.n_ctx;
      a.out = out.f32;
      a.partials = partials_;
      a.decode_split = attn_split_;
      if (q.rows == 1) {
        // The cell the q/k/v tail writes: the split kernel stages the others'
        // rows before its wait (MINFER_ATTN_SPLIT_EARLY=0: after it, for A/B runs).
        if (attn_split_early_) a.kv_cells = d_kv_cells_;
        a.out_q = out.q8;
        out.q8_ok = out.q8.q != nullptr;
        out.f16_ok = false;
        launches_ += kernels::attention_decode_launches(a) - 1;  // every kernel counts
        return launched(kernels::launch_attention_decode(a, stream_), n);
      }
      a.out_f16 = out.f16;
      a.out_f16_order = out.f16_order = x16_order(q.rows, out.width);
      out.f16_ok = true;
      out.q8_ok = false;
      if (options_.fa_prefill && kernels::attention_prefill_supported(c.head_dim)) {
        return launched(kernels::launch_attention_prefill(a, stream_), n);
      }
      return launched(kernels::launch_attention_generic(a, stream_), n);
    }
    case Op::kAdd: {
      Act& y = act(n.dst);
      const Act& x = act(n.src);
      y.q8_ok = y.f16_ok = false;
      return launched(kernels::launch_add(y.f32, x.f32, static_cast<int64_t>(y.rows) * y.width, stream_), n);
    }
    case Op::kSwiglu: {
      Act& gt = act(n.dst);
      const Act& up = act(n.src);
      const bool one = gt.rows == 1;
      gt.q8_ok = one && gt.q8.q != nullptr;
      gt.f16_ok = !one;
      gt.f16_order = x16_order(gt.rows, gt.width);
      return launched(kernels::launch_swiglu(gt.f32, up.f32, static_cast<int64_t>(gt.rows) * gt.width, gt.f32,
                                             one ? nullptr : gt.f16, one ? gt.q8 : kernels::Q8Rows{}, gt.width, stream_,
                                             gt.f16_order),
                      n);
    }
    case Op::kGateUpSwiglu: {
      Act& src = act(n.src);
      Act& h = act(n.dst);
      if (src.rows == 1 && c.d_ff % 32 == 0) {
        h.rows = 1;
        kernels::MatvecInput in;
        in.x = src.f32;
        take_pending_norm(n.src, in);
        const bool quantized = kernels::wtype_is_quantized_host(dw(*n.w).type) && kernels::wtype_is_quantized_host(dw(*n.w2).type);
        MINFER_ASSIGN_OR_RETURN(const bool deferred, take_deferred(n.src, quantized, in));
        if (in.norm_w == nullptr && !deferred) {
          MINFER_TRY(ensure_q8(src));
          in.xq = src.q8;
        }
        h.q8_ok = h.q8.q != nullptr;
        h.f16_ok = false;
        return launched(kernels::launch_gate_up_swiglu(dw(*n.w), dw(*n.w2), in, h.f32, h.q8, stream_), n);
      }
      Act& up = act(Buf::kUp);
      if (src.rows == 1) {
        // Decode with d_ff not a multiple of 32 (no Q8 blocks of h): gate
        // and up in one matvec launch, then SwiGLU.
        kernels::MatvecTask tasks[2];
        tasks[0].w = dw(*n.w);
        tasks[0].y = h.f32;
        tasks[1].w = dw(*n.w2);
        tasks[1].y = up.f32;
        kernels::MatvecInput in;
        in.x = src.f32;
        take_pending_norm(n.src, in);
        const bool quantized = kernels::wtype_is_quantized_host(tasks[0].w.type) && kernels::wtype_is_quantized_host(tasks[1].w.type);
        MINFER_ASSIGN_OR_RETURN(const bool deferred, take_deferred(n.src, quantized, in));
        if (in.norm_w == nullptr && !deferred &&
            (kernels::wtype_is_quantized_host(tasks[0].w.type) || kernels::wtype_is_quantized_host(tasks[1].w.type))) {
          MINFER_TRY(ensure_q8(src));
          in.xq = src.q8;
        }
        h.rows = up.rows = 1;
        h.q8_ok = h.f16_ok = false;
        MINFER_TRY(launched(kernels::launch_matvec(tasks, 2, in, stream_), n));
        return launched(kernels::launch_swiglu(h.f32, up.f32, h.width, h.f32, nullptr, kernels::Q8Rows{}, h.width, stream_), n);
      }
      // Prefill: two GEMMs, then SwiGLU.
      MINFER_TRY(ensure_f16(src, x16_order(src.rows, src.width)));
      h.rows = up.rows = src.rows;
      MINFER_TRY(gemm(*n.w, src, 0, src.rows, h.f32, h.width, false));
      MINFER_TRY(gemm(*n.w2, src, 0, src.rows, up.f32, up.width, false));
      const bool one = src.rows == 1;
      h.q8_ok = one && h.q8.q != nullptr;
      h.f16_ok = !one;
      h.f16_order = x16_order(h.rows, h.width);
      return launched(kernels::launch_swiglu(h.f32, up.f32, static_cast<int64_t>(h.rows) * h.width, h.f32,
                                             one ? nullptr : h.f16, one ? h.q8 : kernels::Q8Rows{}, h.width, stream_,
                                             h.f16_order),
                      n);
    }
    case Op::kArgmax: {
      const Act& l = act(n.src);
      return launched(kernels::launch_argmax(l.f32, l.rows, l.width, d_argmax_, stream_), n);
    }
    case Op::kSample: {
      const Act& l = act(n.src);
      const float* row = l.f32 + static_cast<size_t>(l.rows - 1) * l.width;
      // The step's last token ends the penalties' window (on the device: a
      // step may be fed the token of the step before).
      return launched(kernels::launch_sample(row, l.width, d_draw_, d_tokens_ + (n_tokens - 1), sample_lists_,
                                             sample_count_, d_argmax_, stream_),
                      n);
    }
    case Op::kLogprobs: {
      const Act& l = act(n.src);
      if (n.rows == Rows::kAll) {
        // A scoring step of one row (its head a matvec; more rows go through
        // score_head): row t against the step's token score_from + t + 1
        // (the header's tokens, then StepInput::next_token).
        return launched(kernels::launch_logprobs(l.f32, l.width, l.rows, nullptr, d_tokens_ + 1 + score_from_, score_scratch_,
                                                 score_counts_, d_row_logprobs_, stream_),
                        n);
      }
      // After the step's pick (kArgmax, folded into the head or not, or
      // kSample): its token is the argmax key's or d_argmax_[0].
      const float* row = l.f32 + static_cast<size_t>(l.rows - 1) * l.width;
      return launched(kernels::launch_logprobs(row, l.width, 1, argmax_fused_ ? d_argmax_key_ : nullptr,
                                               argmax_fused_ ? nullptr : d_argmax_, logprobs_scratch_, logprobs_count_,
                                               d_logprobs_, stream_),
                      n);
    }
    case Op::kCount:
      break;
  }
  return unexpected(ErrorCode::kUnsupported, fmt::format("op {} is not implemented on the cuda backend", op_name(n.op)));
}

Status CudaBackend::ensure_logits(const Graph& g, int n_tokens) {
  if (g.options.logits == Logits::kNone) return ok_status();
  // One row unless every token's logits are wanted (tests, scoring), on the
  // host (kAll) or on the device only (kScore).
  const int rows = g.options.logits == Logits::kAll ? n_tokens
                   : g.scores_rows()                 ? std::min(n_tokens, options_.score_rows)
                                                     : 1;
  if (g.scores_rows() && n_tokens > row_logprobs_capacity_) MINFER_TRY(ensure_score_rows(n_tokens));
  // The pinned host copy too: nothing may be allocated inside a capture.
  const size_t floats = static_cast<size_t>(g.options.logits == Logits::kAll ? rows : 1) * act(Buf::kLogits).width;
  if (floats > h_logits_floats_) {
    if (h_logits_) cudaFreeHost(h_logits_);
    h_logits_ = nullptr;
    h_logits_floats_ = 0;
    CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&h_logits_), sizeof(float) * floats));
    h_logits_floats_ = floats;
  }
  if (rows <= logits_capacity_rows_) return ok_status();
  Act& logits = act(Buf::kLogits);
  if (logits.f32) pool_.release(logits.f32);
  logits.f32 = nullptr;
  MINFER_ASSIGN_OR_RETURN(void* p, pool_.acquire(sizeof(float) * static_cast<size_t>(rows) * logits.width));
  logits.f32 = static_cast<float*>(p);
  logits_capacity_rows_ = rows;
  return ok_status();
}

Status CudaBackend::ensure_score_rows(int rows) {
  const int slice = options_.score_rows;
  if (score_scratch_ == nullptr) {
    MINFER_ASSIGN_OR_RETURN(score_scratch_, pool_.acquire(kernels::logprobs_scratch_bytes(config_.vocab_size, slice)));
    MINFER_ASSIGN_OR_RETURN(void* counts, pool_.acquire(sizeof(unsigned int) * slice));
    score_counts_ = static_cast<unsigned int*>(counts);
    CUDA_TRY(cudaMemsetAsync(score_counts_, 0, sizeof(unsigned int) * slice, stream_));
  }
  if (d_row_logprobs_) pool_.release(d_row_logprobs_);
  if (h_row_logprobs_) cudaFreeHost(h_row_logprobs_);
  d_row_logprobs_ = nullptr;
  h_row_logprobs_ = nullptr;
  row_logprobs_capacity_ = 0;
  MINFER_ASSIGN_OR_RETURN(void* out, pool_.acquire(sizeof(kernels::LogprobsOut) * rows));
  d_row_logprobs_ = static_cast<kernels::LogprobsOut*>(out);
  CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&h_row_logprobs_), sizeof(kernels::LogprobsOut) * rows));
  row_logprobs_capacity_ = rows;
  return ok_status();
}

Status CudaBackend::score_head(const Graph& g, size_t& i, Act& src) {
  const Node& head = g.nodes[i];
  if (i + 1 >= g.nodes.size() || g.nodes[i + 1].op != Op::kLogprobs || g.nodes[i + 1].rows != Rows::kAll) {
    return unexpected(ErrorCode::kInternal,
                      fmt::format("cuda backend: scoring step's head '{}' is not followed by its scoring", head.name));
  }
  const Node& score = g.nodes[i + 1];
  MINFER_TRY(ensure_f16(src, kernels::X16Order::kNatural));  // cuBLAS at every size
  MINFER_TRY(dequantize_for_gemm(*head.w));  // once for every slice
  Act& logits = act(Buf::kLogits);
  logits.q8_ok = logits.f16_ok = false;
  for (int first = 0; first < src.rows; first += options_.score_rows) {
    const int rows = std::min(options_.score_rows, src.rows - first);
    logits.rows = rows;
    MINFER_TRY(gemm_dequantized(*head.w, src, first, rows, logits.f32, logits.width, false));
    if (head.bias != nullptr) {
      MINFER_TRY(launched(kernels::launch_add_bias(logits.f32, dv(head.bias), rows, logits.width, stream_), head));
    }
    // Row t against the step's token score_from + t + 1 (the header's
    // tokens, then StepInput::next_token).
    MINFER_TRY(launched(kernels::launch_logprobs(logits.f32, logits.width, rows, nullptr, d_tokens_ + 1 + score_from_ + first,
                                                 score_scratch_, score_counts_, d_row_logprobs_ + first, stream_),
                        score));
  }
  ++i;
  return ok_status();
}

Status CudaBackend::record_profile_event(size_t k) {
  while (profile_events_.size() <= k) {
    cudaEvent_t e = nullptr;
    CUDA_TRY(cudaEventCreate(&e));
    profile_events_.push_back(e);
  }
  // Inside a capture, an external record becomes an event-record node that
  // timestamps every replay; outside, a plain record.
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CUDA_TRY(cudaStreamIsCapturing(stream_, &capturing));
  if (capturing == cudaStreamCaptureStatusActive) {
    CUDA_TRY(cudaEventRecordWithFlags(profile_events_[k], stream_, cudaEventRecordExternal));
  } else {
    CUDA_TRY(cudaEventRecord(profile_events_[k], stream_));
  }
  return ok_status();
}

void CudaBackend::accumulate_profile() {
  for (size_t j = 0; j < profile_ops_.size(); ++j) {
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, profile_events_[j], profile_events_[j + 1]) != cudaSuccess) continue;
    profile_.ms[static_cast<size_t>(profile_ops_[j])] += ms;
    ++profile_.calls[static_cast<size_t>(profile_ops_[j])];
  }
}

Status CudaBackend::enqueue_step_start(const Graph& g) {
  // The fused argmax's key (run_node, the output head) cleared by the step's
  // first kernel, not right before the head: a memset between the output
  // norm and the head kept the head from launching while the norm ran
  // (programmatic dependent launch needs kernel after kernel), and a CUDA
  // graph replays it wherever it was captured. The same kernel takes a fed
  // step's token from the key (or d_argmax_) before clearing it.
  if (!g.picks_token()) return ok_status();
  ++launches_;
  CUDA_TRY(kernels::launch_step_start(d_tokens_, d_feed_, d_argmax_key_, d_argmax_, stream_));
  return ok_status();
}

Status CudaBackend::enqueue(const Graph& g, int n_tokens) {
  launches_ = 0;
  argmax_fused_ = false;
  pending_norm_ = PendingNorm{};
  deferred_ = DeferredNorm{};
  if (profiling_) profile_ops_.clear();
  MINFER_TRY(enqueue_step_start(g));
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (profiling_) {
      MINFER_TRY(record_profile_event(profile_ops_.size()));
      profile_ops_.push_back(g.nodes[i].op);
    }
    Status st = run_node(g, i, n_tokens);
    if (!st) return st;
  }
  if (profiling_) MINFER_TRY(record_profile_event(profile_ops_.size()));
  return ok_status();
}

Status CudaBackend::enqueue_output_copy(const Graph& g, int n_tokens, Slot& slot) {
  out_rows_ = 0;
  if (g.options.logits == Logits::kNone) return ok_status();
  const Act& logits = act(Buf::kLogits);
  out_rows_ = g.options.logits == Logits::kAll && !g.options.sample ? n_tokens : 1;
  if (g.scores_rows()) {
    CUDA_TRY(cudaMemcpyAsync(h_row_logprobs_, d_row_logprobs_, sizeof(kernels::LogprobsOut) * (n_tokens - score_from_),
                             cudaMemcpyDeviceToHost, stream_));
  }
  if (g.picks_token()) {
    if (argmax_fused_) {
      CUDA_TRY(cudaMemcpyAsync(slot.h_argmax_key, d_argmax_key_, sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                               stream_));
    } else {
      CUDA_TRY(cudaMemcpyAsync(slot.h_argmax, d_argmax_, sizeof(int32_t) * out_rows_, cudaMemcpyDeviceToHost, stream_));
    }
    if (g.has_logprobs()) {
      CUDA_TRY(cudaMemcpyAsync(slot.h_logprobs, d_logprobs_, sizeof(kernels::LogprobsOut), cudaMemcpyDeviceToHost,
                               stream_));
    }
    return ok_status();
  }
  const size_t floats = static_cast<size_t>(out_rows_) * logits.width;
  if (floats > h_logits_floats_) {
    return unexpected(ErrorCode::kInternal, fmt::format("cuda backend: logits copy of {} floats exceeds the staged {}",
                                                        floats, h_logits_floats_));
  }
  // A scoring step hands back its last row (its last slice's), as a
  // Logits::kLast step.
  const float* from = logits.f32 + (g.scores_rows() ? static_cast<size_t>(logits.rows - 1) * logits.width : 0);
  CUDA_TRY(cudaMemcpyAsync(h_logits_, from, sizeof(float) * floats, cudaMemcpyDeviceToHost, stream_));
  return ok_status();
}

Expected<CudaBackend::Captured*> CudaBackend::captured(const Graph& g) {
  Captured& cap = captured_[{&g, profiling_, attn_split_}];
  if (cap.exec != nullptr && cap.generation != pool_.generation()) {
    // A buffer moved since the capture: the graph's pointers are stale.
    cudaGraphExecDestroy(cap.exec);
    cap.exec = nullptr;
  }
  if (cap.exec != nullptr) return &cap;
  const uint64_t gen_before = pool_.generation();
  cudaGraph_t graph = nullptr;
  const auto t_capture = Clock::now();
  CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  // The output copy stays outside: its host buffer is the submitting slot's.
  Status st = enqueue(g, 1);
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!st || end != cudaSuccess || pool_.generation() != gen_before) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    if (pool_.generation() != gen_before && st && end == cudaSuccess) {
      // A buffer grew during capture: capture again with the new addresses.
      return captured(g);
    }
    graphs_enabled_ = false;
    log::error("cuda backend: decode graph capture failed ({}); CUDA graphs are disabled for this process",
               !st ? st.error().message : std::string(cudaGetErrorString(end)));
    return nullptr;
  }
  const cudaError_t inst = cudaGraphInstantiate(&cap.exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    cap.exec = nullptr;
    graphs_enabled_ = false;
    log::error("cuda backend: cudaGraphInstantiate failed ({}); CUDA graphs are disabled for this process",
               cudaGetErrorString(inst));
    return nullptr;
  }
  cap.generation = pool_.generation();
  cap.launches = launches_;
  cap.argmax_fused = argmax_fused_;
  cap.profile_ops = profile_ops_;
  ++captures_;
  capture_ms_ += std::chrono::duration<double, std::milli>(Clock::now() - t_capture).count();
  return &cap;
}

Status CudaBackend::step_graph(const Graph& g) {
  MINFER_TRY(ensure_logits(g, 1));  // allocate before capture: no cudaMalloc inside it
  if (attn_mode_ == AttnDecode::kAuto) {
    // The other attention variant's graph too, so that start-up's warm-up
    // (short sequences) has captured the long-context step as well.
    attn_split_ = !attn_split_;
    Expected<Captured*> other = captured(g);
    attn_split_ = !attn_split_;
    MINFER_TRY(other);
  }
  MINFER_ASSIGN_OR_RETURN(Captured * cap, captured(g));
  if (cap == nullptr) return enqueue(g, 1);  // graphs are off now: this step runs eagerly
  // What the captured enqueue decided, as if it had just run.
  launches_ = cap->launches;
  decode_launches_ = cap->launches;
  argmax_fused_ = cap->argmax_fused;
  if (profiling_) profile_ops_ = cap->profile_ops;
  CUDA_TRY(cudaGraphLaunch(cap->exec, stream_));
  return ok_status();
}

void CudaBackend::debug_release_stall() {
  if (stall_flag_ != nullptr) *reinterpret_cast<volatile int32_t*>(stall_flag_) = 1;
}

Status CudaBackend::run_traced(const Graph& g, int n_tokens) {
  launches_ = 0;
  argmax_fused_ = false;
  MINFER_TRY(record_profile_event(0));
  MINFER_TRY(record_profile_event(1));
  MINFER_TRY(enqueue_step_start(g));
  std::vector<float> host;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const double t0 = trace_->now_us();
    CUDA_TRY(cudaEventRecord(profile_events_[0], stream_));
    MINFER_TRY(run_node(g, i, n_tokens));
    CUDA_TRY(cudaEventRecord(profile_events_[1], stream_));
    MINFER_TRY(cuda::wait_bounded(stream_, done_, Clock::now() + std::chrono::seconds(60)));
    float ms = 0.0f;
    CUDA_TRY(cudaEventElapsedTime(&ms, profile_events_[0], profile_events_[1]));
    TensorStats stats;
    int rows = 0, width = 0;
    // A node folded into the one before (residual add, argmax) is reported
    // with it: the output is the last node's destination.
    const Node& last = g.nodes[i];
    if (last.dst != Buf::kNone) {
      const Act& a = act(last.dst);
      rows = a.rows;
      width = a.width;
      host.resize(static_cast<size_t>(rows) * width);
      CUDA_TRY(cudaMemcpyAsync(host.data(), a.f32, sizeof(float) * host.size(), cudaMemcpyDeviceToHost, stream_));
      MINFER_TRY(cuda::wait_bounded(stream_, done_, Clock::now() + std::chrono::seconds(60)));
      stats = TensorStats::of(host.data(), static_cast<int64_t>(host.size()));
    }
    trace_->node(n.name, op_name(n.op), "cuda", trace_step_, rows, width, t0, 1000.0 * ms, stats);
  }
  ++trace_step_;
  return ok_status();
}

Status CudaBackend::run(const Graph& graph, const StepInput& in, StepOutput* out) {
  if (submitted_ > 0) {
    return unexpected(ErrorCode::kInternal, fmt::format("cuda backend: run() with {} steps in flight", submitted_));
  }
  MINFER_TRY(submit(graph, in));
  return collect(out);
}

Status CudaBackend::submit(const Graph& graph, const StepInput& in) {
  if (!wedged_.empty()) {
    return unexpected(ErrorCode::kDevice, fmt::format("cuda backend is wedged ({}); restart the service", wedged_));
  }
  if (weights_ == nullptr) return unexpected(ErrorCode::kInternal, "cuda backend: submit() before prepare()");
  if (submitted_ >= max_in_flight()) {
    return unexpected(ErrorCode::kInternal, fmt::format("cuda backend: a step submitted with {} in flight (at most {})",
                                                        submitted_, max_in_flight()));
  }
  // Behind another step only a decode step that picks its token: nothing may
  // grow (the logits buffer) or be copied into the one logits staging while
  // a step in flight uses them.
  if (submitted_ > 0 && (in.n_tokens != 1 || !graph.picks_token())) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("cuda backend: a step of {} tokens{} submitted behind another", in.n_tokens,
                                  graph.picks_token() ? "" : " with logits"));
  }
  MINFER_TRY(check_input(in));
  if (graph.options.sample) MINFER_TRY(check_draw(in.draw, config_.vocab_size, "cuda"));
  MINFER_TRY(check_score_from(graph, in, "cuda"));
  score_from_ = in.score_from;
  fetchable_row_ = nullptr;  // this step writes the logits buffer
  Slot& slot = slots_[static_cast<size_t>(next_slot_)];
  MINFER_TRY(upload_inputs(in, slot));
  MINFER_TRY(ensure_logits(graph, in.n_tokens));
  if (steps_++ == options_.debug_gpu_stall_at_step) {
    // Fault injection (tests only): the step's work queues behind a kernel
    // that spins until released, so its bounded wait must expire.
    if (stall_flag_ == nullptr) CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&stall_flag_), sizeof(int32_t)));
    *stall_flag_ = 0;
    log::warn("cuda backend: fault injection: step {} spins on the GPU until released", steps_ - 1);
    CUDA_TRY(kernels::launch_spin(stall_flag_, 30'000'000'000LL, stream_));
  }
  attn_split_ = attn_mode_ == AttnDecode::kSplit || (attn_mode_ == AttnDecode::kAuto && in.n_seq_cells > attn_split_cells_);
  Status st = ok_status();
  if (trace_ != nullptr) {
    st = run_traced(graph, in.n_tokens);
  } else if (in.n_tokens == 1 && graphs_enabled_) {
    st = step_graph(graph);
  } else {
    st = enqueue(graph, in.n_tokens);
  }
  if (st) st = enqueue_output_copy(graph, in.n_tokens, slot);
  const auto budget = std::chrono::microseconds(static_cast<int64_t>(
      1000.0 * (options_.step_timeout_ms + options_.step_timeout_per_token_ms * in.n_tokens)));
  // A step behind another gets its own budget after the other's deadline.
  const Slot& before = slots_[static_cast<size_t>((next_slot_ + kSlots - 1) % kSlots)];
  slot.deadline = (submitted_ > 0 ? std::max(Clock::now(), before.deadline) : Clock::now()) + budget;
  CUDA_TRY(cudaEventRecord(slot.done, stream_));
  if (!st) {
    // Drain what was enqueued before reporting; the error names the node.
    (void)cuda::wait_recorded(slot.done, slot.deadline);
    return st;
  }
  slot.logits = graph.options.logits;
  slot.argmax = graph.picks_token();
  slot.argmax_fused = argmax_fused_;
  slot.logprobs = graph.has_logprobs();
  slot.out_rows = out_rows_;
  slot.scored_rows = graph.scores_rows() ? in.n_tokens - in.score_from : 0;
  slot.logits_row = graph.options.logits == Logits::kLast && out_rows_ == 1 ? act(Buf::kLogits).f32 : nullptr;
  feed_next_ = graph.picks_token() && out_rows_ == 1 ? (argmax_fused_ ? 1 : 2) : 0;
  next_slot_ = (next_slot_ + 1) % kSlots;
  ++submitted_;
  return ok_status();
}

Status CudaBackend::collect(StepOutput* out) {
  if (submitted_ == 0) return unexpected(ErrorCode::kInternal, "cuda backend: collect() with no step in flight");
  const Slot& slot = slots_[static_cast<size_t>((next_slot_ + kSlots - submitted_) % kSlots)];
  --submitted_;
  // Behind a step that wedged the engine: no second wait for its deadline.
  if (!wedged_.empty()) {
    return unexpected(ErrorCode::kDevice, fmt::format("cuda backend is wedged ({}); restart the service", wedged_));
  }
  Status st = cuda::wait_recorded(slot.done, slot.deadline);
  if (!st) {
    // A missed deadline, or an error that poisons the context: no more steps.
    if (st.error().code == ErrorCode::kTimeout || cuda::is_sticky(cudaEventQuery(slot.done))) wedge(st.error().message);
    return st;
  }
  if (profiling_) accumulate_profile();
  if (submitted_ == 0) fetchable_row_ = slot.logits_row;
  out->rows = slot.out_rows;
  out->logprobs.reset();
  if (slot.logprobs) out->logprobs = *slot.h_logprobs;
  out->row_logprobs.assign(h_row_logprobs_, h_row_logprobs_ + slot.scored_rows);
  if (slot.logits == Logits::kNone) {
    out->logits.clear();
    out->argmax.clear();
  } else if (slot.argmax) {
    if (slot.argmax_fused) {
      out->argmax.assign(1, kernels::argmax_unpack(*slot.h_argmax_key));
    } else {
      out->argmax.assign(slot.h_argmax, slot.h_argmax + slot.out_rows);
    }
    out->logits.clear();
  } else {
    out->logits.assign(h_logits_, h_logits_ + static_cast<size_t>(slot.out_rows) * act(Buf::kLogits).width);
  }
  return ok_status();
}

Status CudaBackend::fetch_logits(StepOutput* out) {
  if (!wedged_.empty()) {
    return unexpected(ErrorCode::kDevice, fmt::format("cuda backend is wedged ({}); restart the service", wedged_));
  }
  if (submitted_ > 0) return unexpected(ErrorCode::kInternal, "cuda backend: logits fetched with a step in flight");
  if (fetchable_row_ == nullptr) {
    return unexpected(ErrorCode::kInternal, "cuda backend: the last step left no one-row logits to fetch");
  }
  const size_t width = static_cast<size_t>(act(Buf::kLogits).width);
  if (width > h_logits_floats_) {
    return unexpected(ErrorCode::kInternal, fmt::format("cuda backend: a logits row of {} floats exceeds the staged {}",
                                                        width, h_logits_floats_));
  }
  CUDA_TRY(cudaMemcpyAsync(h_logits_, fetchable_row_, sizeof(float) * width, cudaMemcpyDeviceToHost, stream_));
  const auto deadline = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(1000.0 * options_.step_timeout_ms));
  if (Status st = cuda::wait_bounded(stream_, done_, deadline); !st) {
    if (st.error().code == ErrorCode::kTimeout || cuda::is_sticky(cudaEventQuery(done_))) wedge(st.error().message);
    return st;
  }
  out->rows = 1;
  out->logits.assign(h_logits_, h_logits_ + width);
  return ok_status();
}

}  // namespace minfer

// The CUDA backend's failure behaviour: a GPU step that never finishes is cut
// off by the bounded wait and marks the engine wedged while the process stays
// responsive; an allocation failure and a kernel-invariant violation are
// errors that carry the values. Skipped without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "engine/api.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/gguf/gguf.h"
#include "engine/scheduler/runner.h"
#include "kernels/kernels.h"
#include "tests/engine/test_models.h"
#include "tests/gpu/gpu_test_util.h"

namespace minfer {
namespace {

using Clock = std::chrono::steady_clock;

TEST(CudaFaults, StalledStepHitsTheDeadlineAndWedgesTheEngine) {
  MINFER_REQUIRE_GPU();
  EngineConfig c;
  c.model_path = test::stories_path();
  c.backend = BackendChoice::kCuda;
  c.n_ctx = 64;
  c.warmup = false;
  c.step_timeout_ms = 300;
  c.step_timeout_per_token_ms = 0;
  c.debug_gpu_stall_at_step = 2;  // prefill is step 0, the second decode step stalls
  auto loaded = Engine::load(c);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  Engine& e = **loaded;
  ASSERT_EQ(e.health().phase, EnginePhase::kReady);
  GenerationRequest req;
  req.prompt = {1};
  req.max_tokens = 8;
  req.sampling.temperature = 0.0f;
  const auto t0 = Clock::now();
  auto running = std::async(std::launch::async, [&] { return e.generate(req, nullptr, nullptr); });
  // While the GPU spins, other threads still get answers at once.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // (Generous bound: it only has to be far from the 30 s the GPU would spin.)
  const auto h0 = Clock::now();
  const EngineHealth during = e.health();
  const double health_ms = std::chrono::duration<double, std::milli>(Clock::now() - h0).count();
  EXPECT_LT(health_ms, 1000.0);
  EXPECT_EQ(during.phase, EnginePhase::kReady);  // not wedged until the deadline passes
  const GenerationResult r = running.get();
  const double waited_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_EQ(r.finish, FinishReason::kError);
  EXPECT_EQ(r.error->code, ErrorCode::kTimeout) << r.error->message;
  EXPECT_GE(waited_ms, 250.0);
  EXPECT_LT(waited_ms, 5000.0) << "the bounded wait must return near its deadline";
  const EngineHealth after = e.health();
  EXPECT_EQ(after.phase, EnginePhase::kWedged);
  EXPECT_NE(after.reason.find("deadline"), std::string::npos) << after.reason;
  e.debug_release_gpu_stall();
  // A wedged engine refuses further work with the reason.
  const GenerationResult again = e.generate(req, nullptr, nullptr);
  ASSERT_EQ(again.finish, FinishReason::kError);
  EXPECT_NE(again.error->message.find("wedged"), std::string::npos) << again.error->message;
}

TEST(CudaFaults, AllocationFailureIsAnErrorNamingTheSize) {
  MINFER_REQUIRE_GPU();
  auto file = gguf::File::open(test::stories_path());
  ASSERT_TRUE(file.has_value());
  auto config = ModelConfig::from_gguf(**file);
  auto weights = ModelWeights::from_gguf(**file, *config);
  ASSERT_TRUE(weights.has_value());
  auto facts = cuda::probe_device();
  ASSERT_TRUE(facts.has_value());
  CudaBackend b(*facts);
  BackendOptions o;
  o.n_ctx = 64;
  o.max_tokens = 16;
  ASSERT_TRUE(b.prepare(*config, **weights, o).has_value());
  Runner r(*config, **weights, b, 64, 16, FusionOptions{});
  Sequence seq;
  StepOutput out;
  b.pool().fail_next_allocation();  // the all-rows logits buffer is the next allocation
  const std::vector<int32_t> tokens{1, 403, 407, 261};
  const Status st = r.eval(seq, tokens, Logits::kAll, false, &out);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kOutOfMemory);
  EXPECT_NE(st.error().message.find("cudaMalloc of 8192 bytes"), std::string::npos) << st.error().message;  // 4 × 512 floats
  // The backend is not wedged by it: the same step works once memory is there.
  EXPECT_TRUE(b.wedged_reason().empty());
  Sequence seq2;
  EXPECT_TRUE(r.eval(seq2, tokens, Logits::kAll, false, &out).has_value());
}

TEST(CudaFaults, KernelInvariantViolationsAreRefused) {
  MINFER_REQUIRE_GPU();
  kernels::AttentionArgs a;
  a.n_tokens = 1;
  a.n_heads = 32;
  a.n_kv_heads = 1;  // a query group of 32: beyond the kernel's 16
  a.head_dim = 128;
  a.max_cells = 16;
  EXPECT_EQ(kernels::launch_attention_decode(a, nullptr), cudaErrorInvalidValue);
  a.n_kv_heads = 8;
  a.head_dim = 96;  // no flash prefill kernel for 96
  EXPECT_FALSE(kernels::attention_prefill_supported(96));
  EXPECT_EQ(kernels::launch_attention_prefill(a, nullptr), cudaErrorInvalidValue);
  kernels::QkvTailArgs t;
  t.n_tokens = 1;
  t.rope.head_dim = 300;  // beyond 256
  t.rope.n_rot = 300;
  EXPECT_EQ(kernels::launch_qkv_tail(t, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace minfer

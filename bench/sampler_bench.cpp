// Time a sampled token costs the host (Sampler::sample) over a Qwen-sized
// vocabulary (151,936 logits: a normal spread and a peaked head), per
// setting: the defaults (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05),
// top-p alone (top-k 0), temperature alone, and the defaults with a
// repetition penalty. On the GPU this time lies between two decode steps of
// a sampled request.
//
// Run: build/bench/sampler_bench
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/sampling/logprobs.h"
#include "engine/sampling/sampler.h"

namespace minfer {
namespace {

constexpr int kVocab = 151936;

std::vector<float> logits() {
  std::mt19937 rng(1);
  std::normal_distribution<float> spread(0.0f, 2.5f);
  std::vector<float> l(kVocab);
  for (float& x : l) x = spread(rng);
  for (int i = 0; i < 20; ++i) l[rng() % kVocab] += 12.0f;
  return l;
}

void run(benchmark::State& state, SamplingParams p) {
  const std::vector<float> base = logits();
  const std::vector<int32_t> history(100, 5);
  Sampler s(p, kVocab);
  std::vector<float> l(base.size());
  for (auto _ : state) {
    state.PauseTiming();
    l = base;  // sample() changes the logits in place
    state.ResumeTiming();
    benchmark::DoNotOptimize(s.sample(l.data(), history));
  }
}

void BM_Defaults(benchmark::State& state) { run(state, SamplingParams{}); }
void BM_TopPAlone(benchmark::State& state) {
  SamplingParams p;
  p.top_k = 0;
  run(state, p);
}
void BM_TemperatureAlone(benchmark::State& state) {
  SamplingParams p;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  run(state, p);
}
void BM_DefaultsWithRepeatPenalty(benchmark::State& state) {
  SamplingParams p;
  p.repeat_penalty = 1.1f;
  run(state, p);
}

// A token's log-probabilities with its 5 most likely (what a request with
// top_logprobs 5 asks of every step).
void BM_Logprobs5(benchmark::State& state) {
  const std::vector<float> l = logits();
  for (auto _ : state) benchmark::DoNotOptimize(step_logprobs(l, 7, 5));
}

// A greedy pick held to a constraint that allows one token in `range(0)`
// (JSON mode between values allows a few hundred of Qwen's tokens; inside
// a string most of them): the best allowed token.
void BM_ConstrainedGreedy(benchmark::State& state) {
  const std::vector<float> base = logits();
  const std::vector<int32_t> history(100, 5);
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p, kVocab);
  const int32_t every = static_cast<int32_t>(state.range(0));
  std::vector<float> l(base.size());
  for (auto _ : state) {
    state.PauseTiming();
    l = base;
    state.ResumeTiming();
    benchmark::DoNotOptimize(s.sample(l.data(), history, [every](int32_t id) { return id % every == 0; }));
  }
}

BENCHMARK(BM_Defaults)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopPAlone)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TemperatureAlone)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DefaultsWithRepeatPenalty)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Logprobs5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ConstrainedGreedy)->Arg(2)->Arg(300)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace minfer

BENCHMARK_MAIN();

// Where a decode step's time goes, kernel by kernel, as the service runs it:
// replayed CUDA graphs with programmatic dependent launch. CUPTI's kernel
// activity records give each kernel's start and end on the GPU. With PDL a
// kernel starts (its blocks run up to their wait) before its predecessor
// ends, so durations overlap and do not add up to the step; the ends do: a
// kernel's share of the step is the time from the previous kernel's end to
// its own. Not a test: a measuring tool (run_on_device.sh timeline).
//
//   gpu_decode_timeline MODEL.gguf [PROMPT_TOKENS [DECODE_TOKENS]] [CSV]
//
// Prints, per kernel (name and grid), launches a step, the mean share of the
// step, the mean duration and how long before its predecessor's end it
// started; CSV (optional) gets every kernel of the last step.
#include <cupti.h>
#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "engine/api.h"
#include "kernels/kernels.h"

namespace {

struct KernelRecord {
  std::string name;
  int64_t grid = 0;
  uint64_t start = 0, end = 0;
  uint32_t correlation = 0;
  uint32_t graph = 0;
};

std::mutex g_mutex;
std::vector<KernelRecord> g_records;

// "minfer::kernels::(anonymous namespace)::matvec_kernel<8, 1>(...)" → "matvec_kernel<8, 1>".
std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  int depth = 0;
  size_t cut = s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0 && s.compare(i, 21, "(anonymous namespace)") != 0) {
      cut = i;
      break;
    }
  }
  s.resize(cut);
  for (const std::string prefix : {"void ", "minfer::kernels::", "(anonymous namespace)::"}) {
    for (size_t p; (p = s.find(prefix)) != std::string::npos;) s.erase(p, prefix.size());
  }
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 32u << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    g_records.push_back(KernelRecord{short_name(k->name), static_cast<int64_t>(k->gridX) * k->gridY * k->gridZ, k->start,
                                     k->end, k->correlationId, k->graphId});
  }
  std::free(buffer);
}

bool cupti_ok(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::cerr << "gpu_decode_timeline: " << what << ": " << (s ? s : "?") << "\n";
  return false;
}

// A probe's buffer (kernels.h: the bridge and phase probes): `words`
// zeroed 64-bit counters on the device, or null where that fails.
unsigned long long* zeroed_words(size_t words) {
  void* p = nullptr;
  if (cudaMalloc(&p, words * 8) != cudaSuccess) return nullptr;
  if (cudaMemset(p, 0, words * 8) != cudaSuccess) {
    cudaFree(p);
    return nullptr;
  }
  return static_cast<unsigned long long*>(p);
}

// A probe's counters copied back, and the SM clock (kHz) that turns their
// cycles into time; false, with a message naming the probe, where either fails.
bool read_probe(const unsigned long long* dev, size_t words, const char* what, std::vector<unsigned long long>& host,
                int& khz) {
  host.resize(words);
  khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  if (cudaMemcpy(host.data(), dev, words * 8, cudaMemcpyDeviceToHost) != cudaSuccess || khz <= 0) {
    std::cerr << "gpu_decode_timeline: cannot read the " << what << "\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace minfer;
  if (argc < 2) {
    std::cerr << "usage: gpu_decode_timeline MODEL.gguf [PROMPT_TOKENS [DECODE_TOKENS]] [CSV]\n";
    return 2;
  }
  const int n_prompt = argc > 2 ? std::atoi(argv[2]) : 1;
  const int n_gen = argc > 3 ? std::atoi(argv[3]) : 128;
  const std::string csv = argc > 4 ? argv[4] : "";
  if (!cupti_ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register") ||
      !cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernel records")) {
    return 1;
  }
  // MINFER_BRIDGE_PROBE=1: where the bridge launches' blocks spend their
  // cycles (kernels::set_bridge_probe), printed after the timeline.
  const char* probe_env = std::getenv("MINFER_BRIDGE_PROBE");
  const bool probing = probe_env != nullptr && std::string(probe_env) == "1";
  constexpr size_t kProbeWords = 2 * kernels::kBridgeProbeBlocks * kernels::kBridgeProbeFields;
  unsigned long long* probe = probing ? zeroed_words(kProbeWords) : nullptr;
  if (probing && (probe == nullptr || kernels::set_bridge_probe(probe) != cudaSuccess)) {
    std::cerr << "gpu_decode_timeline: cannot set up the bridge probe\n";
    return 1;
  }
  // MINFER_PHASE_PROBE=1: where decode attention's and the deferred norm's
  // blocks spend their cycles (kernels::set_phase_probe), printed last.
  const char* phase_env = std::getenv("MINFER_PHASE_PROBE");
  const bool phasing = phase_env != nullptr && std::string(phase_env) == "1";
  constexpr size_t kPhaseWords = static_cast<size_t>(kernels::kPhaseProbeKinds) * kernels::kPhaseProbeFields;
  unsigned long long* phases = phasing ? zeroed_words(kPhaseWords) : nullptr;
  if (phasing) {
    const cudaError_t st = phases != nullptr ? kernels::set_phase_probe(phases) : cudaErrorMemoryAllocation;
    if (st != cudaSuccess) {
      std::cerr << "gpu_decode_timeline: phase probe: "
                << (st == cudaErrorNotSupported ? "not compiled in (configure with -DMINFER_PHASE_PROBES=ON)" : cudaGetErrorString(st))
                << "\n";
      return 1;
    }
  }
  EngineConfig config;
  config.model_path = argv[1];
  config.backend = BackendChoice::kCuda;
  config.n_ctx = n_prompt + n_gen + 16;
  config.apply_environment();
  auto loaded = Engine::load(config);
  if (!loaded) {
    std::cerr << "gpu_decode_timeline: " << loaded.error().message << "\n";
    return 1;
  }
  Engine& e = **loaded;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> dist(0, e.info().vocab_size - 1);
  GenerationRequest req;
  for (int i = 0; i < n_prompt; ++i) req.prompt.push_back(dist(rng));
  req.max_tokens = n_gen;
  // MINFER_TIMELINE_TEMP=T: a sampled request (the default top-k, top-p,
  // min-p), whose steps draw their tokens (kernels::launch_sample).
  const char* temp_env = std::getenv("MINFER_TIMELINE_TEMP");
  req.sampling.temperature = temp_env != nullptr ? std::strtof(temp_env, nullptr) : 0.0f;
  req.ignore_eos = true;
  {
    std::lock_guard lock(g_mutex);
    g_records.clear();
  }
  cuptiActivityFlushAll(1);
  {
    std::lock_guard lock(g_mutex);
    g_records.clear();
  }
  const GenerationResult r = e.generate(req, nullptr, nullptr);
  cuptiActivityFlushAll(1);
  if (r.finish == FinishReason::kError) {
    std::cerr << "gpu_decode_timeline: " << r.error->message << "\n";
    return 1;
  }
  // Decode steps: the kernels of one graph launch share its correlation id.
  std::map<uint32_t, std::vector<KernelRecord>> by_launch;
  for (const KernelRecord& k : g_records) {
    if (k.graph != 0) by_launch[k.correlation].push_back(k);
  }
  std::vector<std::vector<KernelRecord>> steps;
  for (auto& [id, ks] : by_launch) {
    std::sort(ks.begin(), ks.end(), [](const KernelRecord& a, const KernelRecord& b) { return a.end < b.end; });
    steps.push_back(std::move(ks));
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.front().start < b.front().start; });
  // The first steps warm caches and clocks: keep the second half.
  if (steps.size() < 4) {
    std::cerr << "gpu_decode_timeline: " << steps.size() << " graph launches recorded (graphs off?)\n";
    return 1;
  }
  steps.erase(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2));
  struct Agg {
    double share = 0, duration = 0, early = 0;
    int64_t count = 0;
  };
  std::map<std::pair<std::string, int64_t>, Agg> agg;
  double step_sum = 0, kernel_sum = 0;
  for (const auto& ks : steps) {
    step_sum += static_cast<double>(ks.back().end - ks.front().start);
    for (size_t i = 0; i < ks.size(); ++i) {
      Agg& a = agg[{ks[i].name, ks[i].grid}];
      const uint64_t prev_end = i == 0 ? ks[i].start : ks[i - 1].end;
      a.share += static_cast<double>(ks[i].end) - static_cast<double>(prev_end);
      a.duration += static_cast<double>(ks[i].end - ks[i].start);
      a.early += std::max(0.0, static_cast<double>(prev_end) - static_cast<double>(ks[i].start));
      ++a.count;
      kernel_sum += static_cast<double>(ks[i].end - ks[i].start);
    }
  }
  const double n = static_cast<double>(steps.size());
  fmt::print("decode timeline: {} ({} prompt tokens, {} generated, {:.0f} tok/s decode), {} steps measured\n", argv[1],
             n_prompt, n_gen, r.decode_tokens_per_s(), steps.size());
  fmt::print("step {:.1f} us on the GPU (first start to last end), {} kernels; kernel durations add up to {:.1f} us\n",
             step_sum / n / 1e3, steps.back().size(), kernel_sum / n / 1e3);
  std::vector<std::pair<std::pair<std::string, int64_t>, Agg>> rows(agg.begin(), agg.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.share > b.second.share; });
  fmt::print("| kernel | grid | a step | share us (%) | us each: share | duration | started early |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& [key, a] : rows) {
    const double c = static_cast<double>(a.count);
    fmt::print("| {} | {} | {:.0f} | {:.1f} ({:.0f}%) | {:.2f} | {:.2f} | {:.2f} |\n", key.first.substr(0, 70), key.second, c / n,
               a.share / n / 1e3, 100.0 * a.share / step_sum, a.share / c / 1e3, a.duration / c / 1e3, a.early / c / 1e3);
  }
  if (probing) {
    std::vector<unsigned long long> h;
    int khz = 0;
    if (!read_probe(probe, kProbeWords, "bridge probe", h, khz)) return 1;
    fmt::print("bridge probe (SM cycles at {} MHz as us; per block, over every launch of the run: mean, and the min and "
               "max over blocks)\n| into | launches | blocks | wait + staging | first product | barrier | norm | second product |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|\n", khz / 1000);
    for (int kind = 1; kind >= 0; --kind) {
      double mean[6] = {}, lo[6], hi[6];
      int blocks = 0;
      unsigned long long launches = 0;
      for (int f = 0; f < 6; ++f) lo[f] = 1e30, hi[f] = 0;
      for (int b = 0; b < kernels::kBridgeProbeBlocks; ++b) {
        const unsigned long long* r = h.data() + (static_cast<size_t>(kind) * kernels::kBridgeProbeBlocks + b) * kernels::kBridgeProbeFields;
        if (r[0] == 0) continue;
        ++blocks;
        launches = std::max(launches, r[0]);
        for (int f = 1; f < 6; ++f) {
          const double us = static_cast<double>(r[f]) / static_cast<double>(r[0]) / (khz / 1e3);
          mean[f] += us;
          lo[f] = std::min(lo[f], us);
          hi[f] = std::max(hi[f], us);
        }
      }
      if (blocks == 0) continue;
      fmt::print("| {} | {} | {} |", kind == 1 ? "gate/up" : "matvecs", launches, blocks);
      for (int f = 1; f < 6; ++f) fmt::print(" {:.2f} ({:.2f}-{:.2f}) |", mean[f] / blocks, lo[f], hi[f]);
      fmt::print("\n");
    }
  }
  if (phasing) {
    std::vector<unsigned long long> h;
    int khz = 0;
    if (!read_probe(phases, kPhaseWords, "phase probe", h, khz)) return 1;
    // Means over every block of every launch of the run (prefill included
    // where it launches these kernels), SM cycles at the maximum clock as us.
    const char* names[kernels::kPhaseProbeKinds][kernels::kPhaseProbeFields - 1] = {
        {"before the wait", "wait", "scores", "max", "sum of exp", "V sum", "groups' sum", "output"},
        {"before the wait", "wait", "pass over x", "scale", "", "", "", ""},
        {"first stages and the wait", "activations staged", "rows", "Q8 of h", "*slowest rows", "", "", ""},
        {"wait", "keys by thread", "bound", "candidates sorted", "published", "", "", ""},
        {"merge", "weights", "pick", "", "", "", "", ""},
        {"before the wait", "wait", "K/V staged", "scores", "softmax", "V sums", "partial out", ""},
        {"statistics", "weights", "sums", "output", "", "", "", ""}};
    const char* kinds[kernels::kPhaseProbeKinds] = {"attention (one chunk)", "deferred norm", "pipelined gate/up",
                                                    "draw (every block)", "draw (the last block)", "split attention (every block)",
                                                    "split attention (the last block)"};
    fmt::print("phase probe (thread 0 of each block, SM cycles at {} MHz as us, mean over blocks and launches)\n", khz / 1000);
    for (int k = 0; k < kernels::kPhaseProbeKinds; ++k) {
      const unsigned long long* r = h.data() + static_cast<size_t>(k) * kernels::kPhaseProbeFields;
      if (r[0] == 0) continue;
      fmt::print("{}: {} blocks |", kinds[k], r[0]);
      for (int f = 1; f < kernels::kPhaseProbeFields && names[k][f - 1][0] != '\0'; ++f) {
        // A name starting with '*' is a maximum over blocks, not a sum.
        const bool max = names[k][f - 1][0] == '*';
        fmt::print(" {} {:.2f} |", names[k][f - 1] + (max ? 1 : 0),
                   static_cast<double>(r[f]) / (max ? 1.0 : static_cast<double>(r[0])) / (khz / 1e3));
      }
      fmt::print("\n");
      if (k == 2 && r[7] != 0 && r[0] > r[7]) {  // the blocks with a group of rows more than the fewest, and the others
        const double us = khz / 1e3;
        fmt::print("pipelined gate/up: rows of the {} blocks with a group more {:.2f} us, of the other {} {:.2f} us\n", r[7],
                   static_cast<double>(r[6]) / static_cast<double>(r[7]) / us, r[0] - r[7],
                   static_cast<double>(r[3] - r[6]) / static_cast<double>(r[0] - r[7]) / us);
      }
    }
  }
  if (!csv.empty()) {
    std::ofstream f(csv);
    f << "index,kernel,grid,start_ns,end_ns,share_ns,duration_ns\n";
    const auto& ks = steps.back();
    for (size_t i = 0; i < ks.size(); ++i) {
      const uint64_t prev_end = i == 0 ? ks[i].start : ks[i - 1].end;
      f << i << ",\"" << ks[i].name << "\"," << ks[i].grid << "," << ks[i].start - ks.front().start << ","
        << ks[i].end - ks.front().start << "," << static_cast<int64_t>(ks[i].end) - static_cast<int64_t>(prev_end) << ","
        << ks[i].end - ks[i].start << "\n";
    }
  }
  return 0;
}

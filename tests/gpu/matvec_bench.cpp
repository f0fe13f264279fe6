// Decode matvec kernels alone, on the weight shapes of real models: time per
// launch and the weight bandwidth it reaches, for each variant named on the
// command line: the plain kernels with a load schedule
// (kernels::set_matvec_schedule; "auto" is the per-launch choice) or the
// streamed ones with a stage shape (kernels::set_matvec_stream_shape; where a
// shape does not apply, the launch falls back to the plain kernel). A tool
// for run_on_device.sh's bench-kernels stage, not a test: it asserts nothing,
// and the weights are random bytes.
//
// Each case cycles through enough copies of its weights (at least 4x the L2)
// that every launch reads them from DRAM, as a decode step does (every
// layer's weights are different). MATVEC_BENCH_L2=1 launches one copy
// again and again instead: weights that fit the L2 then come from there, so
// a kernel's rate is its own (issue, latency), not DRAM's. Launches go back
// to back on one stream with programmatic dependent launch, as in the
// engine; a case's figure is the median over 7 batches of 50 launches.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_util.h"
#include "kernels/kernels.h"

namespace {

using minfer::kernels::DeviceWeight;
using minfer::kernels::WType;

#define CHECK(call)                                                                        \
  do {                                                                                     \
    const cudaError_t st_ = (call);                                                        \
    if (st_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(st_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

struct Case {
  const char* name;
  bool gate_up;      // gate + up with SwiGLU (rows[0] rows each), else a batched matvec
  WType type[3];
  int rows[3];       // per task (0: none)
  int k;
};

// The shapes of qwen2.5-7b (hidden 3584, FFN 18944, 4 KV heads of 128) and
// qwen2.5-0.5b (896, 4864, 2 KV heads of 64) and the types of their Q4_K_M and
// Q8_0 files.
const Case kCases[] = {
    {"7b gate_up q4_k", true, {WType::kQ4_K, WType::kQ4_K}, {18944}, 3584},
    // 528 blocks of 32 rows: two whole waves of the 264 resident blocks
    // (18,944 rows make 2.24): how much the partial third wave costs.
    {"7b gate_up q4_k 2 waves", true, {WType::kQ4_K, WType::kQ4_K}, {16896}, 3584},
    // 33 MB: fits the H200's L2 (60 MB; MATVEC_BENCH_L2=1), 1-2 groups of 32 rows an SM.
    {"7b gate_up q4_k 8192 rows", true, {WType::kQ4_K, WType::kQ4_K}, {8192}, 3584},
    {"7b down q6_k", false, {WType::kQ6_K}, {3584}, 18944},
    {"7b down q4_k", false, {WType::kQ4_K}, {3584}, 18944},
    {"7b o q4_k", false, {WType::kQ4_K}, {3584}, 3584},
    {"7b qkv q4_k+q6_k", false, {WType::kQ4_K, WType::kQ4_K, WType::kQ6_K}, {3584, 512, 512}, 3584},
    {"7b head q6_k", false, {WType::kQ6_K}, {152064}, 3584},
    {"7b gate_up q8_0", true, {WType::kQ8_0, WType::kQ8_0}, {18944}, 3584},
    {"7b down q8_0", false, {WType::kQ8_0}, {3584}, 18944},
    {"7b qkv q8_0", false, {WType::kQ8_0, WType::kQ8_0, WType::kQ8_0}, {3584, 512, 512}, 3584},
    {"0.5b gate_up q8_0", true, {WType::kQ8_0, WType::kQ8_0}, {4864}, 896},
    // 152 blocks of 32 rows on 132 SMs: 20 SMs take two. The same kernel on
    // 132 blocks (one an SM) and on 264 (two an SM): what the two cost.
    {"0.5b gate_up q8_0 132 blocks", true, {WType::kQ8_0, WType::kQ8_0}, {4224}, 896},
    {"0.5b gate_up q8_0 264 blocks", true, {WType::kQ8_0, WType::kQ8_0}, {8448}, 896},
    {"0.5b qkv q5_0+q8_0", false, {WType::kQ5_0, WType::kQ5_0, WType::kQ8_0}, {896, 128, 128}, 896},
    {"1.5b qkv q4_k+q6_k", false, {WType::kQ4_K, WType::kQ4_K, WType::kQ6_K}, {1536, 256, 256}, 1536},
    {"0.5b down q8_0", false, {WType::kQ8_0}, {896}, 4864},
    {"0.5b qkv q8_0", false, {WType::kQ8_0, WType::kQ8_0, WType::kQ8_0}, {896, 128, 128}, 896},
    {"0.5b o q8_0", false, {WType::kQ8_0}, {896}, 896},
    {"0.5b head q8_0", false, {WType::kQ8_0}, {151936}, 896},
    {"1.5b head q6_k", false, {WType::kQ6_K}, {151936}, 1536},
};

struct Planes {
  std::vector<void*> ptrs;
  DeviceWeight w;
  size_t bytes = 0;
};

void* device_random(size_t n, std::mt19937& rng) {
  if (n == 0) return nullptr;
  n = (n + 15) / 16 * 16;  // planes padded to 16 bytes, as the engine's upload pads them
  std::vector<uint32_t> host((n + 3) / 4);
  for (auto& v : host) v = static_cast<uint32_t>(rng());
  void* p = nullptr;
  CHECK(cudaMalloc(&p, n));
  CHECK(cudaMemcpy(p, host.data(), n, cudaMemcpyHostToDevice));
  return p;
}

Planes make_weight(WType type, int rows, int k, std::mt19937& rng) {
  const minfer::kernels::PlaneSizes ps = minfer::kernels::plane_sizes(type, k);
  Planes p;
  p.w.type = type;
  p.w.n_rows = rows;
  p.w.k = k;
  const size_t n = static_cast<size_t>(rows);
  p.w.q = device_random(ps.q_row * n, rng);
  p.w.qh = device_random(ps.qh_row * n, rng);
  p.w.meta = device_random(ps.meta_row * n, rng);
  p.w.d = device_random(ps.d_row * n, rng);
  for (const void* q : {p.w.q, p.w.qh, p.w.meta, p.w.d}) {
    if (q != nullptr) p.ptrs.push_back(const_cast<void*>(q));
  }
  p.bytes = (ps.q_row + ps.qh_row + ps.meta_row + ps.d_row) * n;
  return p;
}

struct Result {
  double us = 0;
  double gbps = 0;
};

// A kernel variant: the plain kernels with a load schedule (-1 auto), or the
// streamed kernels with a stage shape (0: the default).
struct Variant {
  std::string label;
  int lanes = 0;  // lanes a row of the plain kernels (kernels::set_matvec_lanes; 0: per launch)
  int schedule = -1;
  bool stream = false;
  int warps = 0, units = 0, stages = 0;
  bool preload = true;     // kernels::set_matvec_preload
  bool two_types = true;   // kernels::set_matvec_two_types
  int piped_mv = -1;       // kernels::set_matvec_piped
  int piped_gu = -1;       // kernels::set_gate_up_piped
  int piped_stages = 0;    // kernels::set_piped_stages (0: the default)
  int piped_early = 0;     // kernels::set_piped_early (0: every stage before the PDL wait)
  int gemm_tokens = 0;     // > 0: the few-token prefill product (launch_gemm_fused) of that many
                           // tokens instead, a launch a weight; "+sN" its stages
  bool gemm_lanes = false;  // its x in X16Order::kLanes ("gemm-lanes:T")
};

// "auto" | "0" | "1" | "2" (lanes a row picked per launch) | "w:S" (a warp a
// row) | "q:S" (a quarter-warp a row), S = auto, 0, 1 or 2 | "stream" |
// "stream:W/U/S"; then any of "+nopre" (no
// weights loaded before the PDL wait), "+generic" (two-type batches on the
// run-time-typed kernel), "+plain" (neither matvecs nor gate/up pipelined),
// "+plainmv" (matvecs not pipelined), "+piped" (every eligible launch
// pipelined, whatever its size), "+sN" (pipelined launches at most N stages),
// "+eN" (N of them issued before the PDL wait) | "gemm:T" (launch_gemm_fused
// for T tokens, each weight of the case a launch; "+sN": set_gemm_fused_stages)
// | "gemm-lanes:T" (the same, x in the lanes' order, kernels::X16Order).
Variant parse_variant(const std::string& arg) {
  Variant v;
  v.label = arg;
  std::string a = arg;
  for (size_t plus = a.rfind('+'); plus != std::string::npos; plus = a.rfind('+')) {
    const std::string opt = a.substr(plus + 1);
    if (opt == "nopre") v.preload = false;
    else if (opt == "generic") v.two_types = false;
    else if (opt == "plain") v.piped_mv = v.piped_gu = 0;
    else if (opt == "plainmv") v.piped_mv = 0;
    else if (opt == "piped") v.piped_mv = v.piped_gu = 1;
    else if (opt.size() > 1 && (opt[0] == 's' || opt[0] == 'e') && std::isdigit(static_cast<unsigned char>(opt[1])))
      (opt[0] == 's' ? v.piped_stages : v.piped_early) = std::atoi(opt.c_str() + 1);
    else std::fprintf(stderr, "unknown variant option '%s' in %s\n", opt.c_str(), arg.c_str());
    a.resize(plus);
  }
  if (a.rfind("gemm:", 0) == 0 || a.rfind("gemm-lanes:", 0) == 0) {
    v.gemm_lanes = a[4] == '-';
    v.gemm_tokens = std::max(1, std::atoi(a.c_str() + a.find(':') + 1));
  } else if (a.rfind("q:", 0) == 0 || a.rfind("w:", 0) == 0) {
    v.lanes = a[0] == 'q' ? 8 : 32;
    if (a.substr(2) != "auto") v.schedule = std::atoi(a.c_str() + 2);
  } else if (a.rfind("stream", 0) == 0) {
    v.stream = true;
    if (a.size() > 7) std::sscanf(a.c_str() + 7, "%d/%d/%d", &v.warps, &v.units, &v.stages);
  } else if (a != "auto") {
    v.schedule = std::atoi(a.c_str());
  }
  return v;
}

Result run_case(const Case& c, const Variant& variant, size_t l2_bytes, cudaStream_t stream) {
  std::mt19937 rng(1234);
  const int n_tasks = c.gate_up ? 2 : (c.rows[2] ? 3 : c.rows[1] ? 2 : 1);
  size_t copy_bytes = 0;
  for (int i = 0; i < n_tasks; ++i) {
    const minfer::kernels::PlaneSizes ps = minfer::kernels::plane_sizes(c.type[i], c.k);
    copy_bytes += (ps.q_row + ps.qh_row + ps.meta_row + ps.d_row) * static_cast<size_t>(c.gate_up ? c.rows[0] : c.rows[i]);
  }
  const char* l2_env = std::getenv("MATVEC_BENCH_L2");
  const bool from_l2 = l2_env != nullptr && std::strcmp(l2_env, "1") == 0;
  const int copies = from_l2 ? 1 : static_cast<int>(std::max<size_t>(2, (4 * l2_bytes + copy_bytes - 1) / copy_bytes));
  std::vector<std::vector<Planes>> w(copies);
  for (auto& set : w) {
    for (int i = 0; i < n_tasks; ++i) set.push_back(make_weight(c.type[i], c.gate_up ? c.rows[0] : c.rows[i], c.k, rng));
  }
  // Activations: random Q8 values, scales 1/64 and sums 0; f32 copies.
  int max_rows = 0;
  for (int i = 0; i < 3; ++i) max_rows = std::max(max_rows, c.rows[i]);
  const int out_n = std::max(max_rows, c.k);
  int8_t* xq = static_cast<int8_t*>(device_random(static_cast<size_t>(c.k), rng));
  std::vector<float> ds_host(static_cast<size_t>(c.k / 32) * 2);
  for (size_t i = 0; i < ds_host.size(); i += 2) ds_host[i] = 1.0f / 64, ds_host[i + 1] = 0;
  void* ds = nullptr;
  CHECK(cudaMalloc(&ds, ds_host.size() * sizeof(float)));
  CHECK(cudaMemcpy(ds, ds_host.data(), ds_host.size() * sizeof(float), cudaMemcpyHostToDevice));
  float* x = nullptr;
  CHECK(cudaMalloc(reinterpret_cast<void**>(&x), static_cast<size_t>(c.k) * sizeof(float)));
  CHECK(cudaMemset(x, 0, static_cast<size_t>(c.k) * sizeof(float)));
  float* y[3];
  for (auto& p : y) CHECK(cudaMalloc(reinterpret_cast<void**>(&p), static_cast<size_t>(out_n) * sizeof(float)));
  int8_t* hq = nullptr;
  void* hds = nullptr;
  CHECK(cudaMalloc(reinterpret_cast<void**>(&hq), static_cast<size_t>(out_n)));
  CHECK(cudaMalloc(&hds, static_cast<size_t>(out_n / 32 + 1) * 8));

  minfer::kernels::set_matvec_lanes(variant.lanes);
  minfer::kernels::set_matvec_schedule(variant.schedule);
  minfer::kernels::set_matvec_stream(variant.stream);
  minfer::kernels::set_matvec_stream_shape(variant.warps, variant.units, variant.stages);
  minfer::kernels::set_matvec_preload(variant.preload);
  minfer::kernels::set_matvec_two_types(variant.two_types);
  minfer::kernels::set_matvec_piped(variant.piped_mv);
  minfer::kernels::set_gate_up_piped(variant.piped_gu);
  minfer::kernels::set_piped_stages(variant.piped_stages);
  minfer::kernels::set_piped_early(variant.piped_early);
  minfer::kernels::MatvecInput in;
  in.x = x;
  in.xq.q = xq;
  in.xq.ds = ds;
  // The few-token prefill product: x zeros (f16), y [tokens][rows].
  const int gemm_tokens = variant.gemm_tokens;
  void* x16 = nullptr;
  float* gy = nullptr;
  if (gemm_tokens > 0) {
    minfer::kernels::set_gemm_fused_stages(variant.piped_stages);
    CHECK(cudaMalloc(&x16, static_cast<size_t>(gemm_tokens) * c.k * 2));
    CHECK(cudaMemset(x16, 0, static_cast<size_t>(gemm_tokens) * c.k * 2));
    CHECK(cudaMalloc(reinterpret_cast<void**>(&gy), static_cast<size_t>(gemm_tokens) * max_rows * sizeof(float)));
  }
  auto launch = [&](int copy) {
    const std::vector<Planes>& set = w[static_cast<size_t>(copy)];
    if (gemm_tokens > 0) {
      for (const Planes& p : set) {
        const cudaError_t st = minfer::kernels::launch_gemm_fused(p.w, x16, c.k, gemm_tokens, gy, p.w.n_rows, false, stream,
                                                                        variant.gemm_lanes ? minfer::kernels::X16Order::kLanes
                                                                                           : minfer::kernels::X16Order::kNatural);
        if (st != cudaSuccess) return st;
      }
      return cudaSuccess;
    }
    if (c.gate_up) {
      return minfer::kernels::launch_gate_up_swiglu(set[0].w, set[1].w, in, y[0], {hq, hds}, stream);
    }
    minfer::kernels::MatvecTask tasks[3];
    for (int i = 0; i < n_tasks; ++i) {
      tasks[i].w = set[static_cast<size_t>(i)].w;
      tasks[i].y = y[i];
    }
    return minfer::kernels::launch_matvec(tasks, n_tasks, in, stream);
  };
  constexpr int kBatch = 50, kBatches = 7;
  for (int i = 0; i < 2 * copies; ++i) CHECK(launch(i % copies));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  int next = 0;
  for (int b = 0; b < kBatches; ++b) {
    CHECK(cudaEventRecord(e0, stream));
    for (int i = 0; i < kBatch; ++i) CHECK(launch(next++ % copies));
    CHECK(cudaEventRecord(e1, stream));
    CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  Result r;
  r.us = ms[ms.size() / 2] * 1e3 / kBatch;
  r.gbps = static_cast<double>(copy_bytes) / (r.us * 1e-6) / 1e9;
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  for (auto& set : w) {
    for (auto& p : set) {
      for (void* q : p.ptrs) cudaFree(q);
    }
  }
  cudaFree(xq);
  cudaFree(ds);
  cudaFree(x);
  for (auto& p : y) cudaFree(p);
  cudaFree(hq);
  cudaFree(hds);
  cudaFree(x16);
  cudaFree(gy);
  return r;
}

}  // namespace

// Arguments: the variants to time (parse_variant), each a column pair.
int main(int argc, char** argv) {
  std::vector<Variant> variants;
  for (int i = 1; i < argc; ++i) variants.push_back(parse_variant(argv[i]));
  if (variants.empty()) {
    for (const char* v : {"auto", "0", "1", "2", "stream"}) variants.push_back(parse_variant(v));
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const auto copy = minfer::cuda::measure_copy_bandwidth_gbps();
  const double copy_gbps = copy ? *copy : 0.0;
  minfer::kernels::set_pdl(minfer::kernels::device_limits().cc_major >= 9);  // the kernels' capability
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("%s, L2 %d MB, copy bandwidth %.0f GB/s\n\n", prop.name, prop.l2CacheSize >> 20, copy_gbps);
  std::printf("| case |");
  for (const Variant& v : variants) std::printf(" %s µs | GB/s (%% of copy) |", v.label.c_str());
  std::printf("\n|---|");
  for (size_t i = 0; i < variants.size(); ++i) std::printf("---:|---:|");
  std::printf("\n");
  const char* only = std::getenv("MATVEC_BENCH_CASE");  // one case (profiling)
  for (const Case& c : kCases) {
    if (only != nullptr && std::strcmp(only, c.name) != 0) continue;
    std::printf("| %s |", c.name);
    for (const Variant& v : variants) {
      if (v.stream && prop.major < 9) {
        std::printf(" - | (needs sm_90) |");
        continue;
      }
      const uint64_t streamed = minfer::kernels::matvec_stream_launches();
      const uint64_t piped = minfer::kernels::piped_launches();
      const Result r = run_case(c, v, static_cast<size_t>(prop.l2CacheSize), stream);
      const bool fell_back = v.stream && minfer::kernels::matvec_stream_launches() == streamed;
      // A pipelined case says its stages: "[5]".
      const std::string stages =
          minfer::kernels::piped_launches() != piped ? " [" + std::to_string(minfer::kernels::last_piped_stages()) + "]" : "";
      std::printf(" %.1f%s%s | %.0f (%.0f%%) |", r.us, fell_back ? " (plain)" : "", stages.c_str(), r.gbps,
                  copy_gbps > 0 ? 100 * r.gbps / copy_gbps : 0.0);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

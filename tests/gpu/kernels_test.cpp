// Every CUDA kernel against the CPU reference (engine/backend/cpu/reference),
// on seeded random data, odd sizes and the edge cases: one row, one token,
// one cell, head dims 64 and 128 (and 8, the shipped model's), GQA groups of
// 1, 2 and 7, scattered cache cells, f16 and f32 caches. Fused kernels are
// checked bit for bit against the unfused chain. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <set>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "engine/backend/cpu/reference/reference.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/backend/cuda/repack.h"
#include "engine/common/half.h"
#include "engine/quant/quant.h"
#include "kernels/kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace minfer {
namespace {

using test::DeviceArray;

// A weight matrix quantized on the CPU (the GGUF bytes), kept for the
// reference, and uploaded in the GPU plane layout.
struct TestWeight {
  std::vector<uint8_t> bytes;
  Weight cpu;
  DeviceArray<uint8_t> q, qh, meta, d;
  kernels::DeviceWeight dev;

  TestWeight(DType type, int rows, int k, uint32_t seed, float scale = 0.05f) {
    const std::vector<float> f = test::random_floats(static_cast<size_t>(rows) * k, seed, scale);
    const uint64_t row_bytes = row_size(type, static_cast<uint64_t>(k));
    bytes.resize(row_bytes * rows);
    for (int r = 0; r < rows; ++r) quant::quantize_row(type, f.data() + static_cast<size_t>(r) * k, bytes.data() + r * row_bytes, k);
    cpu.name = "w";
    cpu.type = type;
    cpu.n_in = k;
    cpu.n_out = rows;
    cpu.data = bytes.data();
    cpu.row_bytes = row_bytes;
    const auto wt = static_cast<kernels::WType>(static_cast<uint32_t>(type));
    const kernels::PlaneSizes ps = kernels::plane_sizes(wt, k);
    // Each plane padded to 16 bytes, as the engine's upload pads them: the
    // streamed matvec copies whole 16-byte pieces.
    auto padded = [](size_t n) { return (n + 15) / 16 * 16; };
    std::vector<uint8_t> hq(padded(ps.q_row * rows)), hqh(padded(ps.qh_row * rows)), hmeta(padded(ps.meta_row * rows)),
        hd(padded(ps.d_row * rows));
    kernels::repack_rows(wt, k, bytes.data(), row_bytes, rows, hq.data(), ps.qh_row ? hqh.data() : nullptr,
                         ps.meta_row ? hmeta.data() : nullptr, ps.d_row ? hd.data() : nullptr);
    q.upload(hq);
    if (ps.qh_row) qh.upload(hqh);
    if (ps.meta_row) meta.upload(hmeta);
    if (ps.d_row) d.upload(hd);
    dev.type = wt;
    dev.n_rows = rows;
    dev.k = k;
    dev.q = q.get();
    dev.qh = ps.qh_row ? qh.get() : nullptr;
    dev.meta = ps.meta_row ? meta.get() : nullptr;
    dev.d = ps.d_row ? d.get() : nullptr;
  }
};

// Host side, no GPU needed (runs in CI): the split-halves layout of 32-byte
// units (weight_layout.h) puts every byte of a row somewhere distinct, the
// first halves of a group's units side by side (what a warp's first load
// instruction reads), and repack_rows puts each GGUF unit's bytes there.
TEST(WeightLayout, SplitHalvesPlaceEveryByteOnceAndRepackFollowsThem) {
  for (uint32_t n : {1u, 5u, 28u, 31u, 32u, 33u, 56u, 64u, 152u, 296u}) {
    std::vector<int> seen(32 * n, 0);
    for (uint32_t u = 0; u < n; ++u) {
      for (uint32_t b = 0; b < 32; ++b) {
        const uint32_t at = kernels::split_offset(u, b, n);
        ASSERT_LT(at, 32 * n) << "unit " << u << " byte " << b << " of " << n;
        ++seen[at];
      }
      const uint32_t first = u / 32 * 32;
      EXPECT_EQ(kernels::split_offset(u, 0, n), 32 * first + 16 * (u - first)) << "unit " << u << " of " << n;
      EXPECT_EQ(kernels::split_offset(u, 16, n) - kernels::split_offset(u, 0, n), 16 * std::min(32u, n - first));
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(32 * n)) << n << " units";
  }
  // One Q8_0 row of 56 blocks and one Q4_K row of 14 super-blocks (56 units).
  const int k8 = 56 * 32, k4 = 14 * 256;
  std::vector<uint8_t> q8(56 * 34), q4(14 * 144);
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<uint8_t>(i * 7 + 3);
  for (size_t i = 0; i < q4.size(); ++i) q4[i] = static_cast<uint8_t>(i * 13 + 5);
  std::vector<uint8_t> q(k8), meta(56 * 2), q4q(k4 / 2), q4meta(14 * 16);
  kernels::repack_rows(kernels::WType::kQ8_0, k8, q8.data(), q8.size(), 1, q.data(), nullptr, meta.data(), nullptr);
  kernels::repack_rows(kernels::WType::kQ4_K, k4, q4.data(), q4.size(), 1, q4q.data(), nullptr, q4meta.data(), nullptr);
  for (uint32_t u = 0; u < 56; ++u) {
    for (uint32_t b = 0; b < 32; ++b) {
      ASSERT_EQ(q[kernels::split_offset(u, b, 56)], q8[u * 34 + 2 + b]) << "Q8_0 block " << u << " byte " << b;
      ASSERT_EQ(q4q[kernels::split_offset(u, b, 56)], q4[u / 4 * 144 + 16 + u % 4 * 32 + b]) << "Q4_K unit " << u << " byte " << b;
    }
  }
}

// Host side (runs in CI): the places of the Q6_K pipelined matvec's staged
// activations (dot.cuh summed_chunk) permute each 128-byte row's chunks; the
// reads a Q6_K unit's groups make through them (SummedSwizzledActs::every2:
// chunk c's place ^ 2 g) land where summed_chunk puts chunks c + 2 g; and each
// quarter of a warp's reads of a group falls on eight distinct 16-byte places
// of the banks (a wavefront), where swizzled_chunk's placed two lanes on each
// place of four.
TEST(StagedActs, Q6KPlacesReadEachGroupInOneWavefront) {
  for (int c = 0; c < 8 * 64; ++c) {
    const int p = kernels::summed_chunk(c);
    ASSERT_EQ(p / 8, c / 8) << "chunk " << c << " left its row";
    for (int d = c / 8 * 8; d < c; ++d) ASSERT_NE(kernels::summed_chunk(d), p) << "chunks " << d << " and " << c;
    if (c % 8 < 2) {
      for (int g = 0; g < 4; ++g) ASSERT_EQ(kernels::summed_chunk(c + 2 * g), p ^ (2 * g)) << "chunk " << c << " group " << g;
    }
    if (c % 4 == 0) {
      for (int i = 0; i < 4; ++i) ASSERT_EQ(kernels::summed_chunk(c + i), p ^ i) << "chunk " << c << " + " << i;
    }
  }
  // Lane l of a step takes unit u = l + 32 e: chunks x + 2 g, x = 8 (u / 2) + u % 2.
  for (int e = 0; e < 3; ++e) {
    for (int g = 0; g < 4; ++g) {
      for (int quarter = 0; quarter < 4; ++quarter) {
        std::set<int> summed, swizzled;
        for (int l = 8 * quarter; l < 8 * quarter + 8; ++l) {
          const int u = l + 32 * e, x = 8 * (u / 2) + u % 2;
          summed.insert(kernels::summed_chunk(x + 2 * g) % 8);
          swizzled.insert(kernels::swizzled_chunk(x + 2 * g) % 8);
        }
        EXPECT_EQ(summed.size(), 8u) << "step " << e << " group " << g << " quarter " << quarter;
        EXPECT_EQ(swizzled.size(), 4u) << "step " << e << " group " << g << " quarter " << quarter;
      }
    }
  }
}

// Host side (runs in CI): the decode kernels address a plane with 32-bit
// offsets (dot.cuh plane_at), so the weight gate turns away a matrix with a
// plane of 4 GiB or more; the bound is exact for each plane.
TEST(WeightLayout, PlaneOffsetsFitUnderFourGiB) {
  using kernels::WType;
  // Q8_0, k 4096: a q row is 4,096 bytes, so 2^20 rows make 4 GiB.
  EXPECT_TRUE(kernels::plane_offsets_fit(WType::kQ8_0, 4096, (int64_t{1} << 20) - 1));
  EXPECT_FALSE(kernels::plane_offsets_fit(WType::kQ8_0, 4096, int64_t{1} << 20));
  // Q4_K, k 4096: 2,048 bytes a q row.
  EXPECT_TRUE(kernels::plane_offsets_fit(WType::kQ4_K, 4096, (int64_t{1} << 21) - 1));
  EXPECT_FALSE(kernels::plane_offsets_fit(WType::kQ4_K, 4096, int64_t{1} << 21));
  // F32, k 8192: 32 KiB a row; Q6_K's qh and d planes are smaller than its q plane.
  EXPECT_TRUE(kernels::plane_offsets_fit(WType::kF32, 8192, 131071));
  EXPECT_FALSE(kernels::plane_offsets_fit(WType::kF32, 8192, 131072));
  EXPECT_TRUE(kernels::plane_offsets_fit(WType::kQ6_K, 4096, (int64_t{1} << 21) - 1));
  EXPECT_FALSE(kernels::plane_offsets_fit(WType::kQ6_K, 4096, int64_t{1} << 21));
  // The largest matrices of the supported families fit: a 152,064 × 8,192 head in Q8_0.
  EXPECT_TRUE(kernels::plane_offsets_fit(WType::kQ8_0, 8192, 152064));
}

// Host side (runs in CI): the upload repacks a chunk's row ranges on a pool
// of threads (cuda::repack_rows_parallel); that gives the bytes of one
// repack_rows over the whole chunk, for every weight type and row count.
TEST(WeightLayout, ParallelRepackGivesTheBytesOfOneRepack) {
  constexpr int kK = 2 * 256;
  ThreadPool pool(3);
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                     DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    for (int rows : {1, 2, 7, 13, 40}) {
      const auto wt = static_cast<kernels::WType>(static_cast<uint32_t>(type));
      const kernels::PlaneSizes ps = kernels::plane_sizes(wt, kK);
      const size_t row_bytes = row_size(type, kK);
      std::vector<uint8_t> src(row_bytes * rows);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 31 + 7);
      const std::array<size_t, 4> plane_row{ps.q_row, ps.qh_row, ps.meta_row, ps.d_row};
      using Planes = std::array<std::vector<uint8_t>, 4>;
      Planes one, parallel;
      for (int i = 0; i < 4; ++i) {
        one[i].assign(plane_row[i] * rows, 0);
        parallel[i].assign(plane_row[i] * rows, 0);
      }
      auto at = [&](Planes& p, int i) { return plane_row[i] ? p[i].data() : nullptr; };
      kernels::repack_rows(wt, kK, src.data(), row_bytes, rows, at(one, 0), at(one, 1), at(one, 2), at(one, 3));
      cuda::repack_rows_parallel(pool, wt, kK, src.data(), row_bytes, rows, at(parallel, 0), at(parallel, 1),
                                 at(parallel, 2), at(parallel, 3));
      for (int i = 0; i < 4; ++i) EXPECT_EQ(parallel[i], one[i]) << dtype_name(type) << " rows " << rows << " plane " << i;
      EXPECT_NE(std::count(one[0].begin(), one[0].end(), 0), static_cast<long>(one[0].size())) << dtype_name(type);
    }
  }
}

struct Q8Device {
  DeviceArray<int8_t> q;
  DeviceArray<float> ds;
  Q8Device(int rows, int k) : q(static_cast<size_t>(rows) * k), ds(static_cast<size_t>(rows) * (k / 32) * 2) {}
  kernels::Q8Rows rows() { return kernels::Q8Rows{q.get(), ds.get()}; }
};

// Turns the pipelined kernels off for a scope (restoring them after), so that
// a test comparing variants of the plain kernels runs the plain kernels.
struct PipedOff {
  PipedOff() {
    kernels::set_matvec_piped(0);
    kernels::set_gate_up_piped(0);
  }
  ~PipedOff() {
    kernels::set_matvec_piped(-1);
    kernels::set_gate_up_piped(-1);
  }
  PipedOff(const PipedOff&) = delete;
  PipedOff& operator=(const PipedOff&) = delete;
};

bool is_float_type(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// Tolerance of a matvec element relative to Σ|w·x| of its row (the scale of
// the terms; a single dot can be near zero): float weights see only f32
// rounding; quantized weights meet Q8 activations, whose rounding error is at
// most half a step of 1/127 of each block's max.
double matvec_tolerance(DType t) { return is_float_type(t) ? 1e-5 : 8e-3; }

// Σ_k |W[r][k] x[k]| per row, from the dequantized weights.
std::vector<double> abs_terms(const Weight& w, const std::vector<float>& x) {
  std::vector<float> row(static_cast<size_t>(w.n_in));
  std::vector<double> out(static_cast<size_t>(w.n_out));
  for (int64_t r = 0; r < w.n_out; ++r) {
    quant::dequantize_row(w.type, w.data + r * w.row_bytes, row.data(), w.n_in);
    double s = 0;
    for (int64_t k = 0; k < w.n_in; ++k) s += std::abs(static_cast<double>(row[static_cast<size_t>(k)]) * x[static_cast<size_t>(k)]);
    out[static_cast<size_t>(r)] = s;
  }
  return out;
}

// Every row within tol × Σ|terms|; prints the worst on failure.
void expect_rows_within(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& scale,
                        double tol, const std::string& what) {
  double worst = 0;
  size_t at = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    const double e = std::isnan(got[r]) ? 1e30 : std::abs(static_cast<double>(got[r]) - want[r]) / (scale[r] + 1e-30);
    if (e > worst) {
      worst = e;
      at = r;
    }
  }
  EXPECT_LE(worst, tol) << what << ": row " << at << " gpu " << got[at] << " ref " << want[at] << " (scale " << scale[at] << ")";
}

struct MatvecCase {
  DType type;
  int rows, k;
};

class GpuMatvec : public testing::TestWithParam<MatvecCase> {};

TEST_P(GpuMatvec, MatchesReferenceWithBiasAndResidual) {
  MINFER_REQUIRE_GPU();
  const MatvecCase c = GetParam();
  TestWeight w(c.type, c.rows, c.k, 1000 + c.rows);
  const std::vector<float> x = test::random_floats(static_cast<size_t>(c.k), 7);
  const std::vector<float> bias = test::random_floats(static_cast<size_t>(c.rows), 8);
  const std::vector<float> resid = test::random_floats(static_cast<size_t>(c.rows), 9);
  DeviceArray<float> dx, db, dy, dy2;
  dx.upload(x);
  db.upload(bias);
  dy.resize(static_cast<size_t>(c.rows));
  dy.poison();
  dy2.upload(resid);
  Q8Device xq(1, c.k % 32 == 0 ? c.k : 32);
  if (c.k % 32 == 0) {
    CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, c.k, xq.rows(), nullptr));
  }
  kernels::MatvecInput in;
  in.x = dx.get();
  in.xq = xq.rows();
  kernels::MatvecTask tasks[2];
  tasks[0].w = w.dev;
  tasks[0].y = dy.get();
  tasks[0].bias = db.get();
  tasks[1].w = w.dev;
  tasks[1].y = dy2.get();
  tasks[1].accumulate = true;
  CUDA_ASSERT(kernels::launch_matvec(tasks, 2, in, nullptr));
  std::vector<float> expected(static_cast<size_t>(c.rows));
  ref::matmul_ref(w.cpu, nullptr, x.data(), expected.data());
  const std::vector<float> y = dy.download(), y2 = dy2.download();
  std::vector<float> with_bias(expected), with_resid(expected);
  for (int r = 0; r < c.rows; ++r) {
    with_bias[static_cast<size_t>(r)] += bias[static_cast<size_t>(r)];
    with_resid[static_cast<size_t>(r)] += resid[static_cast<size_t>(r)];
  }
  const std::vector<double> scale = abs_terms(w.cpu, x);
  expect_rows_within(y, with_bias, scale, matvec_tolerance(c.type), std::string(dtype_name(c.type)) + " bias");
  expect_rows_within(y2, with_resid, scale, matvec_tolerance(c.type), std::string(dtype_name(c.type)) + " residual");
}

INSTANTIATE_TEST_SUITE_P(
    Types, GpuMatvec,
    testing::Values(MatvecCase{DType::kF32, 33, 172}, MatvecCase{DType::kF32, 64, 64}, MatvecCase{DType::kF16, 7, 896},
                    MatvecCase{DType::kF16, 5, 172}, MatvecCase{DType::kBF16, 129, 512}, MatvecCase{DType::kQ8_0, 1, 896},
                    MatvecCase{DType::kQ8_0, 333, 4864}, MatvecCase{DType::kQ4_0, 77, 896}, MatvecCase{DType::kQ4_1, 77, 896},
                    MatvecCase{DType::kQ5_0, 77, 896}, MatvecCase{DType::kQ5_1, 77, 896}, MatvecCase{DType::kQ4_K, 1, 256},
                    MatvecCase{DType::kQ4_K, 150, 3584}, MatvecCase{DType::kQ5_K, 150, 1536}, MatvecCase{DType::kQ6_K, 3, 256},
                    MatvecCase{DType::kQ6_K, 150, 4864}),
    [](const testing::TestParamInfo<MatvecCase>& i) {
      return std::string(dtype_name(i.param.type)) + "_" + std::to_string(i.param.rows) + "x" + std::to_string(i.param.k);
    });

TEST(GpuGateUp, FusedEqualsChainBitForBitAndMatchesReference) {
  MINFER_REQUIRE_GPU();
  for (DType type : {DType::kQ8_0, DType::kQ4_K, DType::kF16}) {
    const int rows = 256, k = 512;
    TestWeight gate(type, rows, k, 11), up(type, rows, k, 12);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(k), 13);
    DeviceArray<float> dx, h(rows), g(rows), u(rows), h2(rows);
    dx.upload(x);
    Q8Device xq(1, k), hq(1, rows), hq2(1, rows);
    CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, k, xq.rows(), nullptr));
    kernels::MatvecInput in{dx.get(), xq.rows()};
    CUDA_ASSERT(kernels::launch_gate_up_swiglu(gate.dev, up.dev, in, h.get(), hq.rows(), nullptr));
    // The chain: gate and up matvecs, SwiGLU, quantize.
    kernels::MatvecTask tasks[2];
    tasks[0].w = gate.dev;
    tasks[0].y = g.get();
    tasks[1].w = up.dev;
    tasks[1].y = u.get();
    CUDA_ASSERT(kernels::launch_matvec(tasks, 2, in, nullptr));
    CUDA_ASSERT(kernels::launch_swiglu(g.get(), u.get(), rows, h2.get(), nullptr, hq2.rows(), rows, nullptr));
    const auto a = h.download(), b = h2.download();
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << dtype_name(type);
    const auto qa = hq.q.download(), qb = hq2.q.download();
    EXPECT_EQ(qa, qb) << dtype_name(type);
    EXPECT_EQ(hq.ds.download(), hq2.ds.download()) << dtype_name(type);
    std::vector<float> rg(rows), ru(rows), rh(rows);
    ref::matmul_ref(gate.cpu, nullptr, x.data(), rg.data());
    ref::matmul_ref(up.cpu, nullptr, x.data(), ru.data());
    ref::swiglu_ref(rg.data(), ru.data(), rh.data(), rows);
    // SwiGLU multiplies two such products: the errors add (relative to the scales).
    const std::vector<double> sg = abs_terms(gate.cpu, x), su = abs_terms(up.cpu, x);
    std::vector<double> scale(rows);
    for (int r = 0; r < rows; ++r) {
      scale[static_cast<size_t>(r)] = sg[static_cast<size_t>(r)] * std::abs(ru[static_cast<size_t>(r)]) + su[static_cast<size_t>(r)] * std::abs(rg[static_cast<size_t>(r)]);
    }
    expect_rows_within(a, rh, scale, 2 * matvec_tolerance(type), std::string(dtype_name(type)) + " gate/up");
  }
}

// Both load schedules (kernels::set_matvec_schedule) sum the same units in
// the same order: their results must be identical, on rows whose unit count
// leaves every kind of remainder (fewer units than lanes, a partial group,
// whole groups); and so must a row whose first units were loaded before the
// PDL wait (kernels::set_matvec_preload).
TEST(GpuMatvecSchedule, ClampedGroupsEqualUnitAtATimeBitForBit) {
  MINFER_REQUIRE_GPU();
  const PipedOff plain;  // the plain kernels' variants, not the pipelined ones
  const int saved = kernels::matvec_schedule();
  for (const MatvecCase c : {MatvecCase{DType::kQ4_K, 96, 3584}, MatvecCase{DType::kQ4_K, 64, 256},
                             MatvecCase{DType::kQ5_K, 64, 4864}, MatvecCase{DType::kQ6_K, 64, 18944},
                             MatvecCase{DType::kQ8_0, 64, 4864}, MatvecCase{DType::kQ8_0, 32, 896},
                             MatvecCase{DType::kQ4_0, 64, 2080}, MatvecCase{DType::kQ5_1, 32, 896},
                             MatvecCase{DType::kF16, 32, 4104}, MatvecCase{DType::kF32, 32, 172}}) {
    TestWeight w(c.type, c.rows, c.k, 21), w2(c.type, c.rows, c.k, 22);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(c.k), 23);
    DeviceArray<float> dx;
    dx.upload(x);
    Q8Device xq(1, c.k % 32 == 0 ? c.k : 32);
    if (c.k % 32 == 0) {
      CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, c.k, xq.rows(), nullptr));
    }
    kernels::MatvecInput in{dx.get(), xq.rows()};
    // Schedules 0, 1, 2 and the per-launch choice (-1), with the first units
    // preloaded (the default: these launches are one wave); then the
    // per-launch choice without the preload.
    std::vector<float> y[5], h[5];
    for (int s = 0; s < 5; ++s) {
      kernels::set_matvec_schedule(s >= 3 ? -1 : s);
      kernels::set_matvec_preload(s != 4);
      DeviceArray<float> dy(static_cast<size_t>(c.rows)), dh(static_cast<size_t>(c.rows));
      Q8Device hq(1, c.rows);
      kernels::MatvecTask t;
      t.w = w.dev;
      t.y = dy.get();
      CUDA_ASSERT(kernels::launch_matvec(&t, 1, in, nullptr));
      CUDA_ASSERT(kernels::launch_gate_up_swiglu(w.dev, w2.dev, in, dh.get(), hq.rows(), nullptr));
      y[s] = dy.download();
      h[s] = dh.download();
    }
    kernels::set_matvec_schedule(saved);
    kernels::set_matvec_preload(true);
    for (int s = 1; s < 5; ++s) {
      EXPECT_EQ(0, std::memcmp(y[0].data(), y[s].data(), y[0].size() * sizeof(float))) << dtype_name(c.type) << " k " << c.k << " schedule " << s;
      EXPECT_EQ(0, std::memcmp(h[0].data(), h[s].data(), h[0].size() * sizeof(float))) << dtype_name(c.type) << " k " << c.k << " schedule " << s;
    }
    for (size_t r = 0; r < y[0].size(); ++r) ASSERT_TRUE(std::isfinite(y[0][r])) << dtype_name(c.type) << " row " << r;
  }
}

// A three-weight batch of one input — with a bias, accumulating into a
// residual, folding an argmax — and gate/up of the first two weights (rows
// a multiple of 32), as the bit-for-bit comparisons of kernel variants run
// them.
struct BatchOut {
  std::vector<float> y1, y2, y3, h;
  std::vector<int8_t> hq;
  unsigned long long argmax = 0;
};
void run_batch(const TestWeight& w, const TestWeight& w2, const TestWeight& w3, const kernels::MatvecInput& in,
               const float* bias, const std::vector<float>& resid, BatchOut& o) {
  const int rows = w.dev.n_rows;
  DeviceArray<float> y1(static_cast<size_t>(rows)), y2, y3(static_cast<size_t>(w3.dev.n_rows));
  y2.upload(resid);
  DeviceArray<unsigned long long> am(1);
  CUDA_ASSERT(cudaMemset(am.get(), 0, sizeof(unsigned long long)));
  kernels::MatvecTask t[3] = {{w.dev, y1.get(), bias}, {w2.dev, y2.get(), nullptr, true}, {w3.dev, y3.get(), nullptr, false, am.get()}};
  CUDA_ASSERT(kernels::launch_matvec(t, 3, in, nullptr));
  if (rows % 32 == 0) {
    DeviceArray<float> h(static_cast<size_t>(rows));
    Q8Device hq(1, rows);
    CUDA_ASSERT(kernels::launch_gate_up_swiglu(w.dev, w2.dev, in, h.get(), hq.rows(), nullptr));
    o.h = h.download();
    o.hq = hq.q.download();
  }
  o.y1 = y1.download();
  o.y2 = y2.download();
  o.y3 = y3.download();
  o.argmax = am.download()[0];
}
void expect_same_batch(const BatchOut& got, const BatchOut& want, const std::string& what) {
  test::expect_same_bits(got.y1, want.y1, what + " bias");
  test::expect_same_bits(got.y2, want.y2, what + " residual");
  test::expect_same_bits(got.y3, want.y3, what + " third weight");
  EXPECT_EQ(got.argmax, want.argmax) << what;
  test::expect_same_bits(got.h, want.h, what + " gate/up");
  EXPECT_EQ(got.hq, want.hq) << what;
}

// The streamed kernels (weights through shared memory by bulk copies, sm_90)
// compute the plain kernels' sums in the same order: identical bits, for
// every stage shape, on rows of one slice or several with a partial last
// one, row counts that leave a partial group, a three-weight batch with bias,
// residual and argmax, and gate/up with its Q8 output.
TEST(GpuMatvecStream, StreamedEqualsPlainBitForBit) {
  MINFER_REQUIRE_GPU();
  MINFER_REQUIRE_SM90();
  const PipedOff plain;  // the plain kernels' variants, not the pipelined ones
  struct Shape {
    int warps, units, stages;
  };
  const Shape shapes[] = {{0, 0, 0}, {1, 32, 2}, {3, 64, 3}, {8, 32, 8}, {5, 64, 2}};
  for (const MatvecCase c : {MatvecCase{DType::kQ8_0, 37, 896}, MatvecCase{DType::kQ8_0, 64, 4864},
                             MatvecCase{DType::kQ8_0, 9, 96}, MatvecCase{DType::kQ4_K, 96, 3584},
                             MatvecCase{DType::kQ4_K, 33, 256}, MatvecCase{DType::kQ4_K, 32, 4608},
                             MatvecCase{DType::kQ5_K, 64, 4864}, MatvecCase{DType::kQ6_K, 45, 18944},
                             MatvecCase{DType::kQ6_K, 64, 3584}}) {
    TestWeight w(c.type, c.rows, c.k, 91), w2(c.type, c.rows, c.k, 92), w3(c.type, 2 * c.rows + 3, c.k, 93);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(c.k), 94);
    const std::vector<float> bias = test::random_floats(static_cast<size_t>(c.rows), 95);
    const std::vector<float> resid = test::random_floats(static_cast<size_t>(c.rows), 96);
    DeviceArray<float> dx, db;
    dx.upload(x);
    db.upload(bias);
    Q8Device xq(1, c.k);
    CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, c.k, xq.rows(), nullptr));
    kernels::MatvecInput in{dx.get(), xq.rows()};
    auto run = [&](bool stream, BatchOut& o) {
      kernels::set_matvec_stream(stream);
      run_batch(w, w2, w3, in, db.get(), resid, o);
      kernels::set_matvec_stream(false);
    };
    BatchOut plain;
    run(false, plain);
    ASSERT_FALSE(HasFatalFailure());
    for (const Shape& sh : shapes) {
      kernels::set_matvec_stream_shape(sh.warps, sh.units, sh.stages);
      BatchOut got;
      const uint64_t launches = kernels::matvec_stream_launches();
      run(true, got);
      kernels::set_matvec_stream_shape(0, 0, 0);
      ASSERT_FALSE(HasFatalFailure());
      // Every matvec shape here fits its stages; the default gate/up shape too
      // (others may not, and fall back to the plain kernel).
      const uint64_t streamed = kernels::matvec_stream_launches() - launches;
      if (sh.warps == 0) {
        EXPECT_EQ(streamed, c.rows % 32 == 0 ? 2u : 1u) << "streamed launches, " << dtype_name(c.type) << " k " << c.k;
      } else {
        EXPECT_GE(streamed, 1u) << "streamed launches, " << dtype_name(c.type) << " k " << c.k;
      }
      const std::string what = std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k) +
                               " shape " + std::to_string(sh.warps) + "/" + std::to_string(sh.units) + "/" + std::to_string(sh.stages);
      expect_same_batch(got, plain, what);
    }
    for (float v : plain.y3) ASSERT_TRUE(std::isfinite(v)) << dtype_name(c.type);
  }
}

// Runs a pipelined launch under each stage setting and checks the stages it
// took: with a limit of 8 (the first setting) as many as fit, 2 to 8; by
// default that many up to kDefaultPipedStages; under a limit, the limit or
// fewer where fewer fit. Some settings issue one step, not all, before the
// PDL wait.
class PipedStages {
 public:
  struct Setting {
    int limit, early;  // set_piped_stages, set_piped_early
  };
  static constexpr Setting kSettings[] = {{8, 0}, {0, 0}, {2, 0}, {3, 1}, {0, 1}};
  template <class Run>
  void run(const Setting& s, Run&& launch) {
    kernels::set_piped_stages(s.limit);
    kernels::set_piped_early(s.early);
    launch();
    kernels::set_piped_stages(0);
    kernels::set_piped_early(0);
    taken_ = kernels::last_piped_stages();
    early_ = s.early;
    if (s.limit == 8) {
      most_ = taken_;
      EXPECT_GE(taken_, 2);
      EXPECT_LE(taken_, 8);
    } else {
      const int limit = s.limit == 0 ? kernels::kDefaultPipedStages : s.limit;
      EXPECT_EQ(taken_, std::min(limit, most_)) << "stages under a limit of " << limit;
    }
  }
  std::string label() const {
    return " (" + std::to_string(taken_) + " stages" + (early_ ? ", one before the wait)" : ")");
  }

 private:
  int most_ = 0, taken_ = 0, early_ = 0;
};

// The pipelined kernels (each lane's weights through its own shared-memory
// slots by cp.async, sm_80 and later) sum the plain kernels' units in the
// same order: identical bits, with as many stages in flight as fit (up to 8
// and up to the default), with 2 and 3, and with one step issued before the
// PDL wait instead of every stage (kernels::set_piped_stages, _early).
//
// Gate/up: h and its Q8 blocks, with and without the deferred norm's scale,
// on rows of exactly a warp's units, one more (a second step with one lane's
// unit kept), 7B's 56 Q4_K and 112 Q8_0 units, and row counts that give a
// block one group of 32 rows or several (more groups than the device has
// SMs; 7B's 18,944 rows).
TEST(GpuPiped, GateUpEqualsPlainBitForBit) {
  MINFER_REQUIRE_GPU();
  MINFER_REQUIRE_SM(8, "cp.async");
  for (const MatvecCase c : {MatvecCase{DType::kQ4_K, 32, 2048}, MatvecCase{DType::kQ4_K, 96, 3584},
                             MatvecCase{DType::kQ4_K, 4864, 2304}, MatvecCase{DType::kQ8_0, 64, 1056},
                             MatvecCase{DType::kQ8_0, 18944, 1024}, MatvecCase{DType::kQ8_0, 96, 3584}}) {
    const std::string what = std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k);
    SCOPED_TRACE(what);
    TestWeight gate(c.type, c.rows, c.k, 401), up(c.type, c.rows, c.k, 402);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(c.k), 403);
    DeviceArray<float> dx, scale;
    dx.upload(x);
    scale.upload(std::vector<float>{0.37f});
    Q8Device xq(1, c.k);
    CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, c.k, xq.rows(), nullptr));
    for (const bool deferred : {false, true}) {
      kernels::MatvecInput in{dx.get(), xq.rows()};
      if (deferred) in.defer_scale = scale.get();
      // Its stages fit: every case on an sm_90 block's 227 KiB; on a
      // smaller block (Orin's, MINFER_DEVICE_SHAPE) not all, and those take
      // the plain kernel, asked to pipeline or not.
      const bool fits = kernels::gate_up_fits_piped(gate.dev, up.dev, deferred);
      if (kernels::device_limits().max_smem >= 227 * 1024) {
        EXPECT_TRUE(fits) << "227 KiB a block holds every case";
      }
      struct Out {
        std::vector<float> h, ds;
        std::vector<int8_t> q;
      };
      auto run = [&](bool piped, Out& o) {
        kernels::set_gate_up_piped(piped ? 1 : 0);  // 1: whatever the size
        DeviceArray<float> h(static_cast<size_t>(c.rows));
        Q8Device hq(1, c.rows);
        const uint64_t before = kernels::piped_launches();
        CUDA_ASSERT(kernels::launch_gate_up_swiglu(gate.dev, up.dev, in, h.get(), hq.rows(), nullptr));
        kernels::set_gate_up_piped(-1);
        EXPECT_EQ(kernels::piped_launches() - before, piped && fits ? 1u : 0u) << "pipelined launches";
        o.h = h.download();
        o.q = hq.q.download();
        o.ds = hq.ds.download();
      };
      Out plain;
      ASSERT_NO_FATAL_FAILURE(run(false, plain));
      for (float v : plain.h) ASSERT_TRUE(std::isfinite(v)) << what;
      PipedStages stages;
      for (const PipedStages::Setting& setting : PipedStages::kSettings) {
        Out got;
        ASSERT_NO_FATAL_FAILURE(stages.run(setting, [&] { run(true, got); }));
        const std::string label = what + (deferred ? " deferred" : "") + stages.label();
        test::expect_same_bits(got.h, plain.h, label + " h");
        EXPECT_EQ(got.q, plain.q) << label;
        test::expect_same_bits(got.ds, plain.ds, label + " Q8 scales");
      }
    }
  }
}

// Matvec: a three-weight batch with bias, residual and argmax (and gate/up
// of the first two where the rows make Q8 groups), with and without the
// deferred norm's scale, for every pipelined type,
// on rows of 33 units to 7B ffn_down's 296 (Q4_K, Q6_K) and 592 (Q8_0), row
// counts under and over the launch's warps (a warp one row or several), and
// a batch whose rows are not a multiple of anything. The kernels walk a
// row by fixed strides: every type ends its rows with a partial step (split
// halves of a last group under 32 units), and the 2-byte scales lie in both
// halves of their words from row to row (Q8_0 1,056: 33 blocks a row; Q6_K
// 4,864: 19 super-blocks). Rows of fewer than 32
// units (the 0.5B head: Q8_0 896 wide, 28 units; the 1.5B head: Q6_K 1,536,
// 24) are refused and stay on the plain kernels, asked to pipeline or not.
TEST(GpuPiped, MatvecEqualsPlainBitForBit) {
  MINFER_REQUIRE_GPU();
  MINFER_REQUIRE_SM(8, "cp.async");
  for (const MatvecCase c : {MatvecCase{DType::kQ8_0, 37, 1056}, MatvecCase{DType::kQ8_0, 64, 18944},
                             MatvecCase{DType::kQ4_K, 96, 3584}, MatvecCase{DType::kQ4_K, 3584, 2304},
                             MatvecCase{DType::kQ4_K, 45, 18944}, MatvecCase{DType::kQ5_K, 64, 4864},
                             MatvecCase{DType::kQ6_K, 33, 18944}, MatvecCase{DType::kQ6_K, 3000, 2048},
                             MatvecCase{DType::kQ6_K, 37, 4864},
                             MatvecCase{DType::kQ8_0, 5000, 896}, MatvecCase{DType::kQ8_0, 64, 896},
                             MatvecCase{DType::kQ6_K, 500, 1536}, MatvecCase{DType::kQ4_K, 97, 1024},
                             MatvecCase{DType::kQ8_0, 70, 480}}) {
    const std::string what = std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k);
    SCOPED_TRACE(what);
    TestWeight w(c.type, c.rows, c.k, 411), w2(c.type, c.rows, c.k, 412), w3(c.type, 2 * c.rows + 3, c.k, 413);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(c.k), 414);
    const std::vector<float> bias = test::random_floats(static_cast<size_t>(c.rows), 415);
    const std::vector<float> resid = test::random_floats(static_cast<size_t>(c.rows), 416);
    DeviceArray<float> dx, db;
    dx.upload(x);
    db.upload(bias);
    const std::vector<float> nw = test::random_floats(static_cast<size_t>(c.k), 417);
    DeviceArray<float> dnw, ns(1);
    dnw.upload(nw);
    Q8Device xq(1, c.k), nq(1, c.k);
    CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, c.k, xq.rows(), nullptr));
    CUDA_ASSERT(kernels::launch_rms_norm_deferred(dx.get(), dnw.get(), c.k, 1e-6f, nq.rows(), ns.get(), nullptr));
    kernels::MatvecInput deferred{dx.get(), nq.rows()};  // Q8 of x ⊙ w, the norm's scale given
    deferred.defer_scale = ns.get();
    for (const kernels::MatvecInput& in : {kernels::MatvecInput{dx.get(), xq.rows()}, deferred}) {
      const std::string label = what + (in.defer_scale != nullptr ? " deferred" : "");
      const int units = c.k / (c.type == DType::kQ8_0 ? 32 : 64);
      const bool gate_up = c.rows % 32 == 0 && (c.type == DType::kQ8_0 || c.type == DType::kQ4_K) && units >= 32;
      // Whether their stages fit a block's shared memory (as in gate/up's
      // test above: every case on 227 KiB).
      const kernels::MatvecTask tasks[3] = {{w.dev}, {w2.dev}, {w3.dev}};
      const bool deferred_in = in.defer_scale != nullptr;
      const bool fits = kernels::matvec_fits_piped(tasks, 3, deferred_in);
      const bool gate_up_fits = gate_up && kernels::gate_up_fits_piped(w.dev, w2.dev, deferred_in);
      if (kernels::device_limits().max_smem >= 227 * 1024) {
        EXPECT_EQ(fits, units >= 32) << label;
        EXPECT_EQ(gate_up_fits, gate_up) << label;
      }
      const unsigned expected = (units >= 32 && fits ? 1u : 0u) + (gate_up_fits ? 1u : 0u);
      auto run = [&](bool piped, BatchOut& o) {
        kernels::set_matvec_piped(piped ? 1 : 0);  // 1: whatever the size
        kernels::set_gate_up_piped(piped ? 1 : 0);
        const uint64_t before = kernels::piped_launches();
        run_batch(w, w2, w3, in, db.get(), resid, o);
        kernels::set_matvec_piped(-1);
        kernels::set_gate_up_piped(-1);
        EXPECT_EQ(kernels::piped_launches() - before, piped ? expected : 0u) << "pipelined launches " << label;
      };
      BatchOut plain;
      ASSERT_NO_FATAL_FAILURE(run(false, plain));
      for (float v : plain.y3) ASSERT_TRUE(std::isfinite(v)) << label;
      if (expected == 0) {  // refused: the plain kernels serve it, asked to pipeline or not
        BatchOut got;
        ASSERT_NO_FATAL_FAILURE(run(true, got));
        expect_same_batch(got, plain, label + " (not pipelined)");
        continue;
      }
      PipedStages stages;
      for (const PipedStages::Setting& setting : PipedStages::kSettings) {
        BatchOut got;
        ASSERT_NO_FATAL_FAILURE(stages.run(setting, [&] { run(true, got); }));
        expect_same_batch(got, plain, label + stages.label());
      }
    }
  }
}

// The bridge (kernels::launch_bridge: the product that adds to the residual
// stream, the deferred norm of the stream, the norm's products, in one launch
// whose blocks meet at a barrier in global memory) gives the bits of the
// three launches it stands for: the stream, the norm's Q8 values, scales and
// scale, and gate/up's h and its Q8 blocks or a q/k/v-like batch with biases.
// Gate/up Q8_0 and Q4_K; batches of Q8_0, Q5_K, Q6_K, and Q4_K after a Q6_K
// product (Q4_K_M's ffn_down); streams 512 to 3,584 wide, first products of
// 1,024 to 4,864 inputs, second products of fewer rows than the launch has
// warps and of more; with as many stages as fit, 2, and 3 with one before
// the PDL wait; each launched twice on one barrier (the words it leaves
// behind must serve the next launch).
TEST(GpuBridge, EqualsProductNormProductsBitForBit) {
  MINFER_REQUIRE_GPU();
  MINFER_REQUIRE_SM(8, "cp.async");
  struct Case {
    DType ta, tb;
    int n, ka, rows_b;
    bool gate_up;
  };
  // (Rows of at least a warp's units: Q8_0 1,024 wide, Q4_K and Q5_K 2,048,
  // Q6_K 4,096.)
  const Case cases[] = {{DType::kQ8_0, DType::kQ8_0, 1024, 2048, 2048, true},
                        {DType::kQ4_K, DType::kQ4_K, 3584, 3584, 1024, true},
                        {DType::kQ4_K, DType::kQ4_K, 2048, 2048, 9728, true},
                        {DType::kQ8_0, DType::kQ8_0, 1024, 4864, 896, false},
                        {DType::kQ6_K, DType::kQ4_K, 2048, 4864, 2048, false},
                        {DType::kQ5_K, DType::kQ5_K, 2048, 2048, 1536, false},
                        {DType::kQ6_K, DType::kQ6_K, 4096, 4096, 512, false}};
  const float eps = 1e-6f;
  const int saved_bridge = kernels::bridge();
  for (const Case& c : cases) {
    const std::string what = std::string(dtype_name(c.ta)) + " " + std::to_string(c.n) + "x" + std::to_string(c.ka) + " -> " +
                             (c.gate_up ? "gate/up " : "batch ") + std::string(dtype_name(c.tb)) + " " + std::to_string(c.rows_b);
    SCOPED_TRACE(what);
    TestWeight a(c.ta, c.n, c.ka, 601);
    // Gate/up: two weights of rows_b rows; a batch: rows_b, rows_b / 8 and
    // rows_b / 8 + 32 rows (q, k, v), each with a bias.
    const int rows[3] = {c.rows_b, c.gate_up ? c.rows_b : c.rows_b / 8, c.rows_b / 8 + 32};
    TestWeight b0(c.tb, rows[0], c.n, 602), b1(c.tb, rows[1], c.n, 603), b2(c.tb, rows[2], c.n, 604);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(c.ka), 605, 2.0f);
    const std::vector<float> stream = test::random_floats(static_cast<size_t>(c.n), 606, 3.0f);
    const std::vector<float> nw = test::random_floats(static_cast<size_t>(c.n), 607);
    DeviceArray<float> dx, dnw, biases[3];
    dx.upload(x);
    dnw.upload(nw);
    for (int i = 0; i < 3; ++i) biases[i].upload(test::random_floats(static_cast<size_t>(rows[i]), 608 + i));
    Q8Device xq(1, c.ka);
    CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, c.ka, xq.rows(), nullptr));
    DeviceArray<unsigned int> barrier(2);
    CUDA_ASSERT(cudaMemset(barrier.get(), 0, 2 * sizeof(unsigned int)));
    struct Out {
      std::vector<float> stream, nds, scale, y[3], h, hds;
      std::vector<int8_t> nq, hq;
    };
    auto run = [&](bool bridged, Out& o) {
      DeviceArray<float> ys, ns(1), y[3], h(static_cast<size_t>(rows[0]));
      ys.upload(stream);
      for (int i = 0; i < 3; ++i) y[i].resize(static_cast<size_t>(rows[i]));
      Q8Device nq(1, c.n), hq(1, rows[0]);
      kernels::MatvecTask product{a.dev, ys.get(), nullptr, true};
      kernels::MatvecTask next[3];
      const TestWeight* bw[3] = {&b0, &b1, &b2};
      for (int i = 0; i < 3; ++i) next[i] = kernels::MatvecTask{bw[i]->dev, y[i].get(), biases[i].get()};
      if (bridged) {
        kernels::set_bridge(1);
        kernels::BridgeArgs args;
        args.product = product;
        args.x = xq.rows();
        args.norm_w = dnw.get();
        args.norm_eps = eps;
        args.norm_q = nq.rows();
        args.norm_scale = ns.get();
        args.barrier = barrier.get();
        if (c.gate_up) {
          args.gate = b0.dev;
          args.up = b1.dev;
          args.h = h.get();
          args.hq = hq.rows();
        } else {
          for (int i = 0; i < 3; ++i) args.next[i] = next[i];
          args.n_next = 3;
        }
        const uint64_t before = kernels::bridge_launches();
        CUDA_ASSERT(kernels::launch_bridge(args, nullptr));
        kernels::set_bridge(saved_bridge);
        EXPECT_EQ(kernels::bridge_launches() - before, 1u) << "bridge launches";
      } else {
        kernels::MatvecInput in{nullptr, xq.rows()};
        CUDA_ASSERT(kernels::launch_matvec(&product, 1, in, nullptr));
        CUDA_ASSERT(kernels::launch_rms_norm_deferred(ys.get(), dnw.get(), c.n, eps, nq.rows(), ns.get(), nullptr));
        kernels::MatvecInput din{nullptr, nq.rows()};
        din.defer_scale = ns.get();
        if (c.gate_up) {
          CUDA_ASSERT(kernels::launch_gate_up_swiglu(b0.dev, b1.dev, din, h.get(), hq.rows(), nullptr));
        } else {
          CUDA_ASSERT(kernels::launch_matvec(next, 3, din, nullptr));
        }
      }
      o.stream = ys.download();
      o.nq = nq.q.download();
      o.nds = nq.ds.download();
      o.scale = ns.download();
      if (c.gate_up) {
        o.h = h.download();
        o.hq = hq.q.download();
        o.hds = hq.ds.download();
      } else {
        for (int i = 0; i < 3; ++i) o.y[i] = y[i].download();
      }
    };
    Out want;
    ASSERT_NO_FATAL_FAILURE(run(false, want));
    for (float v : want.stream) ASSERT_TRUE(std::isfinite(v));
    for (const PipedStages::Setting& s : {PipedStages::Setting{0, 0}, PipedStages::Setting{2, 0}, PipedStages::Setting{3, 1}}) {
      kernels::set_piped_stages(s.limit);
      kernels::set_piped_early(s.early);
      for (int again = 0; again < 2; ++again) {
        const std::string label = what + " stages " + std::to_string(s.limit) + "/" + std::to_string(s.early) +
                                  (again ? " (second launch)" : "");
        Out got;
        ASSERT_NO_FATAL_FAILURE(run(true, got));
        test::expect_same_bits(got.stream, want.stream, label + " stream");
        EXPECT_EQ(got.nq, want.nq) << label << " norm Q8 values";
        test::expect_same_bits(got.nds, want.nds, label + " norm Q8 scales");
        test::expect_same_bits(got.scale, want.scale, label + " norm scale");
        test::expect_same_bits(got.h, want.h, label + " h");
        EXPECT_EQ(got.hq, want.hq) << label << " h Q8 values";
        test::expect_same_bits(got.hds, want.hds, label + " h Q8 scales");
        for (int i = 0; i < 3; ++i) test::expect_same_bits(got.y[i], want.y[i], label + " batch weight " + std::to_string(i));
      }
      kernels::set_piped_stages(0);
      kernels::set_piped_early(0);
    }
  }
  // Where it does not apply it launches nothing and says so: no residual,
  // mixed types in the batch, a pair without a kernel.
  TestWeight a(DType::kQ8_0, 2048, 1024, 611), q4(DType::kQ4_K, 512, 2048, 612), q8(DType::kQ8_0, 64, 2048, 613);
  DeviceArray<float> ys(2048), y(512), ns(1), dnw(2048);
  DeviceArray<unsigned int> barrier(2);
  Q8Device xq(1, 1024), nq(1, 2048);
  kernels::set_bridge(1);
  kernels::BridgeArgs args;
  args.product = kernels::MatvecTask{a.dev, ys.get(), nullptr, false};
  args.x = xq.rows();
  args.norm_w = dnw.get();
  args.norm_q = nq.rows();
  args.norm_scale = ns.get();
  args.barrier = barrier.get();
  args.next[0] = kernels::MatvecTask{q8.dev, y.get()};
  args.n_next = 1;
  const uint64_t before = kernels::bridge_launches();
  EXPECT_EQ(kernels::launch_bridge(args, nullptr), cudaErrorNotSupported) << "no residual add";
  args.product.accumulate = true;
  args.next[1] = kernels::MatvecTask{q4.dev, y.get()};
  args.n_next = 2;
  EXPECT_EQ(kernels::launch_bridge(args, nullptr), cudaErrorNotSupported) << "Q8_0 and Q4_K in one batch";
  args.next[0] = kernels::MatvecTask{q4.dev, y.get()};
  args.n_next = 1;
  EXPECT_EQ(kernels::launch_bridge(args, nullptr), cudaErrorNotSupported) << "Q8_0 into Q4_K";
  kernels::set_bridge(0);
  args.next[0] = kernels::MatvecTask{q8.dev, y.get()};
  EXPECT_EQ(kernels::launch_bridge(args, nullptr), cudaErrorNotSupported) << "switched off";
  kernels::set_bridge(1);
  TestWeight narrow(DType::kQ8_0, 64, 992, 614), into_narrow(DType::kQ8_0, 992, 1024, 615);  // 31 units a row
  args.product = kernels::MatvecTask{into_narrow.dev, ys.get(), nullptr, true};
  args.next[0] = kernels::MatvecTask{narrow.dev, y.get()};
  EXPECT_EQ(kernels::launch_bridge(args, nullptr), cudaErrorNotSupported) << "rows of fewer units than a warp has lanes";
  kernels::set_bridge(saved_bridge);
  EXPECT_EQ(kernels::bridge_launches(), before);
}

// A quarter-warp a row (kernels::set_matvec_lanes(8)) sums each row's units
// in the order a warp a row does: identical bits for every load schedule, on
// rows whose unit count leaves every remainder over 8 lanes (fewer units than
// lanes, a partial group, several rounds), row counts that leave a block's
// last warp partly empty, a three-weight batch with bias, residual and argmax,
// gate/up with its Q8 output (rows of at most 32 units: their weights
// preloaded before the PDL wait), and the norm prologue.
TEST(GpuMatvecQuarter, QuarterRowsEqualWarpRowsBitForBit) {
  MINFER_REQUIRE_GPU();
  const PipedOff plain;  // the plain kernels' variants, not the pipelined ones
  const int saved_lanes = kernels::matvec_lanes(), saved_schedule = kernels::matvec_schedule();
  for (const MatvecCase c : {MatvecCase{DType::kQ8_0, 37, 896}, MatvecCase{DType::kQ8_0, 64, 4864},
                             MatvecCase{DType::kQ8_0, 9, 96}, MatvecCase{DType::kQ4_K, 96, 3584},
                             MatvecCase{DType::kQ4_K, 33, 256}, MatvecCase{DType::kQ4_K, 32, 18944},
                             MatvecCase{DType::kQ5_K, 64, 1536}, MatvecCase{DType::kQ6_K, 45, 18944},
                             MatvecCase{DType::kQ6_K, 64, 3584}, MatvecCase{DType::kQ4_0, 64, 2080},
                             MatvecCase{DType::kQ5_1, 32, 896}, MatvecCase{DType::kQ8_0, 96, 896},
                             MatvecCase{DType::kQ4_K, 64, 768}, MatvecCase{DType::kQ6_K, 32, 1024}}) {
    TestWeight w(c.type, c.rows, c.k, 191), w2(c.type, c.rows, c.k, 192), w3(c.type, 2 * c.rows + 3, c.k, 193);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(c.k), 194, 2.0f);
    const std::vector<float> bias = test::random_floats(static_cast<size_t>(c.rows), 195);
    const std::vector<float> resid = test::random_floats(static_cast<size_t>(c.rows), 196);
    const std::vector<float> nw = test::random_floats(static_cast<size_t>(c.k), 197);
    DeviceArray<float> dx, db, dnw;
    dx.upload(x);
    db.upload(bias);
    dnw.upload(nw);
    Q8Device xq(1, c.k);
    CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, c.k, xq.rows(), nullptr));
    kernels::MatvecInput in{dx.get(), xq.rows()};
    kernels::MatvecInput normed;
    normed.norm_x = dx.get();
    normed.norm_w = dnw.get();
    normed.norm_eps = 1e-6f;
    const bool fits = kernels::matvec_norm_fits(c.k);
    struct Out : BatchOut {
      std::vector<float> yn, hn;  // with the norm prologue
    };
    auto run = [&](int lanes, int schedule, Out& o) {
      kernels::set_matvec_lanes(lanes);
      kernels::set_matvec_schedule(schedule);
      run_batch(w, w2, w3, in, db.get(), resid, o);
      if (fits) {
        DeviceArray<float> yn(static_cast<size_t>(c.rows));
        kernels::MatvecTask tn{w.dev, yn.get()};
        CUDA_ASSERT(kernels::launch_matvec(&tn, 1, normed, nullptr));
        o.yn = yn.download();
      }
      if (fits && c.rows % 32 == 0) {
        DeviceArray<float> hn(static_cast<size_t>(c.rows));
        Q8Device hqn(1, c.rows);
        CUDA_ASSERT(kernels::launch_gate_up_swiglu(w.dev, w2.dev, normed, hn.get(), hqn.rows(), nullptr));
        o.hn = hn.download();
      }
    };
    Out warp;
    run(32, -1, warp);
    ASSERT_FALSE(HasFatalFailure());
    for (int schedule : {-1, 0, 1, 2}) {
      Out got;
      run(8, schedule, got);
      ASSERT_FALSE(HasFatalFailure());
      const std::string what = std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k) +
                               " schedule " + std::to_string(schedule);
      expect_same_batch(got, warp, what);
      test::expect_same_bits(got.yn, warp.yn, what + " norm prologue");
      test::expect_same_bits(got.hn, warp.hn, what + " gate/up, norm prologue");
    }
    for (float v : warp.y3) ASSERT_TRUE(std::isfinite(v)) << dtype_name(c.type);
  }
  kernels::set_matvec_lanes(saved_lanes);
  kernels::set_matvec_schedule(saved_schedule);
}

TEST(GpuMatvecNormFusion, PrologueEqualsNormKernelThenMatvecBitForBit) {
  MINFER_REQUIRE_GPU();
  // Row widths: 0.5B and 7B models; fewer blocks than a warp's quads; two
  // passes of the block sums (k > 32 * kSumPass).
  struct Case {
    DType type;
    int k;
  };
  for (const Case c : {Case{DType::kQ8_0, 1024}, Case{DType::kQ4_K, 1024}, Case{DType::kF16, 1024}, Case{DType::kQ6_K, 1024},
                       Case{DType::kQ8_0, 896}, Case{DType::kQ4_K, 3584}, Case{DType::kF16, 96}, Case{DType::kQ8_0, 8960},
                       Case{DType::kF32, 8960}}) {
    const DType type = c.type;
    const int rows = 96, k = c.k;
    SCOPED_TRACE(std::string(dtype_name(type)) + " k " + std::to_string(k));
    ASSERT_TRUE(kernels::matvec_norm_fits(k));
    TestWeight w(type, rows, k, 81), w2(type, rows, k, 82);
    const auto x = test::random_floats(static_cast<size_t>(k), 83, 2.0f);
    const auto nw = test::random_floats(static_cast<size_t>(k), 84);
    DeviceArray<float> dx, dnw, xn(static_cast<size_t>(k)), y1(rows), y2(rows), h1(rows), h2(rows);
    dx.upload(x);
    dnw.upload(nw);
    Q8Device xq(1, k), hq1(1, rows), hq2(1, rows);
    // Chain: the norm kernel, then the plain matvec and gate/up.
    CUDA_ASSERT(kernels::launch_rms_norm(dx.get(), dnw.get(), 1, k, 1e-6f, xn.get(), nullptr, xq.rows(), nullptr));
    kernels::MatvecTask t;
    t.w = w.dev;
    t.y = y1.get();
    kernels::MatvecInput plain{xn.get(), xq.rows()};
    CUDA_ASSERT(kernels::launch_matvec(&t, 1, plain, nullptr));
    CUDA_ASSERT(kernels::launch_gate_up_swiglu(w.dev, w2.dev, plain, h1.get(), hq1.rows(), nullptr));
    // Fused: the prologue normalises inside each block.
    kernels::MatvecInput fused;
    fused.norm_x = dx.get();
    fused.norm_w = dnw.get();
    fused.norm_eps = 1e-6f;
    t.y = y2.get();
    CUDA_ASSERT(kernels::launch_matvec(&t, 1, fused, nullptr));
    CUDA_ASSERT(kernels::launch_gate_up_swiglu(w.dev, w2.dev, fused, h2.get(), hq2.rows(), nullptr));
    const auto a = y1.download(), b = y2.download(), c = h1.download(), d = h2.download();
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << dtype_name(type) << " matvec";
    EXPECT_EQ(0, std::memcmp(c.data(), d.data(), c.size() * 4)) << dtype_name(type) << " gate/up";
    EXPECT_EQ(hq1.q.download(), hq2.q.download()) << dtype_name(type);
  }
}

// The norm of the residual stream done by the last block of the product
// that adds to it: the same y, and the same norm bits as the norm kernel
// after the product; the count is back to zero, so a second launch works too.
TEST(GpuMatvecNormFusion, TailNormEqualsMatvecThenNormKernelBitForBit) {
  MINFER_REQUIRE_GPU();
  struct Case {
    DType type;
    int rows, k;
  };
  for (const Case c : {Case{DType::kQ8_0, 896, 896}, Case{DType::kQ4_K, 3584, 1024}, Case{DType::kQ6_K, 96, 4864},
                       Case{DType::kF16, 64, 256}}) {
    SCOPED_TRACE(std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k));
    TestWeight w(c.type, c.rows, c.k, 91);
    const auto x = test::random_floats(static_cast<size_t>(c.k), 92);
    const auto resid = test::random_floats(static_cast<size_t>(c.rows), 93, 3.0f);
    const auto nw = test::random_floats(static_cast<size_t>(c.rows), 94);
    DeviceArray<float> dx, dnw, y1, y2, n1(static_cast<size_t>(c.rows)), n2(static_cast<size_t>(c.rows));
    DeviceArray<int> counter(1);
    CUDA_ASSERT(cudaMemset(counter.get(), 0, sizeof(int)));
    dx.upload(x);
    dnw.upload(nw);
    Q8Device xq(1, c.k), q1(1, c.rows), q2(1, c.rows);
    CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, c.k, xq.rows(), nullptr));
    kernels::MatvecInput in{dx.get(), xq.rows()};
    kernels::MatvecTask t;
    t.w = w.dev;
    t.accumulate = true;
    // Apart: the product, then the norm kernel.
    y1.upload(resid);
    t.y = y1.get();
    CUDA_ASSERT(kernels::launch_matvec(&t, 1, in, nullptr));
    CUDA_ASSERT(kernels::launch_rms_norm(y1.get(), dnw.get(), 1, c.rows, 1e-6f, n1.get(), nullptr, q1.rows(), nullptr));
    // Folded, twice (the count must reset): the second launch adds again.
    y2.upload(resid);
    t.y = y2.get();
    kernels::MatvecInput folded = in;
    folded.tail_norm_w = dnw.get();
    folded.tail_norm_eps = 1e-6f;
    folded.tail_norm_y = n2.get();
    folded.tail_norm_q = q2.rows();
    folded.tail_counter = counter.get();
    CUDA_ASSERT(kernels::launch_matvec(&t, 1, folded, nullptr));
    EXPECT_EQ(counter.download()[0], 0);
    test::expect_same_bits(y2.download(), y1.download(), "residual");
    test::expect_same_bits(n2.download(), n1.download(), "norm");
    EXPECT_EQ(q2.q.download(), q1.q.download());
    test::expect_same_bits(q2.ds.download(), q1.ds.download(), "Q8 scales");
    t.y = y1.get();
    CUDA_ASSERT(kernels::launch_matvec(&t, 1, in, nullptr));
    CUDA_ASSERT(kernels::launch_rms_norm(y1.get(), dnw.get(), 1, c.rows, 1e-6f, n1.get(), nullptr, q1.rows(), nullptr));
    t.y = y2.get();
    CUDA_ASSERT(kernels::launch_matvec(&t, 1, folded, nullptr));
    test::expect_same_bits(n2.download(), n1.download(), "norm, second launch");
    EXPECT_EQ(q2.q.download(), q1.q.download());
    // Two tasks, or no residual: refused.
    t.accumulate = false;
    EXPECT_EQ(kernels::launch_matvec(&t, 1, folded, nullptr), cudaErrorInvalidValue);
  }
}

// The deferred-scale norm (kernels.h launch_rms_norm_deferred): block b's Q8
// values and scales are quantize_block_q8's arithmetic on x ⊙ w (computed
// here the same way, so equal to the bit).
struct DeferredHost {
  std::vector<int8_t> q;
  std::vector<float> ds;  // d, d·Σq a block
};
DeferredHost deferred_norm_host(const std::vector<float>& x, const std::vector<float>& w) {
  const size_t n = x.size(), nb = n / 32;
  DeferredHost h{std::vector<int8_t>(n), std::vector<float>(2 * nb)};
  for (size_t b = 0; b < nb; ++b) {
    float v[32], amax = 0.0f;
    for (int i = 0; i < 32; ++i) {
      v[i] = x[32 * b + i] * w[32 * b + i];
      amax = std::max(amax, std::abs(v[i]));
    }
    const float d = amax / 127.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int qi = amax == 0.0f ? 0 : static_cast<int>(std::nearbyint(v[i] / d));
      h.q[32 * b + i] = static_cast<int8_t>(qi);
      sum += qi;
    }
    h.ds[2 * b] = d;
    h.ds[2 * b + 1] = d * static_cast<float>(sum);
  }
  return h;
}

// x's deferred norm with weights w (launch_rms_norm_deferred) on the device,
// and the input of a product that applies its scale.
struct DeferredRow {
  DeviceArray<float> x, w, scale{1};
  Q8Device q;
  float eps;
  DeferredRow(const std::vector<float>& hx, const std::vector<float>& hw, float eps_) : q(1, static_cast<int>(hx.size())), eps(eps_) {
    x.upload(hx);
    w.upload(hw);
    EXPECT_EQ(kernels::launch_rms_norm_deferred(x.get(), w.get(), static_cast<int>(hx.size()), eps, q.rows(), scale.get(), nullptr),
              cudaSuccess);
  }
  kernels::MatvecInput input() {
    kernels::MatvecInput in;
    in.xq = q.rows();
    in.defer_scale = scale.get();
    in.norm_eps = eps;
    return in;
  }
};

TEST(GpuDeferredNorm, KernelWritesQ8OfXTimesWeightAndTheScale) {
  MINFER_REQUIRE_GPU();
  for (int n : {32, 896, 1536, 3584, 4096, 8192, 16384}) {
    SCOPED_TRACE("n " + std::to_string(n));
    auto x = test::random_floats(static_cast<size_t>(n), 301, 3.0f);
    std::fill(x.begin() + 32 * (n / 64), x.begin() + 32 * (n / 64) + 32, 0.0f);  // an all-zero block (d = 0)
    const auto w = test::random_floats(static_cast<size_t>(n), 302);
    const float eps = 1e-6f;
    DeferredRow row(x, w, eps);
    const DeferredHost want = deferred_norm_host(x, w);
    EXPECT_EQ(row.q.q.download(), want.q);
    test::expect_same_bits(row.q.ds.download(), want.ds, "Q8 scales");
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double scale = 1.0 / std::sqrt(ss / n + eps);
    EXPECT_NEAR(row.scale.download()[0], scale, 1e-5 * scale);
  }
  DeviceArray<float> x(48), scale(1);
  Q8Device q(1, 64);
  EXPECT_EQ(kernels::launch_rms_norm_deferred(x.get(), x.get(), 48, 1e-6f, q.rows(), scale.get(), nullptr), cudaErrorInvalidValue);
}

// Products given a deferred norm (MatvecInput::defer_scale) match W · rmsnorm(x)
// of the CPU reference within the Q8 tolerance, a quarter and a warp a row
// give the same bits, and gate/up equals its chain (the two products with
// the scale, then SwiGLU) to the bit. Float weights are refused.
TEST(GpuDeferredNorm, ProductsApplyTheScaleAndMatchTheReference) {
  MINFER_REQUIRE_GPU();
  const int saved_lanes = kernels::matvec_lanes();
  for (const MatvecCase c : {MatvecCase{DType::kQ8_0, 96, 896}, MatvecCase{DType::kQ4_K, 64, 3584},
                             MatvecCase{DType::kQ6_K, 64, 1536}, MatvecCase{DType::kQ4_0, 32, 4096},
                             MatvecCase{DType::kQ5_K, 32, 256}, MatvecCase{DType::kQ8_0, 32, 8960}}) {
    const std::string what = std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k);
    SCOPED_TRACE(what);
    TestWeight w(c.type, c.rows, c.k, 311), w2(c.type, c.rows, c.k, 312);
    const auto x = test::random_floats(static_cast<size_t>(c.k), 313, 4.0f);
    const auto nw = test::random_floats(static_cast<size_t>(c.k), 314);
    const float eps = 1e-6f;
    DeferredRow row(x, nw, eps);
    ASSERT_FALSE(HasFailure());
    const kernels::MatvecInput in = row.input();
    struct Out {
      std::vector<float> y, g, u, h, chain;
      std::vector<int8_t> hq;
    };
    auto run = [&](int lanes, Out& o) {
      kernels::set_matvec_lanes(lanes);
      DeviceArray<float> y(static_cast<size_t>(c.rows)), g(static_cast<size_t>(c.rows)), u(static_cast<size_t>(c.rows)),
          h(static_cast<size_t>(c.rows)), chain(static_cast<size_t>(c.rows));
      Q8Device hq(1, c.rows), hq2(1, c.rows);
      kernels::MatvecTask t{w.dev, y.get()};
      CUDA_ASSERT(kernels::launch_matvec(&t, 1, in, nullptr));
      kernels::MatvecTask gu[2] = {{w.dev, g.get()}, {w2.dev, u.get()}};
      CUDA_ASSERT(kernels::launch_matvec(gu, 2, in, nullptr));
      CUDA_ASSERT(kernels::launch_gate_up_swiglu(w.dev, w2.dev, in, h.get(), hq.rows(), nullptr));
      CUDA_ASSERT(kernels::launch_swiglu(g.get(), u.get(), c.rows, chain.get(), nullptr, hq2.rows(), c.rows, nullptr));
      o.y = y.download();
      o.g = g.download();
      o.h = h.download();
      o.chain = chain.download();
      o.hq = hq.q.download();
      EXPECT_EQ(o.hq, hq2.q.download());
    };
    Out warp, quarter;
    run(32, warp);
    run(8, quarter);
    ASSERT_FALSE(HasFatalFailure());
    test::expect_same_bits(quarter.y, warp.y, what + " quarter vs warp");
    test::expect_same_bits(quarter.h, warp.h, what + " gate/up quarter vs warp");
    test::expect_same_bits(warp.h, warp.chain, what + " gate/up vs its chain");
    test::expect_same_bits(warp.g, warp.y, what + " batched vs alone");
    std::vector<float> xn(static_cast<size_t>(c.k)), want(static_cast<size_t>(c.rows));
    ref::rms_norm_ref(x.data(), nw.data(), xn.data(), c.k, eps);
    ref::matmul_ref(w.cpu, nullptr, xn.data(), want.data());
    expect_rows_within(warp.y, want, abs_terms(w.cpu, xn), matvec_tolerance(c.type), what);
  }
  kernels::set_matvec_lanes(saved_lanes);
  TestWeight f16(DType::kF16, 32, 256, 315);
  DeviceArray<float> y(32), scale(1);
  Q8Device xq(1, 256);
  kernels::MatvecInput in;
  in.xq = xq.rows();
  in.defer_scale = scale.get();
  kernels::MatvecTask t{f16.dev, y.get()};
  EXPECT_EQ(kernels::launch_matvec(&t, 1, in, nullptr), cudaErrorInvalidValue) << "float weights";
  DeviceArray<float> h(32);
  Q8Device hq(1, 32);
  EXPECT_EQ(kernels::launch_gate_up_swiglu(f16.dev, f16.dev, in, h.get(), hq.rows(), nullptr), cudaErrorInvalidValue);
}

// The deferred prologue (MatvecInput::norm_deferred: each block writes the
// deferred form of the row into shared memory, one pass) gives the bits of
// launch_rms_norm_deferred followed by the product with defer_scale, for the
// plain matvec (a q/k/v-like batch with bias) and gate/up, a warp and a
// quarter a row, row widths of 0.5B, 1.5B and 7B and one of two passes of
// the block sums (8,960).
TEST(GpuDeferredNorm, PrologueEqualsNormKernelThenProductBitForBit) {
  MINFER_REQUIRE_GPU();
  const int saved_lanes = kernels::matvec_lanes();
  for (const MatvecCase c : {MatvecCase{DType::kQ8_0, 96, 896}, MatvecCase{DType::kQ4_K, 64, 1536},
                             MatvecCase{DType::kQ6_K, 64, 3584}, MatvecCase{DType::kQ4_0, 32, 1024},
                             MatvecCase{DType::kQ8_0, 32, 8960}}) {
    for (int lanes : {0, 8, 32}) {
      const std::string what = std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k) +
                               " lanes " + std::to_string(lanes);
      SCOPED_TRACE(what);
      ASSERT_TRUE(kernels::matvec_norm_fits(c.k));
      kernels::set_matvec_lanes(lanes);
      TestWeight w(c.type, c.rows, c.k, 331), w2(c.type, c.rows, c.k, 332);
      const auto x = test::random_floats(static_cast<size_t>(c.k), 333, 2.0f);
      const auto nw = test::random_floats(static_cast<size_t>(c.k), 334);
      const auto bias = test::random_floats(static_cast<size_t>(c.rows), 335);
      DeviceArray<float> db;
      db.upload(bias);
      DeferredRow row(x, nw, 1e-6f);
      ASSERT_FALSE(HasFailure());
      const kernels::MatvecInput apart = row.input();
      kernels::MatvecInput folded;
      folded.norm_x = row.x.get();
      folded.norm_w = row.w.get();
      folded.norm_eps = 1e-6f;
      folded.norm_deferred = true;
      std::vector<float> y[2], y2[2], h[2];
      std::vector<int8_t> hq[2];
      for (int f = 0; f < 2; ++f) {
        DeviceArray<float> dy(static_cast<size_t>(c.rows)), dy2(static_cast<size_t>(c.rows)), dh(static_cast<size_t>(c.rows));
        Q8Device dhq(1, c.rows);
        kernels::MatvecTask t[2] = {{w.dev, dy.get(), db.get()}, {w2.dev, dy2.get()}};
        CUDA_ASSERT(kernels::launch_matvec(t, 2, f == 0 ? apart : folded, nullptr));
        CUDA_ASSERT(kernels::launch_gate_up_swiglu(w.dev, w2.dev, f == 0 ? apart : folded, dh.get(), dhq.rows(), nullptr));
        y[f] = dy.download();
        y2[f] = dy2.download();
        h[f] = dh.download();
        hq[f] = dhq.q.download();
      }
      test::expect_same_bits(y[1], y[0], what + " matvec with bias");
      test::expect_same_bits(y2[1], y2[0], what + " second weight");
      test::expect_same_bits(h[1], h[0], what + " gate/up");
      EXPECT_EQ(hq[1], hq[0]);
      for (float v : y[0]) ASSERT_TRUE(std::isfinite(v));
    }
  }
  kernels::set_matvec_lanes(saved_lanes);
  // Float weights cannot take it.
  TestWeight f16(DType::kF16, 32, 256, 336);
  DeviceArray<float> x(256), nw(256), y(32);
  kernels::MatvecInput folded;
  folded.norm_x = x.get();
  folded.norm_w = nw.get();
  folded.norm_deferred = true;
  kernels::MatvecTask t{f16.dev, y.get()};
  EXPECT_EQ(kernels::launch_matvec(&t, 1, folded, nullptr), cudaErrorInvalidValue);
}

// q/k/v batches of two weight types (every task but the last of one, the
// last of another, as attn_v in the K-quant mixes) on the kernel compiled
// for both (kernels::set_matvec_two_types) give the bits of the kernel that
// reads each unit's type at run time: with bias, residual and argmax, with
// Q8 input and with a deferred norm, at the row widths of 7B, 1.5B and 0.5B;
// and they match the CPU reference.
TEST(GpuMatvecTwoTypes, CompiledPairEqualsRunTimeTypedBitForBit) {
  MINFER_REQUIRE_GPU();
  struct Mix {
    DType first, last;
    int k;
  };
  for (const Mix m : {Mix{DType::kQ4_K, DType::kQ6_K, 3584}, Mix{DType::kQ4_K, DType::kQ6_K, 1536},
                      Mix{DType::kQ5_K, DType::kQ6_K, 4096}, Mix{DType::kQ5_K, DType::kQ6_K, 1536},
                      Mix{DType::kQ5_0, DType::kQ8_0, 896}}) {
    const std::string what = std::string(dtype_name(m.first)) + "+" + std::string(dtype_name(m.last)) + " k " + std::to_string(m.k);
    SCOPED_TRACE(what);
    const int rows[3] = {96, 33, 40};
    TestWeight wq(m.first, rows[0], m.k, 401), wk(m.first, rows[1], m.k, 402), wv(m.last, rows[2], m.k, 403);
    const auto x = test::random_floats(static_cast<size_t>(m.k), 404, 2.0f);
    const auto bias = test::random_floats(static_cast<size_t>(rows[0]), 405);
    const auto resid = test::random_floats(static_cast<size_t>(rows[1]), 406);
    const auto nw = test::random_floats(static_cast<size_t>(m.k), 407);
    DeviceArray<float> dx, db;
    dx.upload(x);
    db.upload(bias);
    Q8Device xq(1, m.k);
    CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, m.k, xq.rows(), nullptr));
    DeferredRow row(x, nw, 1e-6f);
    ASSERT_FALSE(HasFailure());
    struct Out {
      std::vector<float> y[3], deferred[3];
      unsigned long long argmax = 0;
    };
    auto run = [&](bool two, Out& o) {
      kernels::set_matvec_two_types(two);
      const uint64_t before = kernels::matvec_two_type_launches();
      DeviceArray<float> y0(static_cast<size_t>(rows[0])), y1, y2(static_cast<size_t>(rows[2]));
      y1.upload(resid);
      DeviceArray<unsigned long long> am(1);
      CUDA_ASSERT(cudaMemset(am.get(), 0, sizeof(unsigned long long)));
      kernels::MatvecTask t[3] = {{wq.dev, y0.get(), db.get()},
                                  {wk.dev, y1.get(), nullptr, true},
                                  {wv.dev, y2.get(), nullptr, false, am.get()}};
      CUDA_ASSERT(kernels::launch_matvec(t, 3, kernels::MatvecInput{dx.get(), xq.rows()}, nullptr));
      o.y[0] = y0.download();
      o.y[1] = y1.download();
      o.y[2] = y2.download();
      o.argmax = am.download()[0];
      DeviceArray<float> d0(static_cast<size_t>(rows[0])), d1(static_cast<size_t>(rows[1])), d2(static_cast<size_t>(rows[2]));
      kernels::MatvecTask td[3] = {{wq.dev, d0.get()}, {wk.dev, d1.get()}, {wv.dev, d2.get()}};
      CUDA_ASSERT(kernels::launch_matvec(td, 3, row.input(), nullptr));
      o.deferred[0] = d0.download();
      o.deferred[1] = d1.download();
      o.deferred[2] = d2.download();
      EXPECT_EQ(kernels::matvec_two_type_launches() - before, two ? 2u : 0u) << "two-type launches";
      kernels::set_matvec_two_types(true);
    };
    Out generic, two;
    run(false, generic);
    run(true, two);
    ASSERT_FALSE(HasFatalFailure());
    for (int i = 0; i < 3; ++i) {
      test::expect_same_bits(two.y[i], generic.y[i], what + " task " + std::to_string(i));
      test::expect_same_bits(two.deferred[i], generic.deferred[i], what + " deferred norm, task " + std::to_string(i));
    }
    EXPECT_EQ(two.argmax, generic.argmax);
    std::vector<float> want(static_cast<size_t>(rows[2]));
    ref::matmul_ref(wv.cpu, nullptr, x.data(), want.data());
    expect_rows_within(two.y[2], want, abs_terms(wv.cpu, x), matvec_tolerance(m.last), what + " last task vs reference");
    std::vector<float> first(two.y[0]);
    for (int r = 0; r < rows[0]; ++r) first[static_cast<size_t>(r)] -= bias[static_cast<size_t>(r)];
    want.resize(static_cast<size_t>(rows[0]));
    ref::matmul_ref(wq.cpu, nullptr, x.data(), want.data());
    expect_rows_within(first, want, abs_terms(wq.cpu, x), matvec_tolerance(m.first), what + " first task vs reference");
  }
}

TEST(GpuRmsNorm, MatchesReferenceAndQ8DecodesBack) {
  MINFER_REQUIRE_GPU();
  // Odd widths (no Q8 copy) and widths past the kernel's register path.
  for (int n : {64, 896, 3584, 8192, 100, 4999}) {
    const bool q8 = n % 32 == 0;
    const int rows = 3;
    const auto x = test::random_floats(static_cast<size_t>(rows) * n, 21, 3.0f);
    const auto w = test::random_floats(static_cast<size_t>(n), 22);
    DeviceArray<float> dx, dw, y(static_cast<size_t>(rows) * n);
    DeviceArray<uint16_t> y16(static_cast<size_t>(rows) * n);
    dx.upload(x);
    dw.upload(w);
    Q8Device q(rows, q8 ? n : 32);
    CUDA_ASSERT(kernels::launch_rms_norm(dx.get(), dw.get(), rows, n, 1e-6f, y.get(), y16.get(),
                                         q8 ? q.rows() : kernels::Q8Rows{}, nullptr));
    const auto got = y.download();
    const auto got16 = y16.download();
    const auto qv = q.q.download();
    const auto ds = q.ds.download();
    std::vector<float> expected(static_cast<size_t>(n));
    for (int r = 0; r < rows; ++r) {
      ref::rms_norm_ref(x.data() + static_cast<size_t>(r) * n, w.data(), expected.data(), n, 1e-6f);
      for (int i = 0; i < n; ++i) {
        const size_t idx = static_cast<size_t>(r) * n + i;
        ASSERT_NEAR(got[idx], expected[static_cast<size_t>(i)], 1e-5 * (1 + std::abs(expected[static_cast<size_t>(i)])))
            << "n " << n << " row " << r << " index " << i;
        ASSERT_EQ(got16[idx], f32_to_f16(got[idx]));
        if (!q8) continue;
        const float d = ds[(idx / 32) * 2];
        ASSERT_NEAR(d * qv[idx], got[idx], d * 0.5f + 1e-7f) << "Q8 index " << idx;
      }
    }
  }
}

struct TailCase {
  int n_heads, n_kv_heads, head_dim, n_tokens;
  bool bias, norm, neox, f16;
};

class GpuQkvTail : public testing::TestWithParam<TailCase> {};

TEST_P(GpuQkvTail, FusedEqualsChainAndMatchesReference) {
  MINFER_REQUIRE_GPU();
  const TailCase c = GetParam();
  const int hd = c.head_dim, q_dim = c.n_heads * hd, kv_dim = c.n_kv_heads * hd, n_ctx = 40;
  const auto q = test::random_floats(static_cast<size_t>(c.n_tokens) * q_dim, 31);
  const auto k = test::random_floats(static_cast<size_t>(c.n_tokens) * kv_dim, 32);
  const auto v = test::random_floats(static_cast<size_t>(c.n_tokens) * kv_dim, 33);
  const auto bq = test::random_floats(static_cast<size_t>(q_dim), 34), bk = test::random_floats(static_cast<size_t>(kv_dim), 35),
             bv = test::random_floats(static_cast<size_t>(kv_dim), 36);
  const auto qn = test::random_floats(static_cast<size_t>(hd), 37), kn = test::random_floats(static_cast<size_t>(hd), 38);
  std::vector<int32_t> pos(static_cast<size_t>(c.n_tokens)), cells(static_cast<size_t>(c.n_tokens));
  for (int t = 0; t < c.n_tokens; ++t) {
    pos[static_cast<size_t>(t)] = 5 + 1000 * t;  // large positions exercise the angle precision
    cells[static_cast<size_t>(t)] = (3 * t + 1) % n_ctx;
  }
  const size_t elem = c.f16 ? 2 : 4;
  struct Run {
    DeviceArray<float> q, k, v;
    DeviceArray<uint8_t> kc, vc;
    DeviceArray<int32_t> cell_pos;
  } fused, chain;
  DeviceArray<float> dbq, dbk, dbv, dqn, dkn;
  DeviceArray<int32_t> dpos, dcells;
  dbq.upload(bq);
  dbk.upload(bk);
  dbv.upload(bv);
  dqn.upload(qn);
  dkn.upload(kn);
  dpos.upload(pos);
  dcells.upload(cells);
  kernels::RopeArgs rope;
  rope.head_dim = hd;
  rope.n_rot = hd;
  rope.neox = c.neox;
  rope.base = 1e6f;
  auto setup = [&](Run& r) {
    r.q.upload(q);
    r.k.upload(k);
    r.v.upload(v);
    r.kc.resize(static_cast<size_t>(n_ctx) * kv_dim * elem);
    r.vc.resize(r.kc.size());
    cudaMemset(r.kc.get(), 0, r.kc.size());
    cudaMemset(r.vc.get(), 0, r.vc.size());
    r.cell_pos.upload(std::vector<int32_t>(static_cast<size_t>(n_ctx), -1));
    kernels::QkvTailArgs a;
    a.q = r.q.get();
    a.k = r.k.get();
    a.v = r.v.get();
    a.bq = c.bias ? dbq.get() : nullptr;
    a.bk = c.bias ? dbk.get() : nullptr;
    a.bv = c.bias ? dbv.get() : nullptr;
    a.q_norm = c.norm ? dqn.get() : nullptr;
    a.k_norm = c.norm ? dkn.get() : nullptr;
    a.eps = 1e-6f;
    a.n_tokens = c.n_tokens;
    a.n_heads = c.n_heads;
    a.n_kv_heads = c.n_kv_heads;
    a.rope = rope;
    a.positions = dpos.get();
    a.kv_cells = dcells.get();
    a.k_cache = r.kc.get();
    a.v_cache = r.vc.get();
    a.cache_f16 = c.f16;
    a.cell_pos = r.cell_pos.get();
    return a;
  };
  const kernels::QkvTailArgs fa = setup(fused);
  CUDA_ASSERT(kernels::launch_qkv_tail(fa, nullptr));
  // The chain the unfused graph runs: bias adds, head norms, RoPE, KV store.
  const kernels::QkvTailArgs ca = setup(chain);
  if (c.bias) {
    CUDA_ASSERT(kernels::launch_add_bias(ca.q, ca.bq, c.n_tokens, q_dim, nullptr));
    CUDA_ASSERT(kernels::launch_add_bias(ca.k, ca.bk, c.n_tokens, kv_dim, nullptr));
    CUDA_ASSERT(kernels::launch_add_bias(const_cast<float*>(ca.v), ca.bv, c.n_tokens, kv_dim, nullptr));
  }
  if (c.norm) {
    CUDA_ASSERT(kernels::launch_head_norm(ca.q, c.n_tokens, c.n_heads, hd, ca.q_norm, 1e-6f, nullptr));
    CUDA_ASSERT(kernels::launch_head_norm(ca.k, c.n_tokens, c.n_kv_heads, hd, ca.k_norm, 1e-6f, nullptr));
  }
  CUDA_ASSERT(kernels::launch_rope(ca.q, c.n_tokens, c.n_heads, rope, dpos.get(), nullptr));
  CUDA_ASSERT(kernels::launch_rope(ca.k, c.n_tokens, c.n_kv_heads, rope, dpos.get(), nullptr));
  CUDA_ASSERT(kernels::launch_kv_store(ca, nullptr));
  const auto fq = fused.q.download(), cq = chain.q.download();
  ASSERT_EQ(0, std::memcmp(fq.data(), cq.data(), fq.size() * 4)) << "q differs between fused and chain";
  EXPECT_EQ(fused.kc.download(), chain.kc.download());
  EXPECT_EQ(fused.vc.download(), chain.vc.download());
  EXPECT_EQ(fused.cell_pos.download(), chain.cell_pos.download());

  // Reference: the CPU chain.
  ref::RopeParams rp;
  rp.head_dim = hd;
  rp.n_rot = hd;
  rp.type = c.neox ? RopeType::kNeox : RopeType::kNorm;
  rp.base = 1e6f;
  const auto kcache = fused.kc.download(), vcache = fused.vc.download();
  const auto cell_pos = fused.cell_pos.download();
  for (int t = 0; t < c.n_tokens; ++t) {
    std::vector<float> rq(q.begin() + t * q_dim, q.begin() + (t + 1) * q_dim);
    std::vector<float> rk(k.begin() + t * kv_dim, k.begin() + (t + 1) * kv_dim);
    std::vector<float> rv(v.begin() + t * kv_dim, v.begin() + (t + 1) * kv_dim);
    if (c.bias) {
      for (int i = 0; i < q_dim; ++i) rq[static_cast<size_t>(i)] += bq[static_cast<size_t>(i)];
      for (int i = 0; i < kv_dim; ++i) {
        rk[static_cast<size_t>(i)] += bk[static_cast<size_t>(i)];
        rv[static_cast<size_t>(i)] += bv[static_cast<size_t>(i)];
      }
    }
    if (c.norm) {
      ref::head_norm_ref(rq.data(), qn.data(), c.n_heads, hd, 1e-6f);
      ref::head_norm_ref(rk.data(), kn.data(), c.n_kv_heads, hd, 1e-6f);
    }
    ref::rope_ref(rq.data(), c.n_heads, pos[static_cast<size_t>(t)], rp);
    ref::rope_ref(rk.data(), c.n_kv_heads, pos[static_cast<size_t>(t)], rp);
    for (int i = 0; i < q_dim; ++i) {
      ASSERT_NEAR(fq[static_cast<size_t>(t) * q_dim + i], rq[static_cast<size_t>(i)], 2e-5) << "q token " << t << " index " << i;
    }
    const size_t cell = static_cast<size_t>(cells[static_cast<size_t>(t)]);
    EXPECT_EQ(cell_pos[cell], pos[static_cast<size_t>(t)]);
    for (int i = 0; i < kv_dim; ++i) {
      const DType kvt = c.f16 ? DType::kF16 : DType::kF32;
      const float gk = ref::kv_load(kcache.data() + cell * kv_dim * elem, kvt, i);
      const float gv = ref::kv_load(vcache.data() + cell * kv_dim * elem, kvt, i);
      const double tol = c.f16 ? 2e-3 * (1 + std::abs(rk[static_cast<size_t>(i)])) : 2e-5;
      ASSERT_NEAR(gk, rk[static_cast<size_t>(i)], tol) << "k token " << t << " index " << i;
      ASSERT_NEAR(gv, rv[static_cast<size_t>(i)], c.f16 ? 2e-3 * (1 + std::abs(rv[static_cast<size_t>(i)])) : 1e-6)
          << "v token " << t << " index " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuQkvTail,
                         testing::Values(TailCase{14, 2, 64, 1, true, false, true, true},     // qwen2.5-0.5b decode
                                         TailCase{16, 8, 128, 5, false, true, true, true},    // qwen3 prefill chunk
                                         TailCase{8, 4, 8, 3, false, false, false, false},    // stories260K, f32 cache
                                         TailCase{32, 8, 64, 2, false, false, false, true},   // llama norm pairing
                                         TailCase{4, 4, 256, 1, true, true, true, false}));   // largest head

// The q/k/v tail folded into the q/k/v product (MatvecInput::tail) against
// the product followed by launch_qkv_tail: q and k rotated, v's own output,
// both cache rows and the cell's position, bit for bit, on the kernels the
// quantized models' q/k/v launches take — a quarter a row preloaded (0.5B,
// 1.5B), two-type pairs (Q4_K_M's Q6_K or Q8_0 attn_v), a warp a row (7B)
// — with the deferred norm folded into the prologue or handed over as a
// scale, NeoX and normal pairs, a partial rotation, f16 and f32 caches.
struct FoldCase {
  DType qk, v;
  int k, n_heads, n_kv_heads, head_dim, n_rot;
  bool neox, bias, f16, prologue;
};

class GpuQkvTailInProduct : public testing::TestWithParam<FoldCase> {};

TEST_P(GpuQkvTailInProduct, FoldedEqualsProductThenTailBitForBit) {
  MINFER_REQUIRE_GPU();
  const FoldCase c = GetParam();
  const int hd = c.head_dim, q_dim = c.n_heads * hd, kv_dim = c.n_kv_heads * hd, n_ctx = 24;
  TestWeight wq(c.qk, q_dim, c.k, 701), wk(c.qk, kv_dim, c.k, 702), wv(c.v, kv_dim, c.k, 703);
  const auto x = test::random_floats(static_cast<size_t>(c.k), 704, 2.0f);
  const auto nw = test::random_floats(static_cast<size_t>(c.k), 705);
  DeferredRow row(x, nw, 1e-6f);
  ASSERT_FALSE(HasFailure());
  DeviceArray<float> dbq, dbk, dbv;
  dbq.upload(test::random_floats(static_cast<size_t>(q_dim), 706));
  dbk.upload(test::random_floats(static_cast<size_t>(kv_dim), 707));
  dbv.upload(test::random_floats(static_cast<size_t>(kv_dim), 708));
  DeviceArray<int32_t> pos, cell;
  pos.upload({4099});
  cell.upload({7});
  const size_t elem = c.f16 ? 2 : 4;
  struct Out {
    DeviceArray<float> q, k, v;
    DeviceArray<uint8_t> kc, vc;
    DeviceArray<int32_t> cell_pos;
  };
  auto setup = [&](Out& o) {
    o.q.resize(static_cast<size_t>(q_dim));
    o.k.resize(static_cast<size_t>(kv_dim));
    o.v.resize(static_cast<size_t>(kv_dim));
    o.kc.resize(static_cast<size_t>(n_ctx) * kv_dim * elem);
    o.vc.resize(o.kc.size());
    o.cell_pos.upload(std::vector<int32_t>(static_cast<size_t>(n_ctx), -1));
    for (auto* a : {&o.q, &o.k, &o.v}) a->poison();
    o.kc.poison();
    o.vc.poison();
    kernels::QkvTailArgs a;
    a.q = o.q.get();
    a.k = o.k.get();
    a.v = o.v.get();
    a.bq = c.bias ? dbq.get() : nullptr;
    a.bk = c.bias ? dbk.get() : nullptr;
    a.bv = c.bias ? dbv.get() : nullptr;
    a.n_tokens = 1;
    a.n_heads = c.n_heads;
    a.n_kv_heads = c.n_kv_heads;
    a.rope.head_dim = hd;
    a.rope.n_rot = c.n_rot;
    a.rope.neox = c.neox;
    a.rope.base = 1e6f;
    a.positions = pos.get();
    a.kv_cells = cell.get();
    a.k_cache = o.kc.get();
    a.v_cache = o.vc.get();
    a.cache_f16 = c.f16;
    a.cell_pos = o.cell_pos.get();
    return a;
  };
  kernels::MatvecInput in = row.input();
  if (c.prologue) {
    in = kernels::MatvecInput{};
    in.norm_x = row.x.get();
    in.norm_w = row.w.get();
    in.norm_eps = 1e-6f;
    in.norm_deferred = true;
  }
  Out folded, apart;
  kernels::QkvTailArgs fa = setup(folded);
  kernels::MatvecTask ft[3] = {{wq.dev, folded.q.get()}, {wk.dev, folded.k.get()}, {wv.dev, folded.v.get()}};
  kernels::MatvecInput fin = in;
  fin.tail = &fa;
  const uint64_t before = kernels::matvec_tail_launches();
  CUDA_ASSERT(kernels::launch_matvec(ft, 3, fin, nullptr));
  EXPECT_EQ(kernels::matvec_tail_launches() - before, 1u) << "the launch took the tail";
  const kernels::QkvTailArgs aa = setup(apart);
  kernels::MatvecTask at[3] = {{wq.dev, apart.q.get()}, {wk.dev, apart.k.get()}, {wv.dev, apart.v.get()}};
  CUDA_ASSERT(kernels::launch_matvec(at, 3, in, nullptr));
  CUDA_ASSERT(kernels::launch_qkv_tail(aa, nullptr));
  test::expect_same_bits(folded.q.download(), apart.q.download(), "q");
  test::expect_same_bits(folded.k.download(), apart.k.download(), "k");
  test::expect_same_bits(folded.v.download(), apart.v.download(), "v");
  EXPECT_EQ(folded.kc.download(), apart.kc.download()) << "k cache";
  EXPECT_EQ(folded.vc.download(), apart.vc.download()) << "v cache";
  const auto cp = folded.cell_pos.download();
  EXPECT_EQ(cp, apart.cell_pos.download());
  EXPECT_EQ(cp[7], 4099);
  for (float v : folded.q.download()) ASSERT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuQkvTailInProduct,
    testing::Values(FoldCase{DType::kQ8_0, DType::kQ8_0, 896, 14, 2, 64, 64, true, true, true, true},      // 0.5B Q8_0
                    FoldCase{DType::kQ5_0, DType::kQ8_0, 896, 14, 2, 64, 64, true, true, true, true},      // 0.5B Q4_K_M
                    FoldCase{DType::kQ4_K, DType::kQ4_K, 1536, 12, 2, 128, 128, true, true, true, false},  // 1.5B
                    FoldCase{DType::kQ4_K, DType::kQ6_K, 1536, 12, 2, 128, 128, true, true, false, true},
                    FoldCase{DType::kQ4_K, DType::kQ4_K, 3584, 28, 4, 128, 128, true, true, true, false},  // 7B
                    FoldCase{DType::kQ4_K, DType::kQ6_K, 3584, 28, 4, 128, 128, true, false, true, false},
                    FoldCase{DType::kQ6_K, DType::kQ6_K, 2048, 8, 4, 64, 32, false, false, false, false},  // llama pairs, partial
                    FoldCase{DType::kQ8_0, DType::kQ8_0, 1024, 6, 2, 32, 20, true, true, true, true}));

// What the fold refuses: per-head norms and tasks out of order (invalid),
// an input without the deferred norm or a launch the pipelined kernels
// would take (not supported: nothing launched, the caller launches the tail).
TEST(GpuQkvTailInProduct, RefusesWhatItCannotFold) {
  MINFER_REQUIRE_GPU();
  const int k = 3584, hd = 128;
  TestWeight wq(DType::kQ4_K, 8 * hd, k, 711), wk(DType::kQ4_K, 2 * hd, k, 712), wv(DType::kQ4_K, 2 * hd, k, 713);
  const auto x = test::random_floats(static_cast<size_t>(k), 714);
  DeferredRow row(x, test::random_floats(static_cast<size_t>(k), 715), 1e-6f);
  DeviceArray<float> q(8 * hd), kk(2 * hd), v(2 * hd), norm(hd);
  DeviceArray<uint8_t> kc(4 * 2 * hd * 2), vc(4 * 2 * hd * 2);
  DeviceArray<int32_t> pos, cell, cell_pos(4);
  pos.upload({3});
  cell.upload({1});
  kernels::QkvTailArgs a;
  a.q = q.get();
  a.k = kk.get();
  a.v = v.get();
  a.n_tokens = 1;
  a.n_heads = 8;
  a.n_kv_heads = 2;
  a.rope.head_dim = hd;
  a.rope.n_rot = hd;
  a.rope.neox = true;
  a.positions = pos.get();
  a.kv_cells = cell.get();
  a.k_cache = kc.get();
  a.v_cache = vc.get();
  a.cell_pos = cell_pos.get();
  kernels::MatvecTask t[3] = {{wq.dev, q.get()}, {wk.dev, kk.get()}, {wv.dev, v.get()}};
  kernels::MatvecInput in = row.input();
  in.tail = &a;
  const uint64_t before = kernels::matvec_tail_launches();
  {
    kernels::QkvTailArgs normed = a;
    normed.q_norm = norm.get();
    kernels::MatvecInput n_in = in;
    n_in.tail = &normed;
    EXPECT_EQ(kernels::launch_matvec(t, 3, n_in, nullptr), cudaErrorInvalidValue) << "per-head norms";
    kernels::MatvecTask swapped[3] = {t[1], t[0], t[2]};
    EXPECT_EQ(kernels::launch_matvec(swapped, 3, in, nullptr), cudaErrorInvalidValue) << "tasks out of order";
    kernels::MatvecTask biased[3] = {t[0], t[1], t[2]};
    biased[0].bias = norm.get();
    EXPECT_EQ(kernels::launch_matvec(biased, 3, in, nullptr), cudaErrorInvalidValue) << "a bias of the task's own";
  }
  {
    PipedOff off;
    Q8Device xq(1, k);
    DeviceArray<float> dx;
    dx.upload(x);
    CUDA_ASSERT(kernels::launch_quantize_q8(dx.get(), 1, k, xq.rows(), nullptr));
    kernels::MatvecInput plain{dx.get(), xq.rows()};
    plain.tail = &a;
    EXPECT_EQ(kernels::launch_matvec(t, 3, plain, nullptr), cudaErrorNotSupported) << "without the deferred norm";
  }
  kernels::set_matvec_piped(1);
  EXPECT_EQ(kernels::launch_matvec(t, 3, in, nullptr), cudaErrorNotSupported) << "a launch the pipelined kernel takes";
  kernels::set_matvec_piped(-1);
  EXPECT_EQ(kernels::matvec_tail_launches(), before) << "nothing folded";
  // The same launch on the plain kernels folds it.
  {
    PipedOff off;
    CUDA_ASSERT(kernels::launch_matvec(t, 3, in, nullptr));
  }
  EXPECT_EQ(kernels::matvec_tail_launches(), before + 1);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

struct AttnCase {
  int n_heads, n_kv_heads, head_dim, n_tokens, n_seq;
  bool f16;
};

// Builds a cache of n_seq cells (scattered), runs one attention kernel and
// compares every query row against ref::attention_ref (and, for decode, the
// Q8 copy of the output against the output).
// got_out: the output, for callers comparing bits.
// Whether check_attention's decode launches name the cell the step's tail
// writes (AttentionArgs::kv_cells), so that the split kernel stages the
// other cells' rows before its wait.
bool g_name_the_fresh_cell = true;

void check_attention(const AttnCase& c, int which /*0 decode, 1 flash prefill, 2 generic*/, double tol,
                     bool decode_split = false, std::vector<float>* got_out = nullptr) {
  const int hd = c.head_dim, kv_dim = c.n_kv_heads * hd, q_dim = c.n_heads * hd;
  const int n_ctx = c.n_seq + 9;
  const size_t elem = c.f16 ? 2 : 4;
  const DType kvt = c.f16 ? DType::kF16 : DType::kF32;
  std::vector<uint8_t> kc(static_cast<size_t>(n_ctx) * kv_dim * elem), vc(kc.size());
  const auto kf = test::random_floats(static_cast<size_t>(n_ctx) * kv_dim, 41), vf = test::random_floats(static_cast<size_t>(n_ctx) * kv_dim, 42);
  for (int cell = 0; cell < n_ctx; ++cell) {
    ref::kv_store_ref(kf.data() + static_cast<size_t>(cell) * kv_dim, kc.data() + static_cast<size_t>(cell) * kv_dim * elem, kvt, kv_dim);
    ref::kv_store_ref(vf.data() + static_cast<size_t>(cell) * kv_dim, vc.data() + static_cast<size_t>(cell) * kv_dim * elem, kvt, kv_dim);
  }
  // Cells listed in position order (as the runner lists them), stored scattered.
  std::vector<int32_t> seq(static_cast<size_t>(c.n_seq)), cell_pos(static_cast<size_t>(n_ctx), 1 << 30);
  // A stride coprime with n_ctx: every cell once (a permutation).
  int stride = 7;
  while (std::gcd(stride, n_ctx) != 1) ++stride;
  for (int j = 0; j < c.n_seq; ++j) {
    seq[static_cast<size_t>(j)] = static_cast<int32_t>((static_cast<int64_t>(j) * stride + 3) % n_ctx);
    cell_pos[static_cast<size_t>(seq[static_cast<size_t>(j)])] = j;
  }
  std::vector<int32_t> q_pos(static_cast<size_t>(c.n_tokens));
  for (int t = 0; t < c.n_tokens; ++t) q_pos[static_cast<size_t>(t)] = c.n_seq - c.n_tokens + t;
  const auto q = test::random_floats(static_cast<size_t>(c.n_tokens) * q_dim, 43);
  DeviceArray<uint8_t> dkc, dvc;
  dkc.upload(kc);
  dvc.upload(vc);
  DeviceArray<int32_t> dseq, dpos, dqpos, dnseq;
  dseq.upload(seq);
  dpos.upload(cell_pos);
  dqpos.upload(q_pos);
  dnseq.upload(std::vector<int32_t>{c.n_seq});
  DeviceArray<float> dq, out(static_cast<size_t>(c.n_tokens) * q_dim);
  dq.upload(q);
  out.poison();
  DeviceArray<float> partials;
  partials.upload(std::vector<float>(kernels::attention_partials_floats(c.n_heads, hd, n_ctx), 0.0f));  // zeroed, as the backend does
  kernels::AttentionArgs a;
  a.q = dq.get();
  a.k_cache = dkc.get();
  a.v_cache = dvc.get();
  a.cache_f16 = c.f16;
  a.seq_cells = dseq.get();
  a.n_seq = dnseq.get();
  a.cell_pos = dpos.get();
  a.q_pos = dqpos.get();
  a.n_tokens = c.n_tokens;
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv_heads;
  a.head_dim = hd;
  a.max_cells = n_ctx;
  a.out = out.get();
  a.partials = partials.get();
  a.decode_split = decode_split;
  // Decode: the cell of the query's position is the one this step's q/k/v
  // tail would write (the split kernel stages it after its wait, the others
  // before).
  DeviceArray<int32_t> dfresh;
  if (which == 0 && g_name_the_fresh_cell) {
    dfresh.upload(std::vector<int32_t>{seq[static_cast<size_t>(c.n_seq - 1)]});
    a.kv_cells = dfresh.get();
  }
  // Decode also writes the Q8 copy of its output (the O projection's input).
  std::unique_ptr<Q8Device> out_q;
  if (which == 0 && q_dim % 32 == 0) {
    out_q = std::make_unique<Q8Device>(1, q_dim);
    a.out_q = out_q->rows();
  }
  cudaError_t st = which == 0 ? kernels::launch_attention_decode(a, nullptr)
                 : which == 1 ? kernels::launch_attention_prefill(a, nullptr)
                              : kernels::launch_attention_generic(a, nullptr);
  ASSERT_EQ(st, cudaSuccess) << cudaGetErrorString(st);
  const auto got = out.download();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  if (got_out != nullptr) *got_out = got;
  if (which == 0) {
    // Again, on the same scratch: the chunk counters were left at zero, so
    // the second launch gives the same bits.
    out.poison();
    ASSERT_EQ(kernels::launch_attention_decode(a, nullptr), cudaSuccess);
    const auto again = out.download();
    ASSERT_EQ(0, std::memcmp(again.data(), got.data(), got.size() * sizeof(float))) << "second launch differs";
  }
  if (out_q) {
    const auto qv = out_q->q.download();
    const auto ds = out_q->ds.download();
    for (int i = 0; i < q_dim; ++i) {
      const float d = ds[static_cast<size_t>(i / 32) * 2];
      ASSERT_NEAR(d * qv[static_cast<size_t>(i)], got[static_cast<size_t>(i)], d * 0.5f + 1e-7f) << "Q8 index " << i;
    }
  }
  std::vector<float> expected(static_cast<size_t>(q_dim));
  const ref::AttentionShape shape{c.n_heads, c.n_kv_heads, hd, kvt};
  double worst = 0;
  int worst_t = 0, worst_i = 0, bad = 0;
  float worst_got = 0, worst_want = 0;
  for (int t = 0; t < c.n_tokens; ++t) {
    ref::attention_ref(q.data() + static_cast<size_t>(t) * q_dim, kc.data(), vc.data(), seq.data(), c.n_seq,
                       cell_pos.data(), q_pos[static_cast<size_t>(t)], shape, expected.data());
    for (int i = 0; i < q_dim; ++i) {
      const float g = got[static_cast<size_t>(t) * q_dim + i], e = expected[static_cast<size_t>(i)];
      const double err = std::isnan(g) ? 1e30 : std::abs(static_cast<double>(g) - e);
      bad += err > tol;
      if (err > worst) {
        worst = err;
        worst_t = t;
        worst_i = i;
        worst_got = g;
        worst_want = e;
      }
    }
  }
  EXPECT_LE(worst, tol) << "kernel " << which << ": " << bad << " elements over; worst token " << worst_t << " index "
                        << worst_i << " (head " << worst_i / hd << ") gpu " << worst_got << " ref " << worst_want;
}

class GpuAttentionDecode : public testing::TestWithParam<AttnCase> {};
TEST_P(GpuAttentionDecode, MatchesReference) {
  MINFER_REQUIRE_GPU();
  check_attention(GetParam(), 0, 2e-5);  // f32 arithmetic on exactly the stored K/V
}

// The split kernel (MINFER_ATTN_DECODE=split) on the same shapes: as many
// splits as fill the GPU.
TEST_P(GpuAttentionDecode, SplitAndCombineMatchesReference) {
  MINFER_REQUIRE_GPU();
  check_attention(GetParam(), 0, 2e-5, /*decode_split=*/true);
}

// And with few splits a KV head (kernels::set_attention_split_blocks): one
// block walking the whole sequence in passes of at most 128 cells (no
// combine), and three whose ranges take several passes each before the
// last one combines them.
TEST_P(GpuAttentionDecode, SplitInPassesMatchesReference) {
  MINFER_REQUIRE_GPU();
  for (const int blocks : {1, 3}) {
    SCOPED_TRACE(blocks);
    kernels::set_attention_split_blocks(blocks);
    check_attention(GetParam(), 0, 2e-5, /*decode_split=*/true);
  }
  kernels::set_attention_split_blocks(0);
}

// A shape whose splits' partials outgrow the last block's shared memory (a
// KV head of 16 query heads of 256 dims, f32 cache, 264 splits of 35 cells):
// the combine takes them a chunk of splits a round trip.
TEST(GpuAttentionDecodeSplit, CombinesInChunksWhereThePartialsOutgrowSharedMemory) {
  MINFER_REQUIRE_GPU();
  kernels::set_attention_split_blocks(2 * kernels::device_limits().sms);
  check_attention(AttnCase{16, 1, 256, 1, 9000, false}, 0, 2e-5, /*decode_split=*/true);
  kernels::set_attention_split_blocks(0);
}

// The one-launch kernel at each block size (kernels::set_attention_threads;
// the default above picks by head dim).
TEST_P(GpuAttentionDecode, EachBlockSizeMatchesReference) {
  MINFER_REQUIRE_GPU();
  for (const int threads : {256, 512}) {
    SCOPED_TRACE(threads);
    kernels::set_attention_threads(threads);
    check_attention(GetParam(), 0, 2e-5);
  }
  kernels::set_attention_threads(0);
}

// A bit-for-bit switch of the one-launch kernel (set(true) is its default):
// at both block sizes, the case's output with it on and with it off must be
// the same bits. `on_done` and `off_done` run after each run of either.
void expect_switch_keeps_bits(const AttnCase& c, void (*set)(bool), const std::function<void()>& on_done = [] {},
                              const std::function<void()>& off_done = [] {}) {
  for (const int threads : {256, 512}) {
    SCOPED_TRACE(threads);
    kernels::set_attention_threads(threads);
    std::vector<float> on, off;
    set(true);
    ASSERT_NO_FATAL_FAILURE(check_attention(c, 0, 2e-5, false, &on));
    on_done();
    set(false);
    ASSERT_NO_FATAL_FAILURE(check_attention(c, 0, 2e-5, false, &off));
    off_done();
    set(true);
    test::expect_same_bits(on, off, "attention output");
  }
  kernels::set_attention_threads(0);
}

// The one-launch kernel with its V rows staged in shared memory (the
// default where the shape allows) and pulled into L1 instead
// (kernels::set_attention_stage_v): the same bits, and 0.5B's and 7B's
// heads took the staged path (a launch count), the other run did not.
TEST_P(GpuAttentionDecode, StagedVKeepsTheBits) {
  MINFER_REQUIRE_GPU();
  const AttnCase& c = GetParam();
  uint64_t last = kernels::attention_staged_v_launches();
  expect_switch_keeps_bits(
      c, kernels::set_attention_stage_v,
      [&] {
        if (c.f16 && (c.head_dim == 64 || c.head_dim == 128)) {  // 0.5B's and 7B's heads
          EXPECT_GT(kernels::attention_staged_v_launches(), last) << "V rows not staged";
        }
        last = kernels::attention_staged_v_launches();
      },
      [&] { EXPECT_EQ(kernels::attention_staged_v_launches(), last) << "staged with the switch off"; });
}

// K rows loaded in batches fitted to the rounds (2 to 16 a thread) or always
// 16 (kernels::set_attention_fit_batch): the same bits. The shapes' chunks
// take 1 to 16 rounds.
TEST_P(GpuAttentionDecode, FittedRowBatchKeepsTheBits) {
  MINFER_REQUIRE_GPU();
  expect_switch_keeps_bits(GetParam(), kernels::set_attention_fit_batch);
}

// The kernels compiled for the models' head shapes (head dims 64 and 128
// with f16 caches, at either block size) and the general kernel on the same
// shapes (kernels::set_attention_fixed_shape): the same bits; those shapes
// took the compiled kernels, the other runs did not.
TEST_P(GpuAttentionDecode, FixedShapeKeepsTheBits) {
  MINFER_REQUIRE_GPU();
  const AttnCase& c = GetParam();
  uint64_t last = kernels::attention_fixed_shape_launches();
  expect_switch_keeps_bits(
      c, kernels::set_attention_fixed_shape,
      [&] {
        const bool fixed = c.f16 && (c.head_dim == 64 || c.head_dim == 128);
        if (fixed) {
          EXPECT_GT(kernels::attention_fixed_shape_launches(), last) << "the compiled kernel did not run";
        } else {
          EXPECT_EQ(kernels::attention_fixed_shape_launches(), last) << "a compiled kernel ran on another shape";
        }
        last = kernels::attention_fixed_shape_launches();
      },
      [&] {
        EXPECT_EQ(kernels::attention_fixed_shape_launches(), last) << "a compiled kernel ran with the switch off";
      });
}

// The split kernel: compiled for head dims 64 and 128 (up to 8 query heads
// a KV head) and its general form on the same shapes; the rows of every cell
// but the tail's staged before the wait and all of them after it: the same
// bits each way.
void expect_split_keeps_bits(const AttnCase& c, const std::function<void(bool)>& set, const char* what) {
  std::vector<float> on, off;
  set(true);
  ASSERT_NO_FATAL_FAILURE(check_attention(c, 0, 2e-5, true, &on));
  set(false);
  ASSERT_NO_FATAL_FAILURE(check_attention(c, 0, 2e-5, true, &off));
  set(true);
  test::expect_same_bits(on, off, what);
}
TEST_P(GpuAttentionDecode, SplitFixedShapeKeepsTheBits) {
  MINFER_REQUIRE_GPU();
  const AttnCase& c = GetParam();
  const uint64_t before = kernels::attention_fixed_shape_launches();
  expect_split_keeps_bits(c, kernels::set_attention_fixed_shape, "split attention, compiled shape vs general");
  const bool fixed = (c.head_dim == 64 || c.head_dim == 128) && c.n_heads / c.n_kv_heads <= 8;
  EXPECT_EQ(kernels::attention_fixed_shape_launches() - before, fixed ? 2u : 0u) << "launches of the compiled split kernels";
}
TEST_P(GpuAttentionDecode, SplitEarlyStagingKeepsTheBits) {
  MINFER_REQUIRE_GPU();
  expect_split_keeps_bits(GetParam(), [](bool on) { g_name_the_fresh_cell = on; }, "split attention, rows staged early vs not");
}

// One chunk (≤ 256 cells) and several (300, 513, 1000, 4100: the last block
// of a head combines), head dims 8 to 256, f16 and f32 caches, rows of whole
// 16-byte pieces and not (20 × f16). 16 query heads of 256 dims a KV head
// over 2,000 cells: the split kernel's combine takes the splits' partials
// (16.6 KB a split) in several rounds.
INSTANTIATE_TEST_SUITE_P(Shapes, GpuAttentionDecode,
                         testing::Values(AttnCase{14, 2, 64, 1, 1, true}, AttnCase{14, 2, 64, 1, 300, true},
                                         AttnCase{16, 8, 128, 1, 1000, true}, AttnCase{8, 4, 8, 1, 77, false},
                                         AttnCase{28, 4, 128, 1, 129, false}, AttnCase{4, 4, 256, 1, 64, true},
                                         AttnCase{4, 4, 256, 1, 65, false}, AttnCase{6, 2, 96, 1, 200, true},
                                         AttnCase{3, 1, 20, 1, 70, true}, AttnCase{14, 2, 64, 1, 4100, true},
                                         AttnCase{28, 4, 128, 1, 256, true}, AttnCase{28, 4, 128, 1, 513, true},
                                         AttnCase{4, 4, 256, 1, 600, false}, AttnCase{3, 1, 20, 1, 700, false},
                                         AttnCase{16, 1, 256, 1, 2000, true}));

class GpuAttentionPrefill : public testing::TestWithParam<AttnCase> {};
TEST_P(GpuAttentionPrefill, FlashKernelMatchesReference) {
  MINFER_REQUIRE_GPU();
  // Q, K, V and P enter the tensor cores as f16 (2^-11 relative each); on
  // O(1) random data the output error stays under 1e-2 absolute.
  check_attention(GetParam(), 1, 1e-2);
}
TEST_P(GpuAttentionPrefill, GenericKernelMatchesReference) {
  MINFER_REQUIRE_GPU();
  check_attention(GetParam(), 2, 2e-5);
}
INSTANTIATE_TEST_SUITE_P(Shapes, GpuAttentionPrefill,
                         testing::Values(AttnCase{14, 2, 64, 1, 1, true}, AttnCase{14, 2, 64, 17, 17, true},
                                         AttnCase{14, 2, 64, 100, 250, true}, AttnCase{16, 8, 128, 64, 64, true},
                                         AttnCase{16, 8, 128, 130, 300, false}, AttnCase{32, 8, 128, 5, 40, true},
                                         AttnCase{14, 2, 64, 100, 250, false}, AttnCase{16, 8, 64, 100, 250, true},
                                         AttnCase{14, 2, 128, 100, 250, true}, AttnCase{2, 2, 64, 100, 250, true},
                                         AttnCase{14, 2, 64, 64, 250, true}, AttnCase{14, 2, 64, 100, 128, true},
                                         AttnCase{14, 2, 64, 1, 250, true}));

// The one-launch decode kernel at 512 threads on 0.5B's head dim 64 with its
// V rows staged: 19 KB of static and 32 KB of dynamic shared memory, past the
// 48 KB a launch gets without opting in (the launch failed with an invalid
// argument when only dynamic sizes over 48 KB were opted in). A plain test
// runs before the parameterized ones, whose head dim 128 would have opted
// the kernel in first and hidden it.
TEST(GpuAttentionDecodeLaunch, BlockOf512OnHeadDim64) {
  MINFER_REQUIRE_GPU();
  kernels::set_attention_threads(512);
  check_attention(AttnCase{14, 2, 64, 1, 100, true}, 0, 2e-5);
  kernels::set_attention_threads(0);
}

TEST(GpuAttentionGeneric, SmallHeadDim) {
  MINFER_REQUIRE_GPU();
  check_attention(AttnCase{8, 4, 8, 13, 13, false}, 2, 2e-5);
}

TEST(GpuEmbedAndDequantize, EveryTypeMatchesTheCpuDequantizer) {
  MINFER_REQUIRE_GPU();
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                     DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const int rows = 9, k = 512;
    TestWeight w(type, rows, k, 51, 1.0f);
    const std::vector<int32_t> tokens{8, 0, 3, 3};
    DeviceArray<int32_t> dt;
    dt.upload(tokens);
    DeviceArray<float> x(tokens.size() * k);
    CUDA_ASSERT(kernels::launch_embed(w.dev, dt.get(), static_cast<int>(tokens.size()), x.get(), nullptr));
    DeviceArray<uint16_t> all(static_cast<size_t>(rows) * k);
    CUDA_ASSERT(kernels::launch_dequantize_f16(w.dev, all.get(), nullptr));
    const auto got = x.download();
    const auto got16 = all.download();
    std::vector<float> row(static_cast<size_t>(k));
    for (size_t t = 0; t < tokens.size(); ++t) {
      ref::embed_ref(w.cpu, tokens[t], row.data());
      for (int i = 0; i < k; ++i) {
        ASSERT_NEAR(got[t * k + i], row[static_cast<size_t>(i)], 1e-6 * (1 + std::abs(row[static_cast<size_t>(i)])))
            << dtype_name(type) << " token " << t << " index " << i;
      }
    }
    for (int r = 0; r < rows; ++r) {
      ref::embed_ref(w.cpu, r, row.data());
      for (int i = 0; i < k; ++i) {
        ASSERT_EQ(got16[static_cast<size_t>(r) * k + i], f32_to_f16(row[static_cast<size_t>(i)])) << dtype_name(type) << " row " << r << " index " << i;
      }
    }
  }
  // Rows that are not a multiple of 8 (float types only) take the per-element kernel.
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
    const int rows = 3, k = 100;
    TestWeight w(type, rows, k, 52, 1.0f);
    DeviceArray<uint16_t> all(static_cast<size_t>(rows) * k);
    CUDA_ASSERT(kernels::launch_dequantize_f16(w.dev, all.get(), nullptr));
    const auto got16 = all.download();
    std::vector<float> row(static_cast<size_t>(k));
    for (int r = 0; r < rows; ++r) {
      ref::embed_ref(w.cpu, r, row.data());
      for (int i = 0; i < k; ++i) {
        ASSERT_EQ(got16[static_cast<size_t>(r) * k + i], f32_to_f16(row[static_cast<size_t>(i)])) << dtype_name(type) << " k 100 row " << r;
      }
    }
  }
}

// The fused prefill product (kernels/gemm_fused.cu) against its operands'
// product on the host: W dequantized by the CPU (ref::embed_ref gives a row)
// and rounded to f16, x rounded to f16, the sums in double — the kernel may
// differ only by its f32 sums (1e-4 of a row's Σ|terms|; one misplaced pair
// of elements is ~1e-2) — and against the f32 reference product within the
// f16 rounding of both operands. Every type, with and without the residual
// add, padded strides, a partial row block, 1 to 70 tokens (one, two and
// four tiles of 8; a second block of tokens), chunks of k that fill a
// warp's loads and ones that do not; the same bits twice.
struct FusedCase {
  DType type;
  int rows, k;
};

// Puts the fused product's switches back to the defaults when a test ends.
struct FusedReset {
  ~FusedReset() {
    kernels::set_gemm_fused_stages(0);
    kernels::set_gemm_fused_generic(false);
    kernels::set_gemm_fused_tiles(0);
  }
};

TEST(GpuGemmFused, EveryTypeMatchesItsF16OperandsProduct) {
  MINFER_REQUIRE_GPU();
  std::vector<FusedCase> cases;
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                     DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    cases.push_back({type, 200, 512});
  }
  cases.push_back({DType::kQ8_0, 129, 896});    // 7 chunks: 4 warps, one short
  cases.push_back({DType::kQ8_0, 8, 4864});     // 38 chunks, one row block of 8 rows
  cases.push_back({DType::kQ4_K, 520, 3584});   // 7B's k
  cases.push_back({DType::kQ6_K, 100, 18944});  // 7B's ffn_down k
  cases.push_back({DType::kF16, 33, 128});      // one chunk
  for (const FusedCase& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k));
    TestWeight w(c.type, c.rows, c.k, 900 + static_cast<uint32_t>(c.rows), 1.0f);
    std::vector<float> w32(static_cast<size_t>(c.rows) * c.k);
    for (int r = 0; r < c.rows; ++r) ref::embed_ref(w.cpu, r, w32.data() + static_cast<size_t>(r) * c.k);
    std::vector<float> w16(w32);  // W as f16 values
    for (float& v : w16) v = f16_to_f32(f32_to_f16(v));
    for (int tokens : {1, 3, 8, 9, 16, 17, 32, 33, 70}) {
      SCOPED_TRACE("tokens " + std::to_string(tokens));
      const int ldx = c.k + (tokens == 17 ? 8 : 0), ldy = c.rows + (tokens == 9 ? 3 : 0);
      const std::vector<float> xf = test::random_floats(static_cast<size_t>(tokens) * ldx, 31 + static_cast<uint32_t>(tokens));
      std::vector<uint16_t> x16(xf.size());
      for (size_t i = 0; i < xf.size(); ++i) x16[i] = f32_to_f16(xf[i]);
      const std::vector<float> resid = test::random_floats(static_cast<size_t>(tokens) * ldy, 41);
      // want[t][n] = Σ w16 x16 (double), scale Σ|terms|, ref32 the f32 operands' product.
      std::vector<double> want(static_cast<size_t>(tokens) * c.rows), scale(want.size()), ref32(want.size());
      for (int t = 0; t < tokens; ++t) {
        for (int n = 0; n < c.rows; ++n) {
          double acc = 0, mag = 0, acc32 = 0;
          for (int i = 0; i < c.k; ++i) {
            const size_t wi = static_cast<size_t>(n) * c.k + i, xi = static_cast<size_t>(t) * ldx + i;
            const double term = static_cast<double>(w16[wi]) * f16_to_f32(x16[xi]);
            acc += term;
            mag += std::abs(term);
            acc32 += static_cast<double>(w32[wi]) * xf[xi];
          }
          const size_t o = static_cast<size_t>(t) * c.rows + n;
          want[o] = acc;
          scale[o] = mag;
          ref32[o] = acc32;
        }
      }
      DeviceArray<uint16_t> dx;
      dx.upload(x16);
      std::vector<float> first;
      for (int accumulate = 0; accumulate < 2; ++accumulate) {
        SCOPED_TRACE(accumulate ? "residual" : "plain");
        DeviceArray<float> dy;
        if (accumulate) {
          dy.upload(resid);
        } else {
          dy.resize(resid.size());
          dy.poison();
        }
        CUDA_ASSERT(kernels::launch_gemm_fused(w.dev, dx.get(), ldx, tokens, dy.get(), ldy, accumulate == 1, nullptr));
        const std::vector<float> y = dy.download();
        if (!accumulate) first = y;
        double worst = 0, worst32 = 0;
        size_t at = 0;
        for (int t = 0; t < tokens; ++t) {
          for (int n = 0; n < ldy; ++n) {
            const size_t yo = static_cast<size_t>(t) * ldy + n;
            if (n >= c.rows) {  // the stride's padding: untouched
              if (accumulate) {
                ASSERT_EQ(y[yo], resid[yo]) << "padding t " << t << " n " << n;
              }
              continue;
            }
            const size_t o = static_cast<size_t>(t) * c.rows + n;
            const double got = y[yo] - (accumulate ? resid[yo] : 0.0);
            const double e = std::isfinite(got) ? std::abs(got - want[o]) / (scale[o] + 1e-30) : 1e30;
            if (e > worst) {
              worst = e;
              at = o;
            }
            worst32 = std::max(worst32, std::abs(got - ref32[o]) / (scale[o] + 1e-30));
          }
        }
        EXPECT_LE(worst, 1e-4) << "token " << at / c.rows << " row " << at % c.rows << ": want " << want[at];
        EXPECT_LE(worst32, 2e-3) << "against the f32 operands";
      }
      DeviceArray<float> again(resid.size());
      CUDA_ASSERT(kernels::launch_gemm_fused(w.dev, dx.get(), ldx, tokens, again.get(), ldy, false, nullptr));
      const std::vector<float> y2 = again.download();
      for (int t = 0; t < tokens; ++t) {
        ASSERT_EQ(std::memcmp(first.data() + static_cast<size_t>(t) * ldy, y2.data() + static_cast<size_t>(t) * ldy,
                              sizeof(float) * c.rows), 0)
            << "token " << t << ": not the same bits twice";
      }
    }
  }
  // What it does not take: k % 128 != 0, x not 16-byte aligned.
  TestWeight odd(DType::kF32, 4, 172, 5);
  EXPECT_FALSE(kernels::gemm_fused_supported(odd.dev, 172));
  DeviceArray<uint16_t> x(4 * 256);
  DeviceArray<float> y(16);
  EXPECT_EQ(kernels::launch_gemm_fused(odd.dev, x.get(), 172, 2, y.get(), 4, false, nullptr), cudaErrorInvalidValue);
  TestWeight even(DType::kF32, 4, 128, 6);
  EXPECT_TRUE(kernels::gemm_fused_supported(even.dev, 128));
  EXPECT_EQ(kernels::launch_gemm_fused(even.dev, x.get() + 1, 128, 2, y.get(), 4, false, nullptr), cudaErrorInvalidValue);
  cudaGetLastError();
}

// The pipelined form (chunks sent ahead as cp.async through shared memory)
// multiplies the bytes the register form loads in the same order: the same
// bits, for both forms and the choice by tokens, every row count and token
// tile.
TEST(GpuGemmFused, PipelinedLoadsGiveTheRegisterLoadsBits) {
  MINFER_REQUIRE_GPU();
  const std::vector<FusedCase> cases = {
      {DType::kQ8_0, 129, 896},    // 7 chunks over 4 warps; a short last row block
      {DType::kQ8_0, 40, 4864},    // 38 chunks: several rounds of 8 stages
      {DType::kQ4_K, 520, 3584},   // 7B's k
      {DType::kQ4_K, 24, 256},     // 2 chunks: two warps with none
      {DType::kQ6_K, 100, 18944},  // 7B's ffn_down k
      {DType::kQ6_K, 17, 512},
  };
  FusedReset reset;
  for (const FusedCase& c : cases) {
    TestWeight w(c.type, c.rows, c.k, 700 + static_cast<uint32_t>(c.rows), 1.0f);
    for (int tokens : {1, 5, 8, 16, 32, 40}) {
      SCOPED_TRACE(std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k) + ", tokens " +
                   std::to_string(tokens));
      const std::vector<float> xf = test::random_floats(static_cast<size_t>(tokens) * c.k, 57 + static_cast<uint32_t>(tokens));
      std::vector<uint16_t> x16(xf.size());
      for (size_t i = 0; i < xf.size(); ++i) x16[i] = f32_to_f16(xf[i]);
      DeviceArray<uint16_t> dx;
      dx.upload(x16);
      std::vector<float> first;
      for (int stages : {1, 8, 0}) {  // registers, pipelined, by the tokens
        kernels::set_gemm_fused_stages(stages);
        const uint64_t piped = kernels::gemm_fused_piped_launches();
        DeviceArray<float> dy(static_cast<size_t>(tokens) * c.rows);
        dy.poison();
        CUDA_ASSERT(kernels::launch_gemm_fused(w.dev, dx.get(), c.k, tokens, dy.get(), c.rows, false, nullptr));
        const bool want_piped = stages == 0 ? tokens <= 8 : stages > 1;
        EXPECT_EQ(kernels::gemm_fused_piped_launches() - piped, want_piped ? 1u : 0u) << stages << " stages";
        const std::vector<float> y = dy.download();
        if (stages == 1) {
          first = y;
          continue;
        }
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_EQ(std::memcmp(&y[i], &first[i], sizeof(float)), 0)
              << stages << " stages, token " << i / c.rows << " row " << i % c.rows << ": " << y[i] << " against " << first[i];
        }
      }
    }
  }
}

// Steps of more than 32 tokens in blocks of 8 token tiles (the default
// where the weight's row blocks fill the SMs) give the bits of blocks of 4:
// each tile's sum takes its chunks and k-steps in the same order. Short row
// blocks, a step that leaves tiles empty, several blocks of tokens, and the
// pipelined loads with 8 tiles.
TEST(GpuGemmFused, EightTileBlocksGiveTheFourTileBits) {
  MINFER_REQUIRE_GPU();
  const std::vector<FusedCase> cases = {
      {DType::kQ8_0, 129, 896}, {DType::kQ4_K, 40, 3584}, {DType::kQ6_K, 24, 4864}, {DType::kQ5_K, 17, 512},
      {DType::kQ4_0, 33, 512},  {DType::kQ5_1, 16, 896},  {DType::kF16, 20, 256},
  };
  FusedReset reset;
  for (const FusedCase& c : cases) {
    TestWeight w(c.type, c.rows, c.k, 500 + static_cast<uint32_t>(c.rows), 1.0f);
    for (int tokens : {33, 48, 64, 65, 130}) {
      SCOPED_TRACE(std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k) + ", tokens " +
                   std::to_string(tokens));
      const std::vector<float> xf = test::random_floats(static_cast<size_t>(tokens) * c.k, 77 + static_cast<uint32_t>(tokens));
      std::vector<uint16_t> x16(xf.size());
      for (size_t i = 0; i < xf.size(); ++i) x16[i] = f32_to_f16(xf[i]);
      DeviceArray<uint16_t> dx;
      dx.upload(x16);
      std::vector<float> four;
      for (const auto& [tiles, stages] : {std::pair{4, 0}, std::pair{8, 0}, std::pair{8, 8}}) {
        kernels::set_gemm_fused_tiles(tiles);
        kernels::set_gemm_fused_stages(stages);
        DeviceArray<float> dy(static_cast<size_t>(tokens) * c.rows);
        dy.poison();
        CUDA_ASSERT(kernels::launch_gemm_fused(w.dev, dx.get(), c.k, tokens, dy.get(), c.rows, false, nullptr));
        const std::vector<float> y = dy.download();
        if (tiles == 4) {
          four = y;
          continue;
        }
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_EQ(std::memcmp(&y[i], &four[i], sizeof(float)), 0) << stages << " stages, token " << i / c.rows << " row "
                                                                    << i % c.rows << ": " << y[i] << " against " << four[i];
        }
      }
    }
  }
}

// x in X16Order::kLanes (each 128 values in the order the fused product's
// lanes read them): the same bits as x in order, for every type, in every
// form (registers, pipelined loads, the element-wise dequantizer), in blocks
// of 1, 2, 4 and 8 token tiles.
TEST(GpuGemmFused, LanesOrderGivesTheNaturalOrdersBits) {
  MINFER_REQUIRE_GPU();
  const std::vector<FusedCase> cases = {
      {DType::kQ8_0, 40, 896}, {DType::kQ4_K, 40, 3584}, {DType::kQ6_K, 24, 4864}, {DType::kQ5_K, 17, 512},
      {DType::kQ4_0, 33, 512}, {DType::kQ4_1, 16, 512},  {DType::kQ5_0, 24, 896},  {DType::kQ5_1, 16, 896},
      {DType::kF16, 20, 256},
  };
  FusedReset reset;
  for (const FusedCase& c : cases) {
    TestWeight w(c.type, c.rows, c.k, 700 + static_cast<uint32_t>(c.rows), 1.0f);
    for (int tokens : {1, 7, 16, 33, 64}) {
      const std::vector<float> xf = test::random_floats(static_cast<size_t>(tokens) * c.k, 91 + static_cast<uint32_t>(tokens));
      std::vector<uint16_t> natural(xf.size()), lanes(xf.size());
      for (size_t i = 0; i < xf.size(); ++i) {
        natural[i] = f32_to_f16(xf[i]);
        lanes[static_cast<size_t>(kernels::x16_index(static_cast<int64_t>(i), kernels::X16Order::kLanes))] = natural[i];
      }
      DeviceArray<uint16_t> dn, dl;
      dn.upload(natural);
      dl.upload(lanes);
      for (const auto& [stages, generic] : {std::pair{0, false}, std::pair{1, false}, std::pair{8, false}, std::pair{1, true}}) {
        SCOPED_TRACE(std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k) + ", tokens " +
                     std::to_string(tokens) + ", stages " + std::to_string(stages) + (generic ? ", generic" : ""));
        kernels::set_gemm_fused_stages(stages);
        kernels::set_gemm_fused_generic(generic);
        DeviceArray<float> yn(static_cast<size_t>(tokens) * c.rows), yl(static_cast<size_t>(tokens) * c.rows);
        yn.poison();
        yl.poison();
        CUDA_ASSERT(kernels::launch_gemm_fused(w.dev, dn.get(), c.k, tokens, yn.get(), c.rows, false, nullptr));
        CUDA_ASSERT(kernels::launch_gemm_fused(w.dev, dl.get(), c.k, tokens, yl.get(), c.rows, false, nullptr,
                                               kernels::X16Order::kLanes));
        const std::vector<float> a = yn.download(), b = yl.download();
        for (size_t i = 0; i < a.size(); ++i) {
          ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
              << "token " << i / c.rows << " row " << i % c.rows << ": " << b[i] << " against " << a[i];
        }
      }
    }
  }
  // A row stride the order's spans of 128 do not fit.
  TestWeight w(DType::kQ8_0, 16, 256, 9, 1.0f);
  DeviceArray<uint16_t> x(3 * 264);
  DeviceArray<float> y(3 * 16);
  EXPECT_EQ(kernels::launch_gemm_fused(w.dev, x.get(), 264, 3, y.get(), 16, false, nullptr, kernels::X16Order::kLanes),
            cudaErrorInvalidValue);
}

// The weight's values as the fused product unpacks them (magic_float's
// integers, Q8_0's HMUL2) are launch_dequantize_f16's, bit for bit: with
// x = one-hot tokens each product is a single value times 1, summed with
// zeros in f32 — exactly the f16 operand. Every column of k, every row,
// every form, and the generic form (MINFER_GEMM_FUSED_GENERIC) too.
TEST(GpuGemmFused, OneHotTokensGiveTheDequantizedOperands) {
  MINFER_REQUIRE_GPU();
  FusedReset reset;
  for (const FusedCase& c : {FusedCase{DType::kQ8_0, 24, 512}, FusedCase{DType::kQ4_K, 24, 512},
                             FusedCase{DType::kQ6_K, 24, 512}, FusedCase{DType::kQ4_K, 8, 3584},
                             FusedCase{DType::kQ4_0, 24, 512}, FusedCase{DType::kQ4_1, 24, 512},
                             FusedCase{DType::kQ5_0, 24, 896}, FusedCase{DType::kQ5_1, 24, 512},
                             FusedCase{DType::kQ5_K, 24, 512}, FusedCase{DType::kQ5_K, 8, 3584}}) {
    SCOPED_TRACE(std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.k));
    TestWeight w(c.type, c.rows, c.k, 300 + static_cast<uint32_t>(c.k), 1.0f);
    DeviceArray<uint16_t> all(static_cast<size_t>(c.rows) * c.k);
    CUDA_ASSERT(kernels::launch_dequantize_f16(w.dev, all.get(), nullptr));
    const std::vector<uint16_t> w16 = all.download();
    for (int stages : {1, 8, 0}) {  // registers, pipelined, the element-wise dequantizer (generic)
      kernels::set_gemm_fused_stages(stages);
      kernels::set_gemm_fused_generic(stages == 0);
      constexpr int kTokens = 32;  // token t: column k0 + t
      for (int k0 = 0; k0 < c.k; k0 += kTokens) {
        std::vector<uint16_t> x16(static_cast<size_t>(kTokens) * c.k, 0);
        for (int t = 0; t < kTokens; ++t) x16[static_cast<size_t>(t) * c.k + k0 + t] = f32_to_f16(1.0f);
        DeviceArray<uint16_t> dx;
        dx.upload(x16);
        DeviceArray<float> dy(static_cast<size_t>(kTokens) * c.rows);
        CUDA_ASSERT(kernels::launch_gemm_fused(w.dev, dx.get(), c.k, kTokens, dy.get(), c.rows, false, nullptr));
        const std::vector<float> y = dy.download();
        for (int t = 0; t < kTokens; ++t) {
          for (int n = 0; n < c.rows; ++n) {
            const float want = f16_to_f32(w16[static_cast<size_t>(n) * c.k + k0 + t]);
            ASSERT_EQ(y[static_cast<size_t>(t) * c.rows + n], want) << stages << " stages, row " << n << " column " << k0 + t;
          }
        }
      }
    }
  }
}

TEST(GpuArgmax, FirstIndexOnTiesAndLargeRows) {
  MINFER_REQUIRE_GPU();
  std::vector<float> x = test::random_floats(151936 * 2, 61);
  x[151935] = 50.0f;             // row 0: the last element
  x[151936 + 7] = 60.0f;         // row 1: two equal maxima, first wins
  x[151936 + 90000] = 60.0f;
  DeviceArray<float> dx;
  dx.upload(x);
  DeviceArray<int32_t> out(2);
  CUDA_ASSERT(kernels::launch_argmax(dx.get(), 2, 151936, out.get(), nullptr));
  EXPECT_EQ(out.download(), (std::vector<int32_t>{151935, 7}));
  EXPECT_EQ(ref::argmax_ref(x.data() + 151936, 151936), 7);
}

// A decode step's first kernel: the key cleared in every mode; the token
// left as uploaded (feed 0), or the previous step's argmax from the fused
// key (1) or from the unfused head's row (2).
TEST(GpuStepStart, FeedsTheTokenAndClearsTheKey) {
  MINFER_REQUIRE_GPU();
  const unsigned long long key = (0x42a00000ull << 32) | (0xFFFFFFFFull - 1234u);  // row 1234
  ASSERT_EQ(kernels::argmax_unpack(key), 1234);
  for (int feed = 0; feed < 3; ++feed) {
    DeviceArray<int32_t> token, mode, argmax;
    DeviceArray<unsigned long long> dkey;
    token.upload(std::vector<int32_t>{77});
    mode.upload(std::vector<int32_t>{feed});
    argmax.upload(std::vector<int32_t>{4321});
    dkey.upload(std::vector<unsigned long long>{key});
    CUDA_ASSERT(kernels::launch_step_start(token.get(), mode.get(), dkey.get(), argmax.get(), nullptr));
    EXPECT_EQ(token.download(), (std::vector<int32_t>{feed == 0 ? 77 : feed == 1 ? 1234 : 4321})) << "feed " << feed;
    EXPECT_EQ(dkey.download(), (std::vector<unsigned long long>{0})) << "feed " << feed;
  }
}

// X16Order::kLanes (kernels.h): a permutation of each 128 values that keeps
// their 8-value pieces whole and puts Q4_K's lane t's piece i of run h (its
// elements from 64 (t / 2) + 16 (t % 2) + 32 h + 8 i) at 64 h + 32 i + 8 t.
// Host only.
TEST(X16Order, LanesIsAPermutationOfWholePieces) {
  std::vector<int> seen(128, 0);
  for (int c = 0; c < 128; ++c) {
    const int p = kernels::x16_lanes_pos(c);
    ASSERT_GE(p, 0);
    ASSERT_LT(p, 128);
    ++seen[static_cast<size_t>(p)];
    EXPECT_EQ(p, kernels::x16_lanes_pos(c - c % 8) + c % 8) << c;
  }
  for (int p = 0; p < 128; ++p) EXPECT_EQ(seen[static_cast<size_t>(p)], 1) << p;
  for (int t = 0; t < 4; ++t) {
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 2; ++i) EXPECT_EQ(kernels::x16_lanes_pos(64 * (t / 2) + 16 * (t % 2) + 32 * h + 8 * i), 64 * h + 32 * i + 8 * t);
    }
  }
  EXPECT_EQ(kernels::x16_index(1000, kernels::X16Order::kNatural), 1000);
  EXPECT_EQ(kernels::x16_index(3 * 128 + 40, kernels::X16Order::kLanes), 3 * 128 + 96);
}

// Each writer of a product's f16 x (the norm, f32 → f16, SwiGLU) writes
// kLanes order as its natural order's values moved by x16_index, bit for
// bit; widths the order does not fit are refused. (Attention's f16 output:
// CudaSwitches.X16LanesIsBitIdentical, both prefill kernels.)
TEST(GpuX16Order, WritersPutTheNaturalValuesWhereTheOrderSays) {
  MINFER_REQUIRE_GPU();
  const kernels::X16Order kLanes = kernels::X16Order::kLanes;
  auto expect_moved = [](const std::vector<uint16_t>& natural, const std::vector<uint16_t>& lanes, const std::string& what) {
    ASSERT_EQ(natural.size(), lanes.size());
    for (size_t i = 0; i < natural.size(); ++i) {
      ASSERT_EQ(lanes[static_cast<size_t>(kernels::x16_index(static_cast<int64_t>(i), kernels::X16Order::kLanes))], natural[i])
          << what << ", value " << i;
    }
  };
  const int rows = 3;
  for (int n : {896, 3584, 18944}) {  // the norm's register path, and past it
    const size_t all = static_cast<size_t>(rows) * n;
    const auto x = test::random_floats(all, 31 + static_cast<uint32_t>(n), 3.0f);
    const auto u = test::random_floats(all, 32 + static_cast<uint32_t>(n));
    const auto w = test::random_floats(static_cast<size_t>(n), 33);
    DeviceArray<float> dx, du, dw, y(all);
    DeviceArray<uint16_t> natural(all), lanes(all);
    dx.upload(x);
    du.upload(u);
    dw.upload(w);
    const std::string at = "width " + std::to_string(n);
    CUDA_ASSERT(kernels::launch_rms_norm(dx.get(), dw.get(), rows, n, 1e-6f, y.get(), natural.get(), kernels::Q8Rows{}, nullptr));
    CUDA_ASSERT(kernels::launch_rms_norm(dx.get(), dw.get(), rows, n, 1e-6f, y.get(), lanes.get(), kernels::Q8Rows{}, nullptr, kLanes));
    expect_moved(natural.download(), lanes.download(), "rms_norm, " + at);
    CUDA_ASSERT(kernels::launch_to_f16(dx.get(), natural.get(), static_cast<int64_t>(all), nullptr));
    CUDA_ASSERT(kernels::launch_to_f16(dx.get(), lanes.get(), static_cast<int64_t>(all), nullptr, kLanes, n));
    expect_moved(natural.download(), lanes.download(), "to_f16, " + at);
    CUDA_ASSERT(kernels::launch_swiglu(dx.get(), du.get(), static_cast<int64_t>(all), y.get(), natural.get(), kernels::Q8Rows{}, n, nullptr));
    CUDA_ASSERT(kernels::launch_swiglu(dx.get(), du.get(), static_cast<int64_t>(all), y.get(), lanes.get(), kernels::Q8Rows{}, n, nullptr,
                                       kLanes));
    expect_moved(natural.download(), lanes.download(), "swiglu, " + at);
  }
  DeviceArray<float> dx(2 * 96), dw(96), y(2 * 96);
  DeviceArray<uint16_t> y16(2 * 96);
  EXPECT_EQ(kernels::launch_rms_norm(dx.get(), dw.get(), 2, 96, 1e-6f, y.get(), y16.get(), kernels::Q8Rows{}, nullptr, kLanes),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::launch_to_f16(dx.get(), y16.get(), 2 * 96, nullptr, kLanes, 96), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::launch_swiglu(dx.get(), dx.get(), 2 * 96, y.get(), y16.get(), kernels::Q8Rows{}, 96, nullptr, kLanes),
            cudaErrorInvalidValue);
}

TEST(GpuElementwise, AddBiasSwigluToF16) {
  MINFER_REQUIRE_GPU();
  const int n = 1000;
  const auto a = test::random_floats(n, 71), b = test::random_floats(n, 72);
  DeviceArray<float> da, db, y(n);
  DeviceArray<uint16_t> y16(n);
  da.upload(a);
  db.upload(b);
  CUDA_ASSERT(kernels::launch_swiglu(da.get(), db.get(), n, y.get(), y16.get(), kernels::Q8Rows{}, n, nullptr));
  std::vector<float> expected(n);
  ref::swiglu_ref(a.data(), b.data(), expected.data(), n);
  const auto got = y.download();
  const auto got16 = y16.download();
  for (int i = 0; i < n; ++i) {
    ASSERT_NEAR(got[static_cast<size_t>(i)], expected[static_cast<size_t>(i)], 1e-6 * (1 + std::abs(expected[static_cast<size_t>(i)])));
    ASSERT_EQ(got16[static_cast<size_t>(i)], f32_to_f16(got[static_cast<size_t>(i)]));
  }
  CUDA_ASSERT(kernels::launch_add(da.get(), db.get(), n, nullptr));
  const auto sum = da.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(sum[static_cast<size_t>(i)], a[static_cast<size_t>(i)] + b[static_cast<size_t>(i)]);
}

}  // namespace
}  // namespace minfer

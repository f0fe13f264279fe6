// MINFER_DEVICE_SHAPE (kernels.h): its text (no GPU needed), and on a GPU the
// figures the launchers go by — the device's, or under a shape the smaller
// of the device's and the shape's (tests/gpu/run_on_device.sh jetson runs
// the GPU suites shaped as Jetson Orin).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "kernels/kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace minfer::kernels {
namespace {

TEST(DeviceShape, PresetsAndOverrides) {
  std::string e;
  auto s = parse_device_shape("orin", &e);
  ASSERT_TRUE(s) << e;
  EXPECT_EQ(s->name, "orin");
  EXPECT_EQ(s->cc_major, 8);
  EXPECT_EQ(s->cc_minor, 7);
  EXPECT_EQ(s->sms, 16);
  EXPECT_EQ(s->smem_per_block, 166912);
  EXPECT_EQ(s->smem_per_sm, 167936);
  EXPECT_EQ(s->threads_per_sm, 1536);
  EXPECT_EQ(s->blocks_per_sm, 16);

  s = parse_device_shape(" orin , sms=4 ", &e);
  ASSERT_TRUE(s) << e;
  EXPECT_EQ(s->name, "orin");
  EXPECT_EQ(s->sms, 4);
  EXPECT_EQ(s->threads_per_sm, 1536);

  s = parse_device_shape("cc=8.6,sms=10,smem_per_block=101376,threads_per_sm=1536,blocks_per_sm=16", &e);
  ASSERT_TRUE(s) << e;
  EXPECT_EQ(s->name, "custom");
  EXPECT_EQ(s->cc_major, 8);
  EXPECT_EQ(s->cc_minor, 6);
  EXPECT_EQ(s->sms, 10);
  EXPECT_EQ(s->smem_per_block, 101376);
  EXPECT_EQ(s->smem_per_sm, 0);  // left to the device

  s = parse_device_shape("cc=87", &e);
  ASSERT_TRUE(s) << e;
  EXPECT_EQ(s->cc_major, 8);
  EXPECT_EQ(s->cc_minor, 7);
  EXPECT_EQ(s->sms, 0);
}

TEST(DeviceShape, NamesWhatDoesNotParse) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"  ", "empty"},
      {"xavier", "unknown preset 'xavier' (known: orin)"},
      {"sms=4,orin", "'orin' is not key=value"},
      {"orin,sms=0", "sms='0' is not a positive whole number"},
      {"orin,sms=16x", "sms='16x' is not a positive whole number"},
      {"orin,sms=", "sms='' is not a positive whole number"},
      {"sms=4,sms=8", "'sms' is given twice"},
      {"cc=8.75", "cc='8.75' is not a compute capability"},
      {"cc=8", "cc='8' is not a compute capability"},
      {"orin,warps=4", "unknown key 'warps' (known: sms, cc,"},
      {"orin,", "'' is not key=value"},
  };
  for (const auto& [text, why] : cases) {
    std::string e;
    EXPECT_FALSE(parse_device_shape(text, &e)) << text;
    EXPECT_NE(e.find(why), std::string::npos) << "'" << text << "': " << e;
  }
}

// Blocks an SM holds, reckoned from its figures: threads, blocks, and shared
// memory with the 1 KiB an SM keeps for each block (sm_80 and later).
int expected_blocks(const DeviceLimits& lim, int threads, size_t smem) {
  if (smem > static_cast<size_t>(lim.max_smem)) return 0;
  return std::min({lim.threads_per_sm / threads, lim.blocks_per_sm,
                   static_cast<int>(static_cast<size_t>(lim.smem_per_sm) / (smem + 1024))});
}

TEST(DeviceShape, LaunchersGoByTheSmallerOfDeviceAndShape) {
  MINFER_REQUIRE_GPU();
  cudaDeviceProp p{};
  CUDA_ASSERT(cudaGetDeviceProperties(&p, 0));
  const std::optional<DeviceShape>& shape = device_shape(nullptr);
  const DeviceLimits lim = device_limits();
  auto smaller = [&](int device, int DeviceShape::*field) {
    return shape && (*shape).*field > 0 ? std::min(device, (*shape).*field) : device;
  };
  EXPECT_EQ(lim.shaped, shape.has_value());
  EXPECT_EQ(lim.sms, smaller(p.multiProcessorCount, &DeviceShape::sms));
  EXPECT_EQ(lim.max_smem, smaller(static_cast<int>(p.sharedMemPerBlockOptin), &DeviceShape::smem_per_block));
  EXPECT_EQ(lim.smem_per_sm, smaller(static_cast<int>(p.sharedMemPerMultiprocessor), &DeviceShape::smem_per_sm));
  EXPECT_EQ(lim.threads_per_sm, smaller(p.maxThreadsPerMultiProcessor, &DeviceShape::threads_per_sm));
  EXPECT_EQ(lim.blocks_per_sm, smaller(p.maxBlocksPerMultiProcessor, &DeviceShape::blocks_per_sm));
  // The capability: the device's, no newer than the kernels' code (a
  // compute_87 build on an sm_90 device is sm_87's) or the shape's.
  int cc = 10 * p.major + p.minor;
  if (kernels_ptx_arch() > 0) cc = std::min(cc, kernels_ptx_arch());
  if (shape && shape->cc_major > 0) cc = std::min(cc, 10 * shape->cc_major + shape->cc_minor);
  EXPECT_EQ(10 * lim.cc_major + lim.cc_minor, cc);
  // An empty kernel's blocks an SM: 1,024-thread blocks (one on Orin's SM,
  // two on the H200's), 256-thread ones with 48 KiB (shared memory's limit:
  // three on Orin, four on the H200), 192 KiB (more than Orin's block takes).
  for (const auto& [threads, smem] : {std::pair{1024, size_t{0}}, std::pair{256, size_t{48} << 10},
                                      std::pair{128, size_t{0}}, std::pair{64, size_t{192} << 10}}) {
    EXPECT_EQ(empty_kernel_blocks_per_sm(threads, smem), expected_blocks(lim, threads, smem))
        << threads << " threads, " << smem << " bytes";
  }
  if (shape && shape->name == "orin" && p.major == 9) {
    EXPECT_EQ(empty_kernel_blocks_per_sm(1024, 0), 1);
    EXPECT_EQ(empty_kernel_blocks_per_sm(256, size_t{48} << 10), 3);
    EXPECT_EQ(empty_kernel_blocks_per_sm(64, size_t{192} << 10), 0);
  }
  EXPECT_GT(kernels_ptx_arch(), 0);
}

}  // namespace
}  // namespace minfer::kernels

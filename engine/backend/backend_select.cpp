#include "engine/backend/backend_select.h"

#include <fmt/format.h>

#include "engine/backend/cpu/cpu_backend.h"
#include "platform/log.h"

#ifdef MINFER_HAVE_CUDA_BACKEND
#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/weight_layout.h"
#endif

namespace minfer {
namespace {

#ifdef MINFER_HAVE_CUDA_BACKEND
// The gate: a usable device, and a kernel for every weight (type and row width).
Expected<std::unique_ptr<Backend>> cuda_gate(const ModelConfig& config, const ModelWeights& weights, std::string* reason) {
  MINFER_ASSIGN_OR_RETURN(cuda::DeviceFacts facts, cuda::probe_device());
  const std::vector<const Weight*> matrices = weights.matrices();
  for (const Weight* w : matrices) {
    if (!kernels::wtype_supported(static_cast<uint32_t>(w->type), w->n_in)) {
      return unexpected(ErrorCode::kUnsupported,
                        fmt::format("weight '{}' has type {} with rows of {}, which the CUDA kernels do not implement",
                                    w->name, dtype_name(w->type), w->n_in));
    }
    const auto wt = static_cast<kernels::WType>(static_cast<uint32_t>(w->type));
    if (!kernels::plane_offsets_fit(wt, w->n_in, w->n_out)) {
      return unexpected(ErrorCode::kUnsupported,
                        fmt::format("weight '{}' ({} x {} of type {}) has a plane of 4 GiB or more, past the CUDA "
                                    "kernels' 32-bit offsets",
                                    w->name, w->n_out, w->n_in, dtype_name(w->type)));
    }
  }
  const int group = config.n_heads / config.n_kv_heads;
  if (config.head_dim > 256 || group > 16) {
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("head_dim {} / query group {} exceed the CUDA attention kernels (256 / 16)",
                                  config.head_dim, group));
  }
  *reason = fmt::format("cuda: {}; all {} weight matrices have kernels", facts.describe(), matrices.size());
  return std::unique_ptr<Backend>(new CudaBackend(std::move(facts)));
}
#endif

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

Expected<BackendSelection> select_backend(BackendChoice choice, const ModelConfig& config, const ModelWeights& weights) {
  BackendSelection sel;
  if (choice == BackendChoice::kCpu) {
    sel.backend = std::make_unique<CpuBackend>();
    sel.reason = "cpu requested by configuration";
    return sel;
  }
  std::string why;
#ifdef MINFER_HAVE_CUDA_BACKEND
  auto cuda = cuda_gate(config, weights, &sel.reason);
  if (cuda) {
    sel.backend = std::move(*cuda);
    return sel;
  }
  why = cuda.error().message;
#else
  (void)config;
  (void)weights;
  why = "this build has no CUDA backend";
#endif
  if (choice == BackendChoice::kCuda) {
    return unexpected(ErrorCode::kUnsupported, "backend cuda was demanded but the CUDA weight gate failed: " + why);
  }
  log::warn("running the whole model on the CPU: {}", why);
  sel.backend = std::make_unique<CpuBackend>();
  sel.reason = "cpu: " + why;
  return sel;
}

}  // namespace minfer

#include "engine/backend/cuda/cublas_loader.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

namespace minfer::cuda {

Expected<const CublasApi*> cublas_api() {
  static std::once_flag once;
  static CublasApi api;
  static std::string error;
  std::call_once(once, [] {
    // The runtime's major version picks the soname (CUDART_VERSION 13000 → .so.13).
    const std::string lib = fmt::format("libcublas.so.{}", CUDART_VERSION / 1000);
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef MINFER_CUDA_LIBRARY_DIR
    // Not on the loader's path (a toolkit outside ld.so.conf): the toolkit
    // this build used.
    if (h == nullptr) h = dlopen((std::string(MINFER_CUDA_LIBRARY_DIR) + "/" + lib).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
    if (h == nullptr) {
      const char* e = dlerror();
      error = fmt::format("cannot load {} (cuBLAS, for prefill matrix products): {}; install the CUDA {} cuBLAS runtime",
                          lib, e ? e : "unknown error", CUDART_VERSION / 1000);
      return;
    }
    api.create = reinterpret_cast<decltype(api.create)>(dlsym(h, "cublasCreate_v2"));
    api.destroy = reinterpret_cast<decltype(api.destroy)>(dlsym(h, "cublasDestroy_v2"));
    api.set_stream = reinterpret_cast<decltype(api.set_stream)>(dlsym(h, "cublasSetStream_v2"));
    api.gemm_ex = reinterpret_cast<decltype(api.gemm_ex)>(dlsym(h, "cublasGemmEx"));
    if (!api.create || !api.destroy || !api.set_stream || !api.gemm_ex) {
      error = fmt::format("{} lacks cublasCreate_v2/cublasDestroy_v2/cublasSetStream_v2/cublasGemmEx", lib);
    }
  });
  if (!error.empty()) return unexpected(ErrorCode::kDevice, error);
  return &api;
}

}  // namespace minfer::cuda

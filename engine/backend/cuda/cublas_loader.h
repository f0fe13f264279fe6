// cuBLAS, loaded when the CUDA backend first needs it (dlopen), not when the
// program starts: libcublasLt alone maps hundreds of MB, and the CPU backend,
// `minfer synth` or `minfer gguf` never use it. Only the four calls the
// prefill GEMM needs are resolved.
#pragma once

#include <cublas_v2.h>

#include "engine/common/expected.h"

namespace minfer::cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // cublasGemmEx is overloaded in C++: its C signature, spelled out.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmEx gemm_ex = nullptr;
};

// The library of the CUDA major version this build uses (libcublas.so.<major>),
// loaded once; an error names the library and dlerror().
Expected<const CublasApi*> cublas_api();

}  // namespace minfer::cuda

// The register-loading decode matvec and gate/up kernels of F32 and F16, and
// the run-time-typed ones (-1, and the launches of mixed types):
// matvec_kernels.cuh's launchers instantiated for them (matvec.cu dispatches).
#include "kernels/matvec_kernels.cuh"

namespace minfer::kernels {

MINFER_MATVEC_TYPED(, -1);
MINFER_MATVEC_TYPED(, static_cast<int>(WType::kF32));
MINFER_MATVEC_TYPED(, static_cast<int>(WType::kF16));

cudaError_t launch_matvec_mixed(const MatvecBatch& b, int blocks, size_t smem, bool defer, cudaStream_t stream) {
  return launch_matvec_kernel(defer ? matvec_kernel<-1, 0, kWarp, true> : matvec_kernel<-1, 0, kWarp, false>, b, blocks, smem,
                              stream);
}

cudaError_t launch_gate_up_mixed(const DeviceWeight& gate, const DeviceWeight& up, const MatvecInput& in, const DotInput& din,
                                 float* h, Q8Rows hq, size_t smem, bool defer, cudaStream_t stream) {
  return launch_gate_up_kernel(defer ? gate_up_kernel<-1, 1, 0, kWarp, true> : gate_up_kernel<-1, 1, 0, kWarp, false>,
                               kGateUpThreads<kWarp>, gate, up, in, din, h, hq, smem, stream);
}

}  // namespace minfer::kernels

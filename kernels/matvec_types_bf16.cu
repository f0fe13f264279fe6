// The register-loading decode matvec and gate/up kernels of BF16:
// matvec_kernels.cuh's launchers instantiated for them (matvec.cu dispatches).
// A file of its own: compiled beside F32 and F16 one of its kernels came
// out with other loads (PTX) than when it was in matvec.cu.
#include "kernels/matvec_kernels.cuh"

namespace minfer::kernels {

MINFER_MATVEC_TYPED(, static_cast<int>(WType::kBF16));

}  // namespace minfer::kernels

// The register-loading decode matvec and gate/up kernels of Q6_K:
// matvec_kernels.cuh's launchers instantiated for them (matvec.cu dispatches).
#include "kernels/matvec_kernels.cuh"

namespace minfer::kernels {

MINFER_MATVEC_TYPED(, static_cast<int>(WType::kQ6_K));

}  // namespace minfer::kernels

// The register-loading decode matvec and gate/up kernels of Q8_0:
// matvec_kernels.cuh's launchers instantiated for them (matvec.cu dispatches).
#include "kernels/matvec_kernels.cuh"

namespace minfer::kernels {

MINFER_MATVEC_TYPED(, static_cast<int>(WType::kQ8_0));

}  // namespace minfer::kernels

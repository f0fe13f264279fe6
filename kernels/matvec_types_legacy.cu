// The register-loading decode matvec and gate/up kernels of Q4_0, Q4_1, Q5_0 and Q5_1:
// matvec_kernels.cuh's launchers instantiated for them (matvec.cu dispatches).
#include "kernels/matvec_kernels.cuh"

namespace minfer::kernels {

MINFER_MATVEC_TYPED(, static_cast<int>(WType::kQ4_0));
MINFER_MATVEC_TYPED(, static_cast<int>(WType::kQ4_1));
MINFER_MATVEC_TYPED(, static_cast<int>(WType::kQ5_0));
MINFER_MATVEC_TYPED(, static_cast<int>(WType::kQ5_1));

}  // namespace minfer::kernels

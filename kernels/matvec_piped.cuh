// The pipelined decode matvec and gate/up (matvec_piped.cu), called by
// matvec.cu's launchers before their register-loading kernels. Each returns
// cudaErrorNotSupported, launching nothing, when it does not apply (switched
// off, a device before sm_80, a weight type it lacks, mixed types, rows of
// fewer units than a warp has lanes, unaligned planes); the caller then
// launches matvec.cu's kernel.
#pragma once

#include "kernels/dot.cuh"
#include "kernels/kernels.h"

namespace minfer::kernels {

// What a call does: launch; or launch nothing and answer cudaSuccess where
// it would have launched (matvec.cu asks so for launches that must not take
// it); or the same as if the mode were 1, every launch (*_fits_piped).
enum class PipedCall { kLaunch, kWouldLaunch, kFits };

// defer_scale: the deferred norm's scale (MatvecInput::defer_scale) or null.
cudaError_t launch_matvec_piped(const MatvecTask* tasks, int n_tasks, const DotInput& in, const float* defer_scale,
                                cudaStream_t stream, PipedCall call = PipedCall::kLaunch);
cudaError_t launch_gate_up_piped(const DeviceWeight& gate, const DeviceWeight& up, const DotInput& in, const float* defer_scale,
                                 float* h, int8_t* hq, float2* hds, cudaStream_t stream,
                                 PipedCall call = PipedCall::kLaunch);

}  // namespace minfer::kernels

// The pipelined gate/up (gate_up_piped.cu), called by matvec.cu's
// launch_gate_up_swiglu before its register-loading kernels. Returns
// cudaErrorNotSupported, launching nothing, when it does not apply (switched
// off, a device before sm_80, a weight type it lacks, rows a warp cannot
// share, the norm prologue); the caller then launches matvec.cu's kernel.
#pragma once

#include "kernels/dot.cuh"
#include "kernels/kernels.h"

namespace minfer::kernels {

cudaError_t launch_gate_up_piped(const DeviceWeight& gate, const DeviceWeight& up, const DotInput& in, const float* defer_scale,
                                 float* h, int8_t* hq, float2* hds, cudaStream_t stream);

}  // namespace minfer::kernels

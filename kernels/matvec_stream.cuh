// The streamed decode matvecs (matvec_stream.cu), called by matvec.cu's
// launchers before their register-loading kernels. Each returns
// cudaErrorNotSupported, launching nothing, when it does not apply (switched
// off, a type without Unit::Raw, mixed types, unaligned planes, a stage ring
// that does not fit); the caller then launches matvec.cu's kernel.
#pragma once

#include "kernels/dot.cuh"
#include "kernels/kernels.h"

namespace minfer::kernels {

// launch = false: launches nothing, cudaSuccess where it would have
// launched (matvec.cu asks for launches that must not take it).
cudaError_t launch_matvec_streamed(const MatvecTask* tasks, int n_tasks, const DotInput& in, cudaStream_t stream,
                                   bool launch = true);
cudaError_t launch_gate_up_streamed(const DeviceWeight& gate, const DeviceWeight& up, const DotInput& in, float* h, int8_t* hq,
                                    float2* hds, cudaStream_t stream);

}  // namespace minfer::kernels

// The one place the serving path waits for the GPU (ARCHITECTURE.md rule 4):
// record an event on the stream and poll it until it completes or the
// deadline passes. Never cudaStreamSynchronize / cudaDeviceSynchronize.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>

#include "engine/common/expected.h"

namespace minfer::cuda {

// Waits for all work enqueued on `stream` so far. kTimeout when the deadline
// passes (the work may still be running: the caller marks the engine wedged);
// kDevice with the CUDA error if the stream failed.
Status wait_bounded(cudaStream_t stream, cudaEvent_t event, std::chrono::steady_clock::time_point deadline);

// Waits for `event`, recorded already (a step's end, with later steps
// queued behind it): the polling that wait_bounded does after its record.
Status wait_recorded(cudaEvent_t event, std::chrono::steady_clock::time_point deadline);

}  // namespace minfer::cuda

#!/usr/bin/env bash
# ARCHITECTURE.md rule 4: the serving path waits for the GPU only through the
# bounded wait (engine/backend/cuda/bounded_wait.cpp). An unbounded
# cudaDeviceSynchronize / cudaStreamSynchronize / cudaEventSynchronize in the
# product's code fails this test, naming file and line; tests may use them.
# The one allowed exception is the copy-bandwidth benchmark, which is not on
# the serving path (a line marked "benchmark, not the serving path").
set -u
root=${1:?usage: no_unbounded_gpu_waits.sh REPO_ROOT}
hits=$(grep -rnE 'cuda(Device|Stream|Event)Synchronize[[:space:]]*\(' \
        "$root/engine" "$root/kernels" "$root/daemon" "$root/platform" 2>/dev/null |
       grep -v 'benchmark, not the serving path')
if [ -n "$hits" ]; then
  echo "unbounded GPU waits outside the bounded wait:"
  echo "$hits"
  exit 1
fi
echo "no unbounded GPU waits in engine/, kernels/, daemon/, platform/"

#!/usr/bin/env bash
# Session 32, run 2: the pipelined products' tests asking whether a launch's
# stages fit the block (kernels::*_fits_piped) — run 1 shaped as Orin found
# 7B Q8_0's 18,944-wide gate/up on the plain kernel, correctly — then the
# sm_90 build's GPU tests again, the suites shaped as Orin (16 and 4 SMs) from
# the compute_87 build, and the 0.5B graphs / eager bench if time is left.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session32-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
bash tests/gpu/run_on_device.sh build test; keep test
cp "$out/logs.tgz" "$keeps/test-logs.tgz" 2>/dev/null
GPU_TEST_TIMEOUT=150 JETSON_SHAPES="orin orin,sms=4" bash tests/gpu/run_on_device.sh jetson; keep jetson
cp "$out/logs.tgz" "$keeps/jetson-logs.tgz" 2>/dev/null
[ "$SECONDS" -lt 430 ] && { bash tests/gpu/run_on_device.sh bench-small; keep small; }
cp "$keeps"/*-logs.tgz "$out/" 2>/dev/null

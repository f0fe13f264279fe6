#!/usr/bin/env bash
# Session 32, run 1: MINFER_DEVICE_SHAPE. The sm_90 build's GPU tests (the
# shape's parse and limits, the engine refusing a shape beyond the device and
# giving the same greedy text shaped as Orin), then the GPU suites shaped as
# Jetson AGX Orin from a compute_87-only build (JIT-compiled by the driver),
# and the same for Orin Nano 4 GB's 4 SMs if time is left.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session32-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
bash tests/gpu/run_on_device.sh build test; keep test
cp "$out/logs.tgz" "$keeps/test-logs.tgz" 2>/dev/null
GPU_TEST_TIMEOUT=150 JETSON_SHAPES="orin" bash tests/gpu/run_on_device.sh jetson; keep jetson
cp "$out/logs.tgz" "$keeps/jetson-logs.tgz" 2>/dev/null
[ "$SECONDS" -lt 420 ] && { GPU_TEST_TIMEOUT=100 JETSON_SHAPES="orin,sms=4" bash tests/gpu/run_on_device.sh jetson; keep jetson4; }
cp "$keeps"/*-logs.tgz "$out/" 2>/dev/null

#!/usr/bin/env bash
# Session 37, run 5: the committed tree (session 36's code; this session
# changed comments only): build, both GPU suites in full, the small models'
# and the 7B files' pp512 / tg128 with graphs and eager launches.
set -uo pipefail
bash tests/gpu/run_on_device.sh build test bench-small bench-large

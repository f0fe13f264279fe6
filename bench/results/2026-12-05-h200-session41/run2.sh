#!/usr/bin/env bash
# Session 41, run 2: the committed tree with the Q6_K change (e360c9b): build,
# both GPU suites in full, the small models' and the 7B files' pp512 / tg128
# with graphs and eager launches — the README's speed table.
set -uo pipefail
bash tests/gpu/run_on_device.sh build test bench-small bench-large

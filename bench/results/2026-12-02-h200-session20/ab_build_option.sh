#!/usr/bin/env bash
# Same-machine A/B of a build option: a = default build, b = CMAKE_ARGS_B;
# c = CMAKE_ARGS_C, the fallback for a if a's kernel tests fail.
set -u
R=$PWD; O=${OUT:-/tmp/out}
s=$(date +%s); el() { echo "[$(( $(date +%s) - s )) s] $*"; }
st() { local arm=$1 stage=$2; shift 2; mkdir -p $O/$arm-$stage; env OUT=$O/$arm-$stage BUILD_DIR=$R/build-$arm "$@" bash tests/gpu/run_on_device.sh $stage; }
st a build; el built-a
(st b build CMAKE_ARGS="$CMAKE_ARGS_B" BUILD_TARGETS="minfer gpu_decode_timeline" > $O/b-build.txt 2>&1) &
(st c build CMAKE_ARGS="$CMAKE_ARGS_C" BUILD_TARGETS="minfer gpu_kernels_test gpu_decode_timeline" > $O/c-build.txt 2>&1) &
st a test > $O/a-test.txt 2>&1; wait; grep -v "^/work" $O/a-test.txt | tail -6; tail -1 $O/b-build.txt $O/c-build.txt; el tested
E=a
if grep -q "FAILED" $O/a-test.txt; then
  tar xzf $O/a-test/logs.tgz -C $O/a-test; grep -h -m2 -A4 "Failure" $O/a-test/gpu_kernels_test.log | head -12
  $R/build-c/tests/gpu/gpu_kernels_test > $O/c-kt.log 2>&1; grep -E "^\[  (PASSED|FAILED)" $O/c-kt.log | head -5; el tested-c
  grep -q "FAILED" $O/c-kt.log && exit 1
  E=c
fi
echo "evict arm: $E"
st $E bench-large | tail -2; el large-$E
st b bench-large | tail -2; el large-b
export TIMELINE_MODELS="${TL:-qwen2.5-7b:q8_0 qwen2.5-0.5b:q8_0}"
st $E timeline > $O/$E-tl.txt; el tl-$E
st b timeline > $O/b-tl.txt; el tl-b
st $E bench-small | tail -4; el small-$E
st b bench-small | tail -4; el small-b
for x in $E b; do echo "== tl $x"; grep -E "^step|_kernel|decode timeline" $O/$x-tl.txt | cut -c1-120; done

#!/usr/bin/env bash
# Same-machine A/B of source files: "new" is the working tree, "base" a copy
# of it with AB_FILES as they are at AB_REV (default HEAD), built beside it.
# New is built and tested (NEW_STAGES), base built (BASE_TARGETS), then each
# of ROUNDS rounds runs STAGES on new, then on base; the summaries are
# printed and the logs kept as $OUT/{new,base,nI,bI}.log.
#
#   AB_REV=REV AB_FILES="kernels/pipe.cuh ..." [ROUNDS=2] bench/results/2026-12-03-h200-session23/ab_files.sh STAGE...
#
# (Runs 2, 4 and 5 of this folder were made with the form it had then, which
# took base's files from a folder of the tree, put there with `git show`.)
set -u
root=$(pwd)
base=/tmp/ab-base
: "${AB_FILES:?which files base takes from AB_REV}"
rounds=${ROUNDS:-2}
rm -rf "$base" && mkdir -p "$base"
# The tree as it lies, not `git ls-files`: on the lent machines the index can
# lack files the tree has (session 29's run 3 lost its base build so).
tar --exclude=./build-gpu --exclude=./gpu-out --exclude=./.git -cf - . | tar -xf - -C "$base"
for f in $AB_FILES; do git show "${AB_REV:-HEAD}:$f" >"$base/$f" || exit 1; done
s() { bash "$root/tests/gpu/run_on_device.sh" "$@"; }
b() { BUILD_DIR=$base/build bash "$base/tests/gpu/run_on_device.sh" "$@"; }
show() { echo "== $1"; sed -n '/== summary ==/,$p' "$OUT/$1.log" | grep -v "^== summary\|^$"; }
# shellcheck disable=SC2086
OUT=$OUT/new s ${NEW_STAGES:-build test} >"$OUT/new.log" 2>&1; show new
OUT=$OUT/base BUILD_TARGETS="${BASE_TARGETS:-minfer gpu_decode_timeline}" b build >"$OUT/base.log" 2>&1; show base
for i in $(seq "$rounds"); do
  OUT=$OUT/n$i s "$@" >"$OUT/n$i.log" 2>&1; show "n$i"
  OUT=$OUT/b$i b "$@" >"$OUT/b$i.log" 2>&1; show "b$i"
done
rm -rf "${OUT:?}"/*/  # the lent machines send back a few files: the logs only

#!/usr/bin/env bash
# Developer entry point: install the build dependencies, build, run the demo,
# run the tests. The README's two commands are `dev.sh demo` and `dev.sh test`;
# .ci/run calls `dev.sh test`.
#
#   dev.sh deps    install missing Debian/Ubuntu packages (needs root or sudo)
#   dev.sh build   configure and build into build/ (Release)
#   dev.sh demo    build, then generate text with the shipped small model
#   dev.sh test    build with warnings as errors, then run every test (ctest)
#
# Environment: BUILD_DIR (default build), JOBS (default nproc),
# CUDA_ARCH (e.g. 90; default: 87 and 90 when nvcc is found),
# MINFER_CUDA=OFF to build without the CUDA backend.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libboost-program-options-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev libsystemd-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  curl
)

deps() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "dev.sh: installing missing packages: ${missing[*]}" >&2
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

configure() {
  local args=(-S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@")
  [ -n "${CUDA_ARCH:-}" ] && args+=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH")
  [ -n "${MINFER_CUDA:-}" ] && args+=(-DMINFER_CUDA="$MINFER_CUDA")
  cmake "${args[@]}" >/dev/null
}

build() {
  configure "$@"
  cmake --build "$build_dir" -j "$jobs"
}

cmd=${1:-}
shift || true
case "$cmd" in
  deps) deps ;;
  build) deps; build "$@" ;;
  demo)
    deps
    build
    model=$root/tests/data/models/stories260K.gguf
    echo "dev.sh: minfer generate -m $model -p 'Once upon a time' -n 64" >&2
    "$build_dir/daemon/minfer" generate -m "$model" -p "Once upon a time" -n 64 "$@"
    echo
    ;;
  test)
    deps
    build -DMINFER_WERROR=ON -DMINFER_TESTS=ON
    cd "$build_dir"
    ctest --output-on-failure -j "$jobs" "$@"
    ;;
  *)
    sed -n '2,16p' "$0" >&2
    exit 2
    ;;
esac

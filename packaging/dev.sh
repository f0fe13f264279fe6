#!/usr/bin/env bash
# Developer entry point: install the build dependencies, build, run the demo,
# run the tests. The README's two commands are `dev.sh demo` and `dev.sh test`;
# .ci/run calls `dev.sh test`.
#
#   dev.sh deps    install missing Debian/Ubuntu packages (needs root or sudo)
#   dev.sh build   configure and build into build/ (Release)
#   dev.sh demo    build, start minferd with the shipped small model on a temp
#                  socket, query it with curl and `minfer complete`, stop it
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
  libboost-dev libboost-program-options-dev   # Boost.Asio, Boost.Beast (headers), ProgramOptions
  libspdlog-dev libfmt-dev nlohmann-json3-dev libsystemd-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  curl
  systemd dpkg-dev lintian jq                 # tests/systemd, tests/packaging: systemd-analyze, systemd --user, journald, dpkg-shlibdeps, lintian
  clang-14 libclang-rt-14-dev                 # .ci/sanitizers: ASan/UBSan/TSan builds and the libFuzzer targets
  python3-jsonschema                          # tests/data/schemas/check_walks.py: structured output checked by another implementation
  g++-aarch64-linux-gnu qemu-user googletest  # .ci/run: the NEON kernels (Jetson's CPU backend) cross-built and run under qemu
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

# Starts minferd with the shipped model on a socket in a temp dir, waits for
# /health, asks for a completion with curl and with `minfer complete`, then
# stops the daemon with SIGTERM (it drains and exits 0).
demo() {
  local model=$root/tests/data/models/stories260K.gguf
  local dir
  dir=$(mktemp -d /tmp/minfer-demo.XXXXXX)
  local sock=$dir/minferd.sock
  echo "dev.sh: minferd --model $model --socket $sock" >&2
  "$build_dir/daemon/minferd/minferd" --model "$model" --socket "$sock" --ctx-size 256 "$@" 2>"$dir/minferd.log" &
  local pid=$!
  trap 'kill -TERM '"$pid"' 2>/dev/null; wait '"$pid"' 2>/dev/null; rm -rf '"$dir" EXIT
  local i
  for i in $(seq 100); do
    curl -sf --unix-socket "$sock" http://minferd/health >/dev/null 2>&1 && break
    if ! kill -0 "$pid" 2>/dev/null; then cat "$dir/minferd.log" >&2; echo "dev.sh: minferd did not start" >&2; exit 1; fi
    sleep 0.1
  done
  echo "dev.sh: GET /health" >&2
  curl -sS --unix-socket "$sock" http://minferd/health; echo
  local body='{"prompt": "Once upon a time", "max_tokens": 48, "temperature": 0}'
  echo "dev.sh: curl --unix-socket $sock http://minferd/v1/completions -d '$body'" >&2
  curl -sS --unix-socket "$sock" http://minferd/v1/completions -H 'Content-Type: application/json' -d "$body"; echo
  echo "dev.sh: minfer complete --socket $sock -n 48 'Once upon a time'  (streamed)" >&2
  "$build_dir/daemon/minfer" complete --socket "$sock" -n 48 --temperature 0.8 --seed 7 "Once upon a time"
  echo "dev.sh: stopping minferd (SIGTERM)" >&2
  kill -TERM "$pid"
  local status=0
  wait "$pid" || status=$?
  trap 'rm -rf '"$dir" EXIT
  echo "dev.sh: minferd exited with status $status; its log:" >&2
  cat "$dir/minferd.log" >&2
  return "$status"
}

cmd=${1:-}
shift || true
case "$cmd" in
  deps) deps ;;
  build) deps; build "$@" ;;
  demo)
    deps
    build
    demo "$@"
    ;;
  test)
    deps
    build -DMINFER_WERROR=ON -DMINFER_TESTS=ON
    cd "$build_dir"
    ctest --output-on-failure -j "$jobs" "$@"
    ;;
  *)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac

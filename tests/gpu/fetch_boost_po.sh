#!/usr/bin/env bash
# Fills .carry/boost_po (git-ignored) with Boost.ProgramOptions' sources from
# Debian's boost1.81 source tarball, for GPU machines that have Boost's
# headers but no compiled Boost libraries (run_on_device.sh builds them
# there). Run here before a device run that carries .carry; needs curl and xz.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dest="$root/.carry/boost_po"
url=${BOOST_TARBALL_URL:-http://deb.debian.org/debian/pool/main/b/boost1.81/boost1.81_1.81.0.orig.tar.xz}
if [ -n "$(ls "$dest"/*.cpp 2>/dev/null)" ]; then
  echo "$dest already holds the sources"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL "$url" -o "$tmp/boost.tar.xz"
tar -xJf "$tmp/boost.tar.xz" -C "$tmp" --wildcards '*/libs/program_options/src/*.cpp'
mkdir -p "$dest"
cp "$tmp"/*/libs/program_options/src/*.cpp "$dest"/
echo "$(ls "$dest" | wc -l) files in $dest"

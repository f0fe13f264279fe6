#!/usr/bin/env bash
# The .deb, built by CPack from this build tree:
#  - its name is minfer_<version>_<arch>.deb; `dpkg-deb --contents` lists every
#    file the package must install; /etc/minfer/minferd.conf is a conffile;
#    postinst, prerm and postrm are there;
#  - Depends: are the runtime libraries (computed by dpkg-shlibdeps) and
#    systemd, with no -dev package and no CUDA library; a CUDA build
#    Recommends: cuBLAS and the driver's libcuda (loaded at run time);
#  - the packaged binaries carry no RUNPATH and link no CUDA library
#    dynamically, and minferd's built-in default model is the file the package
#    ships, byte for byte;
#  - the sysusers.d and tmpfiles.d files make the user minfer and
#    /var/lib/minfer/models (run against a scratch root);
#  - lintian reports no errors.
# Exit 77 (CTest SKIP_RETURN_CODE) with a reason when a tool is missing.
#
# usage: deb_test.sh BUILD_DIR VERSION UNIT_DIR WITH_CUDA(ON|OFF) REPO_MODEL
set -euo pipefail

build=$1
version=$2
unitdir=$3
with_cuda=$4
repo_model=$5

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

for tool in cpack dpkg-deb dpkg-shlibdeps lintian; do
  command -v "$tool" >/dev/null ||
    skip "$tool is not installed (packaging/dev.sh installs dpkg-dev and lintian; run 'bash packaging/dev.sh deps')"
done

work=$(mktemp -d /tmp/minfer-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "== cpack (DEB) from $build"
(cd "$build" && cpack -G DEB -B "$work/out") >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack failed"; }
arch=$(dpkg --print-architecture)
deb=$work/out/minfer_${version}_${arch}.deb
[ -f "$deb" ] || { ls "$work/out"; fail "cpack did not write minfer_${version}_${arch}.deb"; }
echo "built $(basename "$deb") ($(stat -c %s "$deb") bytes)"

echo "== dpkg-deb --contents"
dpkg-deb --contents "$deb" | awk '{print $6}' | sed 's|^\./|/|' | sort >"$work/contents"
for path in /usr/sbin/minferd /usr/bin/minfer \
            "$unitdir/minferd.service" "$unitdir/minferd.socket" \
            /usr/lib/sysusers.d/minfer.conf /usr/lib/tmpfiles.d/minfer.conf \
            /etc/minfer/minferd.conf /usr/share/minfer/models/stories260K.gguf \
            /usr/share/doc/minfer/copyright /usr/share/doc/minfer/changelog.gz /usr/share/doc/minfer/README.md; do
  grep -qxF "$path" "$work/contents" || { cat "$work/contents"; fail "the package lacks $path"; }
done
echo "all $(grep -vc '/$' "$work/contents") files present"

echo "== control"
dpkg-deb --info "$deb"
field() { dpkg-deb --field "$deb" "$1"; }
[ "$(field Package)" = minfer ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version" ] || fail "Version: $(field Version), expected $version"
[ "$(field Architecture)" = "$arch" ] || fail "Architecture: $(field Architecture), expected $arch"
depends=$(field Depends)
for lib in libc6 'libstdc++6' libgcc-s1 libsystemd0 libboost-program-options1 libspdlog libfmt; do
  grep -qE "(^|[ ,|])${lib//+/\\+}" <<<"$depends" || fail "Depends: lacks $lib: $depends"
done
if grep -qE -- '-dev([ ,(]|$)' <<<"$depends"; then fail "Depends: names a -dev package: $depends"; fi
# cuBLAS and the driver's libcuda are loaded at run time by the CUDA backend
# (a CPU fallback without them): recommended, never required.
if grep -qE 'cublas|libcuda' <<<"$depends"; then fail "Depends: names a CUDA library: $depends"; fi
recommends=$(field Recommends)
if [ "$with_cuda" = ON ]; then
  grep -qE 'libcublas-[0-9]+-[0-9]+ \| libcublas[0-9]+' <<<"$recommends" || fail "a CUDA build must recommend cuBLAS: $recommends"
  grep -q 'libcuda1 | libcuda.so.1 | nvidia-l4t-cuda' <<<"$recommends" || fail "a CUDA build must recommend the driver's libcuda: $recommends"
else
  [ -z "$recommends" ] || fail "a build without CUDA recommends: $recommends"
fi
dpkg-deb --control "$deb" "$work/control"
[ "$(cat "$work/control/conffiles")" = /etc/minfer/minferd.conf ] || fail "conffiles: $(cat "$work/control/conffiles")"
for s in postinst prerm postrm; do
  [ -x "$work/control/$s" ] || fail "no executable $s"
  sh -n "$work/control/$s" || fail "$s: shell syntax error"
done

echo "== the packaged files"
dpkg-deb -x "$deb" "$work/root"
for bin in usr/sbin/minferd usr/bin/minfer; do
  if readelf -d "$work/root/$bin" | grep -qE 'RPATH|RUNPATH'; then fail "/$bin carries a search path: $(readelf -d "$work/root/$bin" | grep PATH)"; fi
  # cudart is linked statically; cuBLAS and libcuda are loaded at run time.
  if readelf -d "$work/root/$bin" | grep -qE 'NEEDED.*lib(cublas|cublasLt|cudart|cuda)\.'; then
    fail "/$bin links a CUDA library dynamically: $(readelf -d "$work/root/$bin" | grep NEEDED)"
  fi
done
cmp "$work/root/usr/share/minfer/models/stories260K.gguf" "$repo_model" || fail "the packaged model differs from $repo_model"
default_model=$("$work/root/usr/sbin/minferd" --help | grep -o -- '--model \] arg (=[^)]*)' | sed 's/.*(=\(.*\))/\1/')
[ "$default_model" = /usr/share/minfer/models/stories260K.gguf ] ||
  fail "minferd's default --model is '$default_model', the package ships /usr/share/minfer/models/stories260K.gguf"
grep -qx 'ExecStart=/usr/sbin/minferd' "$work/root$unitdir/minferd.service" || fail "the packaged unit's ExecStart= is not /usr/sbin/minferd"

echo "== sysusers.d and tmpfiles.d against a scratch root"
if [ "$(id -u)" -ne 0 ]; then
  echo "(not root: cannot give files to the user minfer in a scratch root; not checked)"
elif command -v systemd-sysusers >/dev/null && command -v systemd-tmpfiles >/dev/null; then
  scratch=$work/scratch
  mkdir -p "$scratch/etc" "$scratch/usr/lib/sysusers.d" "$scratch/usr/lib/tmpfiles.d"
  cp "$work/root/usr/lib/sysusers.d/minfer.conf" "$scratch/usr/lib/sysusers.d/"
  cp "$work/root/usr/lib/tmpfiles.d/minfer.conf" "$scratch/usr/lib/tmpfiles.d/"
  systemd-sysusers --root="$scratch"
  user=$(grep '^minfer:' "$scratch/etc/passwd") || fail "sysusers made no user minfer: $(cat "$scratch/etc/passwd")"
  grep -q '^minfer:' "$scratch/etc/group" || fail "sysusers made no group minfer"
  IFS=: read -r _ _ uid gid _ home shell <<<"$user"
  [ "$uid" -lt 1000 ] || fail "minfer is not a system user (uid $uid)"
  [ "$gid" = "$(grep '^minfer:' "$scratch/etc/group" | cut -d: -f3)" ] || fail "minfer's primary group is not minfer"
  [ "$home" = /var/lib/minfer ] && [ "$shell" = /usr/sbin/nologin ] || fail "minfer: home $home, shell $shell"
  systemd-tmpfiles --root="$scratch" --create minfer.conf
  [ -d "$scratch/var/lib/minfer/models" ] || fail "tmpfiles made no /var/lib/minfer/models"
  owner=$(stat -c %u:%g "$scratch/var/lib/minfer/models")
  [ "$owner" = "$uid:$gid" ] || fail "/var/lib/minfer/models is owned by $owner, not minfer ($uid:$gid)"
  echo "user: $user; /var/lib/minfer/models: $(stat -c '%A %u:%g' "$scratch/var/lib/minfer/models")"
else
  echo "(systemd-sysusers or systemd-tmpfiles missing: not checked)"
fi

echo "== lintian"
out=$(lintian --fail-on error --tag-display-limit 0 "$deb" 2>&1) && rc=0 || rc=$?
grep -v 'running with root privileges' <<<"$out" || true
[ "$rc" -eq 0 ] || fail "lintian reports errors (exit $rc)"
echo "PASS: $(basename "$deb"): contents, control, conffiles, scripts, Depends, model, sysusers/tmpfiles, lintian (no errors)"

#!/usr/bin/env bash
# Registers and spills of every kernel, this working tree against a git
# revision: the kernels whose allocation changed, by name. Runs on any machine
# with nvcc (no GPU): a kernel change behind a run-time test can move ptxas's
# allocation of kernels that never take it — session 21 saw a 56 → 64 register
# change put 7B Q4_K_M's q/k/v launch into a second wave of blocks
# (bench/results/2026-12-02-h200-session21). Check it before a device run.
#
#   tests/gpu/register_diff.sh [REV] [kernels/FILE.cu ...]
#
# REV: the revision to compare with (default HEAD); files: the kernel sources
# to compile (default every kernels/*.cu). ARCH=90 (default) picks sm_XX.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rev=${1:-HEAD}
shift || true
arch=${ARCH:-90}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(cd "$root" && ls kernels/*.cu)
fi
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach -q "$work/base" "$rev"

# One compile: tree, source → its ptxas report.
compile() {
  local tree=$1 src=$2 out=$3
  "$nvcc" -I"$tree" -O3 -DNDEBUG --generate-code=arch=compute_$arch,code=sm_$arch --expt-relaxed-constexpr -std=c++17 \
    -Xptxas -v -x cu -c "$tree/$src" -o /dev/null > "$out" 2>&1 || { echo "compile failed: $tree/$src" >&2; cat "$out" >&2; return 1; }
}
export -f compile
export nvcc arch
jobs=()
for f in "${files[@]}"; do
  name=$(basename "$f" .cu)
  jobs+=("$root $f $work/new-$name.log" "$work/base $f $work/old-$name.log")
done
printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -L 1 bash -c 'compile "$0" "$1" "$2"'

python3 - "$work" <<'EOF'
import glob, os, re, subprocess, sys
work = sys.argv[1]

def parse(path):
    kernels, name = {}, None
    for line in open(path, errors="replace"):
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            name = m.group(1)
            kernels[name] = {"regs": None, "spill": (0, 0)}
            continue
        if name is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            kernels[name]["spill"] = (int(m.group(1)), int(m.group(2)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            kernels[name]["regs"] = int(m.group(1))
    return kernels

def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    # Anonymous namespaces mangle differently per tree: compare by the readable name.
    return [re.sub(r"\(anonymous namespace\)::", "", n) for n in out]

changed = 0
for new_log in sorted(glob.glob(os.path.join(work, "new-*.log"))):
    src = os.path.basename(new_log)[4:-4]
    old, new = parse(os.path.join(work, "old-" + src + ".log")), parse(new_log)
    old = dict(zip(demangle(list(old)), old.values()))
    new = dict(zip(demangle(list(new)), new.values()))
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if a == b:
            continue
        changed += 1
        fmt = lambda v: "absent" if v is None else f"{v['regs']} regs, spill {v['spill'][0]}/{v['spill'][1]} B"
        print(f"{src}: {k[:160]}\n    {fmt(a)} -> {fmt(b)}")
print(f"{changed} kernels changed their allocation")
EOF

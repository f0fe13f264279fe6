#!/usr/bin/env python3
"""A line or two per kernel of a `cuobjdump -sass` listing.

    sass_summary.py FILE REGEX kinds   each matching kernel's instruction count and its
                                       loads, dp4a and branches in order (L=LDG D=IDP S=LDS B=branch)
    sass_summary.py FILE REGEX ops     each matching kernel's instruction count and the
                                       opcodes it has most of
"""
import collections
import re
import sys

PREFIX = re.compile(r"^_ZN6minfer7kernels\d+_GLOBAL__N__\w+?_cu_[0-9a-f]+")


def kernels(path):
    name, body = None, {}
    for line in open(path):
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = m.group(1)
            body[name] = []
        elif name and re.search(r"/\*[0-9a-f]{4}\*/", line):
            body[name].append(line.split(";")[0].split("*/", 1)[1].strip())
    return body


def main():
    path, pattern, mode = sys.argv[1:4]
    for name, ins in kernels(path).items():
        if not re.search(pattern, name):
            continue
        short = PREFIX.sub("", name)[:80]
        if mode == "kinds":
            kinds = "".join("L" if i.startswith("LDG") else "S" if i.startswith("LDS") else "D" if "IDP" in i
                            else "B" if i.startswith("BRA") or i.startswith("BSYNC") else "" for i in ins)
            print(f"sass {short}: {len(ins)} instructions; L=LDG D=IDP S=LDS B=branch:\n{kinds}")
        else:
            ops = collections.Counter(re.sub(r"^@!?U?P\w+ ", "", i).split()[0].split(".")[0] for i in ins if i)
            print(f"sass {short}: {len(ins)} instructions; " + " ".join(f"{k}:{v}" for k, v in ops.most_common(14)))


if __name__ == "__main__":
    main()

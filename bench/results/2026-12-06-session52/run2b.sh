#!/usr/bin/env bash
# Session 52, run 2b (on run 2's warm machine and build, with run 2's bulk
# copies off): tg128 with the split kernel forced at several split counts a KV
# head (MINFER_ATTN_SPLIT_BLOCKS; 0 = as many as fill the GPU once: 33 for 7B's
# 4 KV heads, 66 for 0.5B's 2 on an H100).
N=$PWD/build-new M=/tmp/minfer-models
for f in $M/qwen2.5-7b-q4_k_m.gguf $M/qwen2.5-0.5b-q8_0.gguf; do for b in 0 24 16 11 44 33 22; do
  case "$f:$b" in *7b*:44|*7b*:33|*7b*:22|*0.5b*:24|*0.5b*:16|*0.5b*:11) continue;; esac
  echo "== $(basename $f) blocks $b"
  MINFER_ATTN_SPLIT_BULK=0 MINFER_ATTN_DECODE=split MINFER_ATTN_SPLIT_BLOCKS=$b $N/daemon/minfer bench -m $f --backend cuda -p 0 -n 128 -r 2 -d 1024 4096 8192 2>/dev/null \
    | grep tg128 | sed -E 's/^\|[^|]*\|[^|]*\|[^|]*\|[^|]*\|/|/'
done; done 2>&1 | tee $OUT/blocks.md

#!/usr/bin/env bash
# n choices against n requests: one completion with "n": N against N
# completions of one choice each, with the prefix cache on (each choice after
# the first reuses the prompt's KV) and off (--prefix-cache false: every
# choice evaluates the whole prompt). Prints curl's time per request and the
# usage; sampling at temperature 0.8, seed 1, PROMPT random token ids.
# usage: choices.sh BUILD_DIR MODEL.gguf [BACKEND] [PROMPT_TOKENS] [N] [MAX_TOKENS]
set -euo pipefail
build=$1 model=$2 backend=${3:-cpu} prompt=${4:-512} n=${5:-4} max=${6:-16}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
ids=$(python3 -c "import random; r=random.Random(5); print(','.join(str(r.randrange(100, 30000)) for _ in range($prompt)))")
for cache in true false; do
  sock=$work/s-$cache.sock
  "$build/daemon/minferd/minferd" --model "$model" --backend "$backend" --socket "$sock" --ctx-size 4096 \
    --prefix-cache "$cache" --log-level warn 2>"$work/log-$cache" &
  pid=$!
  until curl -sf --unix-socket "$sock" http://minferd/health >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { cat "$work/log-$cache"; exit 1; }
    sleep 0.2
  done
  ask() {  # ask N SEED_OFFSET: one request with n=N and a prompt of its own (no reuse across requests)
    local body="{\"prompt\": [1,$3$ids], \"max_tokens\": $max, \"temperature\": 0.8, \"seed\": $2, \"n\": $1}"
    curl -s --unix-socket "$sock" -w '\n%{time_total}' http://minferd/v1/completions -d "$body"
  }
  for round in 1 2; do
    # A different first token each round, so that no round reuses another's prompt.
    out=$(ask "$n" 1 "$((round * 7)),")
    secs=$(tail -1 <<<"$out")
    usage=$(head -1 <<<"$out" | python3 -c "import json,sys; j=json.load(sys.stdin); u=j['usage']; print(len(j['choices']), 'choices', u['prompt_tokens'], 'prompt', u['completion_tokens'], 'generated')")
    echo "prefix-cache $cache, round $round: n=$n in one request: $secs s ($usage)"
    total=0
    for i in $(seq 0 $((n - 1))); do
      out=$(ask 1 $((1 + i)) "$((round * 7 + 100 + i)),")
      total=$(python3 -c "print(round($total + $(tail -1 <<<"$out"), 3))")
    done
    echo "prefix-cache $cache, round $round: $n requests of n=1: $total s"
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
done

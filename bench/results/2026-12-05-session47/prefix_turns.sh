#!/usr/bin/env bash
# Two conversations in turn against minferd, with the prefix cache keeping
# the previous request's history alone (--prefix-cache-entries 1, what it
# did before session 47) and the last 16: each turn's prompt is its
# conversation so far (the prompt and reply before) and 48 new tokens.
# Prints each request's prompt tokens, cached tokens and wall time (curl,
# non-streaming, 8 tokens generated, greedy).
# usage: prefix_turns.sh BUILD_DIR MODEL.gguf [BACKEND] [FIRST_PROMPT_TOKENS]
set -euo pipefail
build=$1 model=$2 backend=${3:-cpu} first=${4:-512}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# Token ids 100.. of the synthetic vocabulary, different for each conversation and turn.
ids() { python3 -c "import random,sys; r=random.Random(int(sys.argv[1])); print(','.join(str(r.randrange(100, 30000)) for _ in range(int(sys.argv[2]))))" "$1" "$2"; }
for entries in 1 16; do
  sock=$work/s$entries.sock
  "$build/daemon/minferd/minferd" --model "$model" --backend "$backend" --socket "$sock" --ctx-size 4096 \
    --prefix-cache-entries "$entries" --log-level warn 2>"$work/log$entries" &
  pid=$!
  until curl -sf --unix-socket "$sock" http://minferd/health >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { cat "$work/log$entries"; exit 1; }
    sleep 0.2
  done
  declare -A conv
  conv[a]="1,$(ids 1 "$first")"
  conv[b]="1,$(ids 2 "$first")"
  echo "prefix-cache-entries $entries ($backend)"
  printf '%-6s %8s %8s %8s\n' turn prompt cached seconds
  for turn in 1 2 3 4; do
    for c in a b; do
      body="{\"prompt\": [${conv[$c]}], \"max_tokens\": 8, \"temperature\": 0}"
      out=$(curl -s --unix-socket "$sock" -w '\n%{time_total}' http://minferd/v1/completions -d "$body")
      json=$(head -1 <<<"$out") secs=$(tail -1 <<<"$out")
      read -r prompt cached < <(python3 -c "import json,sys; u=json.loads(sys.argv[1])['usage']; print(u['prompt_tokens'], u['prompt_tokens_details']['cached_tokens'])" "$json")
      printf '%-6s %8s %8s %8s\n' "$c$turn" "$prompt" "$cached" "$secs"
      # The next turn: this prompt, the reply's tokens (tokenized by the daemon), 48 new tokens.
      text=$(python3 -c "import json,sys; print(json.dumps(json.loads(sys.argv[1])['choices'][0]['text']))" "$json")
      reply=$(curl -s --unix-socket "$sock" http://minferd/tokenize -d "{\"content\": $text}" |
              python3 -c "import json,sys; print(','.join(map(str, json.load(sys.stdin)['tokens'])))")
      seed=$((turn * 10 + $([ "$c" = a ] && echo 1 || echo 2)))
      conv[$c]="${conv[$c]}${reply:+,$reply},$(ids "$seed" 48)"
    done
  done
  kill "$pid"
  wait "$pid" || true
done

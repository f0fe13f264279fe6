#!/usr/bin/env bash
# Session 46, run 5: minferd on the GPU serving greedy JSON mode and
# structured output over its socket, with the steps' candidate lists (the
# default) and without (MINFER_NO_CONSTRAINED_CANDIDATES=1): status 200, the
# same content and finish reasons from both daemons, streamed and not, and the
# "engine switches off" line naming the switch in the second's log.
#   bash bench/results/2026-12-05-session46/run5.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run5-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=/tmp/b1 BUILD_DIR=$root/build-gpu BUILD_TARGETS="minfer minferd" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1) ($(el))"
B=$root/build-gpu
[ -x "$B/daemon/minferd/minferd" ] || { grep -E "error|FAILED" /tmp/b1/build.log | head -40 >> "$sum"; cat "$sum"; exit 1; }
f=/tmp/minfer-models/qwen2.5-0.5b-q8_0.gguf; mkdir -p /tmp/minfer-models
[ -f "$f" ] || "$B/daemon/minfer" synth --preset qwen2.5-0.5b --type q8_0 -o "$f" >/dev/null 2>&1
for arm in lists host; do
  dir=/tmp/minferd-$arm; rm -rf "$dir"; mkdir -p "$dir"
  env $([ $arm = host ] && echo MINFER_NO_CONSTRAINED_CANDIDATES=1) "$B/daemon/minferd/minferd" --model "$f" \
    --socket "$dir/sock" --backend cuda --ctx-size 2048 > "$out/run5-minferd-$arm.log" 2>&1 &
  pid=$!
  for i in $(seq 1 300); do [ -S "$dir/sock" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  python3 - "$dir/sock" "$arm" > "$out/run5-$arm.json" <<'PY'
import http.client, json, socket, sys, time
class Conn(http.client.HTTPConnection):
    def __init__(self, path): super().__init__("localhost"); self.path = path
    def connect(self): self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(self.path)
def post(body):
    c = Conn(sys.argv[1]); c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse(); return r.status, r.read().decode()
for _ in range(300):  # the socket answers 503 while the model loads
    c = Conn(sys.argv[1]); c.request("GET", "/health"); r = c.getresponse(); r.read()
    if r.status == 200: break
    time.sleep(0.2)
msgs = [{"role": "user", "content": "Describe a cat as JSON."}]
schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
          "tags": {"type": "array", "items": {"enum": ["a", "bb"]}}}, "required": ["name", "age", "tags"]}
results = []
for fmt in [{"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "cat", "schema": schema}}]:
    for stream in [False, True]:
        t = time.time()
        status, text = post({"messages": msgs, "temperature": 0, "max_tokens": 96, "response_format": fmt, "stream": stream})
        dt = time.time() - t
        if stream:
            content, finish = "", None
            for line in text.splitlines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    ch = json.loads(line[6:])["choices"][0]
                    content += ch.get("delta", {}).get("content") or ""
                    finish = ch.get("finish_reason") or finish
        else:
            ch = json.loads(text)["choices"][0]; content, finish = ch["message"]["content"], ch["finish_reason"]
        results.append({"format": fmt["type"], "stream": stream, "status": status, "finish": finish, "content": content,
                        "seconds": round(dt, 3)})
print(json.dumps(results))
PY
  kill -TERM "$pid"; wait "$pid"
  log "$arm: minferd exit $? ; switches line: $(grep -o 'engine switches off: [^(]*' "$out/run5-minferd-$arm.log" | head -1)"
done
python3 - "$out/run5-lists.json" "$out/run5-host.json" <<'PY' | tee -a "$sum"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for x, y in zip(a, b):
    same = (x["content"], x["finish"]) == (y["content"], y["finish"])
    print(f"| {x['format']} | stream {x['stream']} | {x['status']} / {y['status']} | {x['finish']} | same content: {same} | "
          f"{len(x['content'])} chars | {x['seconds']} s / {y['seconds']} s | {x['content'][:60]!r} |")
PY
log "($(el))"
cat "$sum"

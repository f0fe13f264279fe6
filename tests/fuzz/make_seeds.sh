#!/usr/bin/env bash
# Regenerates tests/fuzz/corpus/ (the checked-in seeds): the generated ones
# from the real files (fuzz_make_seeds, built with -DMINFER_FUZZ=ON) and the
# hand-written HTTP requests below, taken from the README and tests/daemon.
#   tests/fuzz/make_seeds.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: make_seeds.sh BUILD_DIR}
corpus=$here/corpus
rm -rf "$corpus"
"$build/tests/fuzz/fuzz_make_seeds" "$corpus"

http=$corpus/http_request
mkdir -p "$http"
req() {  # req NAME METHOD TARGET [BODY] [EXTRA_HEADER_LINES]
  local name=$1 method=$2 target=$3 body=${4:-} extra=${5:-}
  {
    printf '%s %s HTTP/1.1\r\nHost: minferd\r\n' "$method" "$target"
    [ -n "$extra" ] && printf '%s' "$extra"
    if [ -n "$body" ]; then printf 'Content-Type: application/json\r\nContent-Length: %d\r\n' "${#body}"; fi
    printf '\r\n%s' "$body"
  } > "$http/$name"
}
req health GET /health
req metrics GET /metrics
req models GET /v1/models
req model GET /v1/models/stories260K.gguf
req completion POST /v1/completions '{"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0}'
req completion-full POST /v1/completions '{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.8, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 7, "stop": ["\n", "."], "presence_penalty": 0.5, "frequency_penalty": 0.1, "repeat_penalty": 1.1, "logit_bias": {"13": -100}, "n": 1, "stream": true, "stream_options": {"include_usage": true}, "model": "x"}'
req completion-tokens POST /v1/completions '{"prompt": [1, 403, 407, 261], "max_tokens": 4}'
req completion-array POST /v1/completions '{"prompt": ["Once"], "max_tokens": 4}'
req completion-batch POST /v1/completions '{"prompt": ["Once", "A dog"], "n": 3, "max_tokens": 4, "seed": 5, "logprobs": 1}'
req chat-choices POST /v1/chat/completions '{"messages": [{"role": "user", "content": "Hi"}], "n": 2, "max_tokens": 6, "stream": true}'
req chat POST /v1/chat/completions '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story"}], "stream": true}'
req chat-parts POST /v1/chat/completions '{"messages": [{"role": "developer", "content": [{"type": "text", "text": "Hi"}]}, {"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], "max_completion_tokens": 5}'
req completion-score POST /v1/completions '{"prompt": "Once upon a time", "max_tokens": 0, "echo": true, "logprobs": 2}'
req chat-json POST /v1/chat/completions '{"messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 12, "response_format": {"type": "json_object"}, "logprobs": true, "top_logprobs": 3, "stream": true}'
req chat-schema POST /v1/chat/completions '{"messages": [{"role": "user", "content": "Mood?"}], "response_format": {"type": "json_schema", "json_schema": {"name": "m", "strict": true, "schema": {"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]}, "score": {"type": ["integer", "null"]}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}}, "required": ["mood"], "additionalProperties": false}}}}'
req chat-schema-refs POST /v1/chat/completions '{"messages": [{"role": "user", "content": "Order?"}], "response_format": {"type": "json_schema", "json_schema": {"name": "Order", "strict": true, "schema": {"$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}, "floor": {"type": "integer", "minimum": 0, "exclusiveMaximum": 200}}, "required": ["city", "floor"]}, "Node": {"type": "object", "properties": {"name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["name", "kids"]}}, "type": "object", "properties": {"to": {"$ref": "#/$defs/Address"}, "from": {"allOf": [{"$ref": "#/$defs/Address"}], "description": "sender"}, "tree": {"$ref": "#/$defs/Node"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}, "required": ["to", "tree", "next"], "additionalProperties": false}}}}'
req chat-schema-formats POST /v1/chat/completions '{"messages": [{"role": "user", "content": "Book it"}], "response_format": {"type": "json_schema", "json_schema": {"name": "Booking", "schema": {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"}, "id": {"type": "string", "format": "uuid"}, "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2,4}$", "maxLength": 8}, "note": {"type": "string", "pattern": "(red|green)( light)?", "minLength": 1}}, "required": ["when", "day", "id", "code", "note"]}}}}'
req chat-schema-numbers POST /v1/chat/completions '{"messages": [{"role": "user", "content": "Order?"}], "response_format": {"type": "json_schema", "json_schema": {"name": "Order", "schema": {"type": "object", "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "price": {"type": ["number", "null"], "multipleOf": 0.01, "exclusiveMinimum": 0}, "count": {"type": "integer", "multipleOf": 5, "maximum": 50}, "contact": {"type": "string", "format": "email", "maxLength": 24}, "host": {"type": "string", "format": "ipv6"}, "site": {"type": "string", "format": "uri"}, "name": {"type": "string", "format": "hostname"}, "ip": {"type": "string", "format": "ipv4"}, "wait": {"type": "string", "format": "duration"}}, "required": ["score", "price", "count", "contact"]}}}}'
req chat-schema-unions POST /v1/chat/completions '{"messages": [{"role": "user", "content": "Pet?"}], "response_format": {"type": "json_schema", "json_schema": {"name": "Home", "schema": {"$defs": {"Cat": {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}}, "required": ["kind", "lives"]}, "Dog": {"type": "object", "properties": {"kind": {"enum": ["dog", "pup"]}}, "required": ["kind"]}}, "type": "object", "properties": {"pet": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}], "discriminator": {"propertyName": "kind"}}, "any": {"oneOf": [{"type": "string"}, {"type": "boolean"}]}, "toys": {"type": "object", "additionalProperties": {"type": "number", "maximum": 5}, "maxProperties": 3, "propertyNames": {"pattern": "^[a-z]+$"}}}, "required": ["pet", "toys"]}}}}'
req infill POST /infill '{"input_prefix": "def add(a, b):\n", "prompt": "    return ", "input_suffix": "\n\nprint(add(1, 2))\n", "input_extra": [{"filename": "util.py", "text": "def sub(a, b):\n    return a - b\n"}, {"text": "x = 1\n"}], "n_predict": 8, "temperature": 0, "stream": true, "cache_prompt": true, "samplers": ["top_k", "top_p", "infill"], "t_max_prompt_ms": 500, "t_max_predict_ms": 1000, "n_indent": 4, "response_fields": ["content"], "id_slot": -1}'
req tokenize POST /tokenize '{"content": "Once upon a time", "add_special": true, "parse_special": false, "with_pieces": true}'
req detokenize POST /detokenize '{"tokens": [1, 403, 407]}'
req bad-json POST /v1/completions '{"prompt": "x", "max_tokens": }'
req expect POST /v1/completions '{"prompt": "x"}' $'Expect: 100-continue\r\n'
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"pro\r\n13\r\nmpt": "hi", "n": 1}\r\n0\r\n\r\n' > "$http/chunked"
{ cat "$http/completion"; cat "$http/tokenize"; cat "$http/health"; } > "$http/pipelined"
printf 'GET /health HTTP/1.0\r\n\r\n' > "$http/http10"

# json_schema: each schema of tests/data/schemas and tests/data/pydantic, a
# NUL, then 400 choice bytes (fuzz_json_schema.cpp).
schemas=$corpus/json_schema
mkdir -p "$schemas"
choices=$(seq 0 399 | awk '{ printf "%c", 33 + ($1 * 37) % 94 }')
for file in "$here/../data/schemas/keywords.json" "$here/../data/pydantic/schemas.json"; do
  for ((i = 0; i < $(jq '.models | length' "$file"); i++)); do
    { jq -c ".models[$i].schema" "$file" | tr -d '\n'; printf '\0%s' "$choices"; } > "$schemas/$(jq -r ".models[$i].name" "$file")"
  done
done
echo "make_seeds.sh: $(find "$corpus" -type f | wc -l) seeds, $(du -sh "$corpus" | cut -f1)"

#!/usr/bin/env bash
# `serve --device cuda` on the CUDA emulator (pagedinfer_emu): the server starts on the CUDA
# backend, names the device, and answers a greedy /v1/completions with the text the CPU's
# `run` writes for the same prompt. HTTP through bash's /dev/tcp (no client to install).
# Usage: serve_smoke.sh PAGEDINFER PAGEDINFER_EMU MODEL
set -euo pipefail
# The KV pool takes the whole budget of the emulated device, as on a GPU: 1 GiB keeps it small.
export PINFER_CUDA_EMU_MIB=${PINFER_CUDA_EMU_MIB:-1024}
cpu_bin=$1 emu_bin=$2 model=$3
tmp=$(mktemp -d)
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

want=$("$cpu_bin" run -m "$model" -p "Once upon a time" -n 24 --temp 0 --device cpu 2>/dev/null)
"$emu_bin" serve -m "$model" --device cuda --port 0 --max-model-len 128 --max-num-seqs 2 \
  --max-num-batched-tokens 64 2>"$tmp/log" &
pid=$!
port=""
for _ in $(seq 1 600); do  # the emulator starts slowly: up to 60 s
  port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$tmp/log" | head -1)
  [[ -n "$port" ]] && break
  kill -0 "$pid" 2>/dev/null || { echo "FAIL: serve --device cuda exited: $(cat "$tmp/log")"; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { echo "FAIL: serve --device cuda did not start: $(cat "$tmp/log")"; exit 1; }
grep -q "^device: cuda:0 (pagedinfer CUDA emulator" "$tmp/log" ||
  { echo "FAIL: no cuda device line: $(cat "$tmp/log")"; exit 1; }

body='{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0}'
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
  "${#body}" "$body" >&3
response=$(timeout 300 cat <&3)
exec 3<&-
json=${response#*$'\r\n\r\n'}
# The completion's text: the JSON string after "text":, unescaped for the few escapes it can hold.
text=$(printf '%s' "$json" | sed -n 's/.*"text":"\(\([^"\\]\|\\.\)*\)".*/\1/p')
text=$(printf '%b' "${text//\\\"/\"}")
# `run` prints the continuation after the prompt; the API's text is the same continuation.
if [[ "$text" != "$want" ]]; then
  echo "FAIL: serve --device cuda answered '$text', the CPU's run '$want'"
  echo "$response"
  exit 1
fi
echo "ok: serve --device cuda answers the CPU's greedy completion: '$text'"

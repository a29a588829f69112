#!/usr/bin/env bash
# CTest driver: starts `pagedinfer serve` on a free loopback port with stories260K, waits for
# it, runs openai_test.mjs (the official openai npm client), stops the server.
# Exit 77 (skipped) when node, the npm packages (npm ci here) or the model are missing.
#   run_openai_test.sh PAGEDINFER_BIN MODELS_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:?usage: run_openai_test.sh PAGEDINFER_BIN MODELS_DIR}"
model="${PAGEDINFER_MODELS:-${2:-}}/stories260K.gguf"
skip() { echo "SKIP: $*"; exit 77; }
command -v node >/dev/null || skip "node is not installed (scripts/setup.sh installs nodejs npm)"
[ -d "$here/node_modules/openai" ] || skip "no $here/node_modules: run 'npm ci' in tests/server"
[ -f "$model" ] || skip "model $model not found (set PAGEDINFER_MODELS)"
[ -x "$bin" ] || { echo "FAIL: $bin is not built"; exit 1; }

log="$(mktemp)"
key="test-key-$$"
"$bin" serve -m "$model" --host 127.0.0.1 --port 0 --api-key "$key" --max-model-len 2048 \
  --threads 2 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 200); do  # up to 20 s for the model to load and the port to open
  port="$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$log" | head -1)"
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "FAIL: the server did not start:"; cat "$log"; exit 1
fi
PINFER_BASE_URL="http://127.0.0.1:$port/v1" PINFER_API_KEY="$key" \
  timeout 120 node "$here/openai_test.mjs"
rc=$?
kill -0 "$pid" 2>/dev/null || { echo "FAIL: the server died:"; cat "$log"; exit 1; }
[ $rc -ne 0 ] && { echo "--- server log"; cat "$log"; }
exit $rc

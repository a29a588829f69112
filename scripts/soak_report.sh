#!/usr/bin/env bash
# The soak run: `pagedinfer serve` on stories260K under mixed load from scripts/soak_client.py
# (completions and chat, streamed and not, clients hanging up mid-stream or before their
# answer, malformed requests, and slow clients dripping header lines the whole time; every
# request greedy and compared with the same request run alone), then SIGTERM. Passes when there
# were 0 crashes, 0 wrong answers, 0 errors, /metrics stayed consistent, every KV block was
# back at the end, resident memory stayed flat (runs of MINUTES only), and the server exited 0
# from its graceful shutdown.
#
#   scripts/soak_report.sh                 the report run: 30 minutes; the figures go into
#                                          README.md by hand ("Soak run")
#   REQUESTS=300 scripts/soak_report.sh    a run bounded by requests, not time (CTest's
#                                          server_soak_check: asserts behaviour only)
# env: BIN (build/pagedinfer), MINUTES (30), REQUESTS (0: use MINUTES), CLIENTS (8),
#      SLOW_CLIENTS (64), DRIP (seconds between a slow client's lines, 2), MODEL
#      (stories260K.gguf from $PAGEDINFER_MODELS, else $MODELS_DIR, else ../shared/models),
#      SERVE_ARGS (extra flags)
# Exit 77 (skipped) when the model is missing.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/pagedinfer}
MINUTES=${MINUTES:-30}
REQUESTS=${REQUESTS:-0}
CLIENTS=${CLIENTS:-8}
SLOW_CLIENTS=${SLOW_CLIENTS:-64}
DRIP=${DRIP:-2}
MODEL=${MODEL:-${PAGEDINFER_MODELS:-${MODELS_DIR:-../shared/models}}/stories260K.gguf}
[[ -x "$BIN" ]] || { echo "soak: $BIN is not built (ninja -C build pagedinfer)" >&2; exit 1; }
[[ -f "$MODEL" ]] || { echo "SKIP: no model at $MODEL (set MODEL or PAGEDINFER_MODELS)"; exit 77; }
log=$(mktemp)
server=""
trap '[[ -n "$server" ]] && kill -9 "$server" 2>/dev/null; rm -f "$log"' EXIT

echo "soak: $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$BIN" serve -m "$MODEL" --host 127.0.0.1 --port 0 ${SERVE_ARGS:-} 2>"$log" &
server=$!
port=""
for _ in $(seq 300); do  # up to 30 s for the model to load and the port to open
  port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$log" | head -1)
  [[ -n "$port" ]] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$log"; echo "soak: the server did not start" >&2; exit 1; }
if ((REQUESTS > 0)); then
  bound=(--requests "$REQUESTS")
  echo "soak: $BIN serve -m $MODEL ${SERVE_ARGS:-}; $REQUESTS requests"
else
  bound=(--minutes "$MINUTES")
  echo "soak: $BIN serve -m $MODEL ${SERVE_ARGS:-}; $MINUTES min"
fi

rc=0
python3 scripts/soak_client.py --port "$port" --pid "$server" "${bound[@]}" \
  --clients "$CLIENTS" --slow-clients "$SLOW_CLIENTS" --drip "$DRIP" || rc=1

if kill -0 "$server" 2>/dev/null; then
  kill -TERM "$server"
  status=0
  wait "$server" || status=$?
  server=""
  echo "soak: SIGTERM: the server exited with status $status"
  [[ $status -eq 0 ]] || rc=1
else
  echo "soak: the server was gone before the end (a crash); its last log lines:"
  tail -n 30 "$log"
  rc=1
fi
if grep -qE 'AddressSanitizer|runtime error|ThreadSanitizer|terminate called' "$log"; then
  echo "soak: the server's log reports an error:"
  grep -E -m 5 'AddressSanitizer|runtime error|ThreadSanitizer|terminate called' "$log"
  rc=1
fi
echo "soak: $([[ $rc -eq 0 ]] && echo PASS || echo FAIL)"
exit $rc

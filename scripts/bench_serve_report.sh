#!/usr/bin/env bash
# Serving benchmark against llama-server: starts `pagedinfer serve` and (with LLAMA_SERVER set)
# llama-server on the same GGUF file with the same KV memory, runs one seeded workload
# (`pagedinfer bench-serve`: streamed completions, Poisson arrivals) against each server at
# each request rate, and writes $OUT_DIR/bench-serve-$NAME.md (machine, date, load, versions,
# commands, the table and the ratios), .svg (output tokens/s and p99 TTFT against the rate)
# and .json (every run's bench-serve result), and the summary between the
# `<!-- bench-serve-$NAME:begin -->` / `end` markers of $README.
#
# Same KV memory: llama-server gets `-c CTX` (f16 K and V, CTX cells in all); pagedinfer gets
# --kv-cache-memory of the same bytes (CTX x its f16 bytes per token) and --max-model-len
# CTX/NP, the longest sequence one of llama-server's NP slots holds. llama-server runs twice:
# `-np NP` (each slot owns CTX/NP cells) and `-np SEQS --kv-unified` (one pool shared by as
# many slots as pagedinfer may run sequences: --max-num-seqs SEQS). Both get THREADS threads.
# The script never builds llama-server: LLAMA_SERVER is the path of one already built.
#
# usage: LLAMA_SERVER=path/to/llama-server scripts/bench_serve_report.sh
#        (after `ninja -C build pagedinfer`; without LLAMA_SERVER only pagedinfer runs)
# env:   MODEL (stories260K.gguf from $PAGEDINFER_MODELS or ../shared/models), NAME (the
#        file's stem), BUILD_DIR (build), THREADS (nproc), CTX (65536), NP (16), SEQS (4 x NP),
#        RATES ("8 32 inf": requests/s, inf = all at once), NUM_PROMPTS (200), INPUT_LEN (128),
#        OUTPUT_LEN (128), RANGE_RATIO (0.5), SEED (1), OUT_DIR (docs), README (README.md;
#        empty: leave it alone), SERVERS ("pagedinfer llama llama-unified": which to run)
# A few minutes on stories260K; a 7B file needs a small workload (see README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/pagedinfer"
models=${PAGEDINFER_MODELS:-../shared/models}
MODEL=${MODEL:-$models/stories260K.gguf}
NAME=${NAME:-$(basename "$MODEL" .gguf)}
LLAMA_SERVER=${LLAMA_SERVER:-}
THREADS=${THREADS:-$(nproc)}
CTX=${CTX:-65536}
NP=${NP:-16}
SEQS=${SEQS:-$((4 * NP))}
RATES=${RATES:-8 32 inf}
NUM_PROMPTS=${NUM_PROMPTS:-200}
INPUT_LEN=${INPUT_LEN:-128}
OUTPUT_LEN=${OUTPUT_LEN:-128}
RANGE_RATIO=${RANGE_RATIO:-0.5}
SEED=${SEED:-1}
OUT_DIR=${OUT_DIR:-docs}
README=${README-README.md}
SERVERS=${SERVERS:-pagedinfer llama llama-unified}

die() { echo "error: $*" >&2; exit 1; }
[[ -x "$BIN" ]] || die "$BIN is not built (ninja -C $BUILD_DIR pagedinfer)"
[[ -f "$MODEL" ]] || die "MODEL=$MODEL does not exist"
command -v jq >/dev/null || die "jq is missing (apt-get install jq)"
[[ -z "$LLAMA_SERVER" || -x "$LLAMA_SERVER" ]] ||
  die "LLAMA_SERVER=$LLAMA_SERVER is not an executable llama-server"
((CTX % NP == 0)) || die "CTX=$CTX is not a multiple of NP=$NP"
begin="<!-- bench-serve-$NAME:begin -->"
end="<!-- bench-serve-$NAME:end -->"
if [[ -n "$README" ]]; then
  grep -qxF "$begin" "$README" && grep -qxF "$end" "$README" ||
    die "$README lacks the lines $begin and $end (or run with README=)"
fi
mkdir -p "$OUT_DIR"
tmp=$(mktemp -d)
server_pid=""
stop_server() {
  [[ -n "$server_pid" ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
trap 'stop_server; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM  # through the EXIT trap: the server goes down with the script

kv_per_token=$("$BIN" plan -m "$MODEL" --memory 64GiB --kv-dtype f16 --json | jq .kv_bytes_per_token)
kv_bytes=$((CTX * kv_per_token))
max_len=$((CTX / NP))
model_file=$(basename "$MODEL")
workload=(--num-prompts "$NUM_PROMPTS" --random-input-len "$INPUT_LEN"
          --random-output-len "$OUTPUT_LEN" --random-range-ratio "$RANGE_RATIO" --seed "$SEED"
          --prompt-kind ids)

# A TCP port nothing on 127.0.0.1 listens on now.
free_port() {
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
  done
  die "no free TCP port found"
}

# start_server KIND LOG: starts it in the background; sets server_pid, port and server_cmd.
start_server() {
  local kind=$1 log=$2
  case "$kind" in
    pagedinfer)
      server_cmd=(serve -m "$MODEL" --host 127.0.0.1 --port 0 -t "$THREADS" --kv-dtype f16
                  --kv-cache-memory "$kv_bytes" --max-model-len "$max_len" --max-num-seqs "$SEQS"
                  --max-waiting "$NUM_PROMPTS" --model-id "$NAME")
      "$BIN" "${server_cmd[@]}" 2>"$log" &
      server_pid=$!
      port=""
      for _ in $(seq 600); do  # up to 60 s to load and listen
        port=$(sed -n 's|.*on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$log" | head -1)
        [[ -n "$port" ]] && break
        kill -0 "$server_pid" 2>/dev/null || die "pagedinfer serve exited: $(tail -5 "$log")"
        sleep 0.1
      done
      [[ -n "$port" ]] || die "pagedinfer serve printed no port: $(tail -5 "$log")"
      server_cmd=(pagedinfer "${server_cmd[@]/#$MODEL/$model_file}")
      ;;
    llama | llama-unified)
      port=$(free_port)
      local slots=(-np "$NP" --no-kv-unified)
      [[ "$kind" == llama-unified ]] && slots=(-np "$SEQS" --kv-unified)
      server_cmd=(-m "$MODEL" --host 127.0.0.1 --port "$port" -t "$THREADS" -tb "$THREADS"
                  -c "$CTX" "${slots[@]}" -ctk f16 -ctv f16 --cache-ram 0 -a "$NAME")
      "$LLAMA_SERVER" "${server_cmd[@]}" >"$log" 2>&1 &
      server_pid=$!
      server_cmd=(llama-server "${server_cmd[@]/#$MODEL/$model_file}")
      ;;
  esac
}

label_of() {
  case "$1" in
    pagedinfer) echo "pagedinfer" ;;
    llama) echo "llama-server -np $NP" ;;
    llama-unified) echo "llama-server -np $SEQS -kvu" ;;
  esac
}

commands="$tmp/commands.md"
: >"$commands"
results=()
for kind in $SERVERS; do
  [[ "$kind" == pagedinfer || -n "$LLAMA_SERVER" ]] || continue
  label=$(label_of "$kind")
  log="$tmp/$kind.log"
  start_server "$kind" "$log"
  url="http://127.0.0.1:$port/v1"
  echo "$label on $url" >&2
  # The ready check waits for the model to load; a few requests then warm the server up.
  "$BIN" bench-serve --url "$url" --ready-check-timeout-sec 600 --num-prompts 4 \
    --random-input-len 16 --random-output-len 4 --seed 999 --no-progress >/dev/null
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  for rate in $RATES; do
    out="$tmp/$kind-$rate.json"
    "$BIN" bench-serve --url "$url" --label "$label" --request-rate "$rate" "${workload[@]}" \
      --result-file "$out" >"$tmp/$kind-$rate.txt"
    results+=("$out")
  done
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  {
    printf -- '- %s (load average %s before its runs, %s after):\n\n' "$label" "$load_before" \
      "$load_after"
    printf '  ```\n  $ %s\n' "${server_cmd[*]}"
    { grep -m1 -E 'KV pool:|KV buffer size' "$log" || true; } | sed 's/^ */  /'
    printf '  ```\n\n'
  } >>"$commands"
  stop_server
done
((${#results[@]})) || die "no server ran"

pi_version=$("$BIN" --version | head -1)
pi_commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] || pi_commit+=" (modified)"
llama_version=""
[[ -n "$LLAMA_SERVER" ]] &&
  llama_version=$("$LLAMA_SERVER" --version 2>&1 | grep -m1 -i 'version' || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
machine="$(nproc) CPUs ($cpu), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM"
today=$(date -u '+%Y-%m-%d %H:%M UTC')
svg="bench-serve-$NAME.svg"
"$BIN" bench-serve --summarize "${results[@]}" --plot "$OUT_DIR/$svg" \
  --title "bench-serve on $model_file: $NUM_PROMPTS requests, KV $((kv_bytes / 1048576)) MiB" \
  >"$tmp/table.md"
jq -s . "${results[@]}" >"$OUT_DIR/bench-serve-$NAME.json"

# The workload and setting, shared by the docs page and the README summary.
rates_text=$(sed -E 's/ +/, /g; s/, ([^,]*)$/ and \1/' <<<"$RATES")
{
  echo "Measured $today on $machine by \`scripts/bench_serve_report.sh\`."
  echo "Versions: $pi_version, commit $pi_commit${llama_version:+; llama-server $llama_version}."
  echo "Model $model_file; KV memory $((kv_bytes / 1048576)) MiB of f16 for each server ($CTX"
  echo "tokens: llama-server \`-c $CTX\`, pagedinfer \`--kv-cache-memory $kv_bytes\`), longest"
  echo "sequence $max_len tokens, $THREADS threads. Workload: $NUM_PROMPTS streamed completions"
  echo "(\`pagedinfer bench-serve --prompt-kind ids --seed $SEED\`), prompt and output lengths"
  echo "uniform within ±$RANGE_RATIO of $INPUT_LEN and $OUTPUT_LEN tokens, ignore_eos, Poisson"
  echo "arrivals at $rates_text requests/s (inf: all at once)."
} >"$tmp/setting.md"
{
  echo "# Serving benchmark: $model_file"
  echo
  echo "Generated by \`scripts/bench_serve_report.sh\`; do not edit by hand."
  echo
  cat "$tmp/setting.md"
  echo
  echo "Servers, in the order they ran (each loaded once, then every rate):"
  echo
  cat "$commands"
  cat "$tmp/table.md"
  echo
  echo "![output tokens/s and p99 TTFT against the request rate]($svg)"
  echo
  echo "Every run's full result (vLLM's keys) is in [bench-serve-$NAME.json](bench-serve-$NAME.json)."
} >"$OUT_DIR/bench-serve-$NAME.md"
echo "wrote $OUT_DIR/bench-serve-$NAME.{md,svg,json}" >&2

if [[ -n "$README" ]]; then
  {
    echo "<!-- Generated by scripts/bench_serve_report.sh; edit the script, not this section. -->"
    cat "$tmp/setting.md"
    echo "Full page: [$OUT_DIR/bench-serve-$NAME.md]($OUT_DIR/bench-serve-$NAME.md)."
    echo
    cat "$tmp/table.md"
    echo
    echo "![bench-serve on $model_file]($OUT_DIR/$svg)"
  } >"$tmp/readme.md"
  awk -v summary="$tmp/readme.md" -v begin="$begin" -v end="$end" '
    $0 == begin { print; while ((getline line < summary) > 0) print line; skipping = 1; next }
    $0 == end { skipping = 0 }
    !skipping
  ' "$README" >"$tmp/README.md"
  cp "$tmp/README.md" "$README"
  echo "updated the $NAME section of $README" >&2
fi

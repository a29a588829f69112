#!/usr/bin/env bash
# scripts/bench_serve_report.sh end to end on stories260K, pagedinfer only (no llama-server
# here): a small workload at three rates into a temporary folder, README untouched. Checks
# the report's shape (the table has a row per rate, the SVG two panels, the JSON every run)
# and that every request completed; never timings. Exit 77 (skipped) without the model.
# usage: bench_serve_report_test.sh BUILD_DIR MODELS_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
models=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
model="$models/stories260K.gguf"
[[ -f "$model" ]] || { echo "skipped: $model not found"; exit 77; }
command -v jq >/dev/null || { echo "skipped: jq is missing (scripts/setup.sh installs it)"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cp "$src/README.md" "$out/README.before"
BUILD_DIR="$build" MODEL="$model" NAME=stories260K OUT_DIR="$out" README="" LLAMA_SERVER="" \
  THREADS=2 CTX=8192 NP=16 RATES="16 64 inf" NUM_PROMPTS=12 INPUT_LEN=32 OUTPUT_LEN=16 \
  "$src/scripts/bench_serve_report.sh" 2>"$out/stderr" || fail "the script failed: $(tail -20 "$out/stderr")"
cmp -s "$src/README.md" "$out/README.before" || fail "README.md changed although README= was given"

md="$out/bench-serve-stories260K.md"
for f in "$md" "$out/bench-serve-stories260K.svg" "$out/bench-serve-stories260K.json"; do
  [[ -s "$f" ]] || fail "$f was not written"
done
# One table row per rate: | pagedinfer | RATE | completed | failed | ...
for rate in 16 64 inf; do
  row=$(grep -E "^\| pagedinfer \| $rate \|" "$md") || fail "no table row for rate $rate in $md"
  completed=$(cut -d'|' -f4 <<<"$row" | tr -d ' ')
  failed=$(cut -d'|' -f5 <<<"$row" | tr -d ' ')
  [[ "$completed" == 12 && "$failed" == 0 ]] || fail "rate $rate: completed $completed, failed $failed"
done
grep -q 'KV pool: 8192 tokens' "$md" || fail "the pool line (8192 tokens) is missing from $md"
grep -q -- '--max-model-len 512' "$md" || fail "the command line (max-model-len CTX/NP) is missing"
grep -q 'load average' "$md" || fail "the load average is missing"
[[ $(jq length "$out/bench-serve-stories260K.json") == 3 ]] || fail "the JSON does not hold 3 runs"
[[ $(jq '[.[] | .completed] | add' "$out/bench-serve-stories260K.json") == 36 ]] ||
  fail "the JSON results do not sum to 36 completed requests"
[[ $(jq '[.[] | .total_output_tokens] | min' "$out/bench-serve-stories260K.json") -gt 0 ]] ||
  fail "a run produced no output tokens"
[[ $(grep -c '<polyline' "$out/bench-serve-stories260K.svg") == 2 ]] ||
  fail "the SVG does not have one line in each of its two panels"
echo "ok: $(grep -c '^| pagedinfer |' "$md") rows, every request completed"

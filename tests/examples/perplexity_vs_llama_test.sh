#!/usr/bin/env bash
# scripts/perplexity_vs_llama.sh on stories260K against a stand-in llama-perplexity that prints
# llama.cpp's "Final estimate" line with PPL 6.8 for every file: a row per file (F32 and the
# three quantized copies), the difference computed from the two figures, the tolerance column,
# and CHECK=1 failing when a file is outside it. Exit 77 (skipped) without the model.
# usage: perplexity_vs_llama_test.sh BUILD_DIR MODELS_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
models=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
model="$models/stories260K.gguf"
[[ -f "$model" ]] || { echo "skipped: $model not found"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
printf '#!/bin/sh\necho "llama_perplexity: tokenizing the input .."\necho "Final estimate: PPL = 6.8000 +/- 0.12345"\n' \
  >"$out/llama-perplexity"
chmod +x "$out/llama-perplexity"

run() {
  MODEL="$model" LLAMA_PERPLEXITY="$out/llama-perplexity" OUT="$out/report.md" THREADS=2 "$@" \
    "$src/scripts/perplexity_vs_llama.sh" "$build" >"$out/stdout" 2>"$out/stderr"
}
run env TOL=50 CHECK=1 || fail "the script failed with TOL=50: $(tail -5 "$out/stderr")"
for f in stories260K stories260K-Q8_0 stories260K-Q4_0 stories260K-Q4_K_M; do
  row=$(grep -F "| $f.gguf |" "$out/report.md") || fail "no row for $f"
  ours=$(cut -d'|' -f3 <<<"$row" | xargs)
  [[ $(cut -d'|' -f4 <<<"$row" | xargs) == 6.8000 ]] || fail "$f: llama.cpp column: $row"
  want=$(awk -v a="$ours" 'BEGIN { printf "%+.3f%%", (a - 6.8) / 6.8 * 100 }')
  [[ $(cut -d'|' -f5 <<<"$row" | xargs) == "$want" ]] || fail "$f: difference, want $want: $row"
  [[ $(cut -d'|' -f6 <<<"$row" | xargs) == yes ]] || fail "$f: not within 50%: $row"
done
# Q4_0's perplexity is several percent above F32's: outside 0.01% of 6.8 at least there.
if run env TOL=0.01 CHECK=1; then fail "CHECK=1 passed with TOL=0.01"; fi
grep -q '| no |' "$out/report.md" || fail "no row outside TOL=0.01"
grep -q 'outside 0.01% of llama-perplexity' "$out/stderr" || fail "the failure does not say why"
echo "ok: 4 rows"

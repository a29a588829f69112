#!/usr/bin/env bash
# The seed corpus in the repository is what fuzz_write_corpus writes today (so a change to a
# writer or to a seed is committed with its regenerated corpus):
#   check_corpus.sh WRITER CORPUS_DIR
set -euo pipefail
writer=$1 corpus=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$writer" "$tmp"
if ! diff -r "$tmp" "$corpus"; then
  echo "tests/fuzz/corpus differs from what fuzz_write_corpus writes; regenerate it with" >&2
  echo "  build/tests/fuzz/fuzz_write_corpus tests/fuzz/corpus" >&2
  exit 1
fi
echo "tests/fuzz/corpus: $(find "$corpus" -type f | wc -l) seeds, as fuzz_write_corpus writes them"

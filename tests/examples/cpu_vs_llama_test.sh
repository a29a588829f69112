#!/usr/bin/env bash
# scripts/cpu_vs_llama.sh end to end on stories260K with tiny tests (-p 16 -n 4, tg4 at depth
# 32), against a stand-in llama-bench that prints llama-bench's JSON records with fixed speeds
# (pp 100 t/s, tg 50 t/s), into a temporary folder and a copy of the README. Checks the
# parsing: a table row per test with both figures, the ratio computed from them, decode's
# GB/s and share of the read bandwidth, the load average, the README section replaced between
# its markers and nothing outside them, and (IK_LLAMA_BENCH, a second stand-in) the
# ik_llama.cpp columns; never timings. Exit 77 (skipped) without the model.
# usage: cpu_vs_llama_test.sh BUILD_DIR MODELS_DIR
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

# The stand-in: llama-bench's -o json shape (the fields the script reads), one record per test.
cat >"$out/llama-bench" <<'SH'
#!/usr/bin/env bash
p=512 n=128 d=0
while [[ $# -gt 0 ]]; do
  case $1 in -p) p=$2; shift ;; -n) n=$2; shift ;; -d) d=$2; shift ;; esac
  shift
done
recs=()
((p == 0)) || recs+=("{\"build_commit\": \"stand-in\", \"n_prompt\": $p, \"n_gen\": 0, \"n_depth\": $d, \"avg_ts\": 100.0, \"stddev_ts\": 1.5}")
((n == 0)) || recs+=("{\"build_commit\": \"stand-in\", \"n_prompt\": 0, \"n_gen\": $n, \"n_depth\": $d, \"avg_ts\": 50.0, \"stddev_ts\": 0.5}")
(IFS=,; echo "[${recs[*]}]")
SH
chmod +x "$out/llama-bench"
printf 'before\n<!-- cpu-vs-llama:begin -->\nold\n<!-- cpu-vs-llama:end -->\nafter\n' >"$out/README.md"
cp "$src/README.md" "$out/README.before"

BUILD_DIR="$build" FILES="$model" LLAMA_BENCH="$out/llama-bench" OUT_DIR="$out/docs" \
  README="$out/README.md" THREADS=2 PP=16 TG=4 DEPTH=32 TG_DEPTH=4 REPS=2 \
  "$src/scripts/cpu_vs_llama.sh" >"$out/stdout" 2>"$out/stderr" ||
  fail "the script failed: $(tail -20 "$out/stderr")"
cmp -s "$src/README.md" "$out/README.before" || fail "the repository's README.md changed"

md="$out/docs/cpu-vs-llama.md"
json="$out/docs/cpu-vs-llama.json"
[[ -s "$md" && -s "$json" ]] || fail "$md or $json was not written"
[[ $(jq length "$json") == 2 ]] || fail "the JSON does not hold the two test sets"
# A row per test: | file | test | ours | theirs | ratio | GB/s (%) | load |
for t in 'pp16' 'tg4' 'tg4 @ d32'; do
  row=$(grep -F "| stories260K.gguf | $t |" "$md") || fail "no table row for $t in $md"
  theirs=$(cut -d'|' -f5 <<<"$row" | xargs)
  ratio=$(cut -d'|' -f6 <<<"$row" | xargs)
  ours=$(jq -r --arg t "$t" '[.[].pagedinfer[] | select(.test == $t)][0].avg_ts' "$json")
  want_theirs=$([[ $t == pp* ]] && echo '100.00 ± 1.50' || echo '50.00 ± 0.50')
  [[ "$theirs" == "$want_theirs" ]] || fail "$t: llama.cpp column '$theirs', want '$want_theirs'"
  want_ratio=$(jq -rn --argjson o "$ours" --arg t "$t" \
    '$o / (if ($t | startswith("pp")) then 100 else 50 end) | "\(. * 100 | round / 100)"')
  want_ratio=$(printf '%.2fx' "$want_ratio")
  [[ "$ratio" == "$want_ratio" ]] || fail "$t: ratio '$ratio', want '$want_ratio' (ours $ours)"
  gbps=$(cut -d'|' -f7 <<<"$row" | xargs)
  if [[ $t == tg* ]]; then
    [[ "$gbps" =~ ^[0-9.]+\ /\ [0-9.]+\ \([0-9]+%\)$ ]] || fail "$t: decode GB/s column '$gbps'"
  else
    [[ -z "$gbps" ]] || fail "$t: a prefill row has a GB/s figure '$gbps'"
  fi
  [[ $(cut -d'|' -f8 <<<"$row" | xargs) =~ ^[0-9-]+\ [0-9:]+\ [0-9.]+\ [0-9.]+\ [0-9.]+$ ]] ||
    fail "$t: no date and load average in the row"
done
grep -qF '`pagedinfer bench -m stories260K.gguf -p 0 -n 4 -d 32 -r 2 -t 2 -o json`' "$md" ||
  fail "the depth command is not in $md as run"
grep -qF '`llama-bench -m stories260K.gguf -p 16 -n 4 -r 2 -t 2 -o json`' "$md" ||
  fail "llama-bench's command is not in $md as run"
[[ $(head -2 "$out/README.md") == $'before\n<!-- cpu-vs-llama:begin -->' ]] ||
  fail "the README lines before the section changed"
[[ $(tail -2 "$out/README.md") == $'<!-- cpu-vs-llama:end -->\nafter' ]] ||
  fail "the README lines after the section changed"
! grep -qx old "$out/README.md" || fail "the old README section was not replaced"
grep -qF '| stories260K.gguf | tg4 @ d32 |' "$out/README.md" || fail "the README lacks the table"
grep -qF 'summing 512 MiB' "$out/README.md" || fail "the README does not say how read bandwidth was measured"
# APPEND=1 keeps the other files' rows: a second run on a copy under another name adds rows.
cp "$model" "$out/copy.gguf"
BUILD_DIR="$build" FILES="$out/copy.gguf" LLAMA_BENCH="$out/llama-bench" OUT_DIR="$out/docs" \
  README="$out/README.md" THREADS=2 PP=16 TG=4 DEPTH=0 REPS=1 APPEND=1 \
  "$src/scripts/cpu_vs_llama.sh" >"$out/stdout" 2>"$out/stderr" ||
  fail "the APPEND=1 run failed: $(tail -20 "$out/stderr")"
[[ $(jq length "$json") == 3 ]] || fail "APPEND=1: the JSON does not hold 3 test sets"
grep -qF '| stories260K.gguf | tg4 @ d32 |' "$out/README.md" || fail "APPEND=1 lost the first rows"
grep -qF '| copy.gguf | tg4 |' "$out/README.md" || fail "APPEND=1 did not add the new rows"
# IK_LLAMA_BENCH adds ik_llama.cpp's column and ratio: a stand-in with its -gp depth test
# (pp 200 t/s, tg 25 t/s) that fails on -d, which its llama-bench lacks.
cat >"$out/ik-llama-bench" <<'SH'
#!/usr/bin/env bash
p=512 n=128 gp=
while [[ $# -gt 0 ]]; do
  case $1 in -p) p=$2; shift ;; -n) n=$2; shift ;; -gp) gp=$2; shift ;; -d) exit 1 ;; esac
  shift
done
recs=()
((p == 0)) || recs+=("{\"build_commit\": \"ik-stand-in\", \"n_prompt\": $p, \"n_gen\": 0, \"avg_ts\": 200.0, \"stddev_ts\": 2.0}")
((n == 0)) || recs+=("{\"build_commit\": \"ik-stand-in\", \"n_prompt\": 0, \"n_gen\": $n, \"avg_ts\": 25.0, \"stddev_ts\": 0.25}")
[[ -z "$gp" ]] || recs+=("{\"build_commit\": \"ik-stand-in\", \"n_prompt\": ${gp%,*}, \"n_gen\": ${gp#*,}, \"avg_ts\": 20.0, \"stddev_ts\": 0.2}")
(IFS=,; echo "[${recs[*]}]")
SH
chmod +x "$out/ik-llama-bench"
BUILD_DIR="$build" FILES="$model" LLAMA_BENCH="$out/llama-bench" IK_LLAMA_BENCH="$out/ik-llama-bench" \
  OUT_DIR="$out/ik" README="" THREADS=2 PP=16 TG=4 DEPTH=32 TG_DEPTH=4 REPS=1 \
  "$src/scripts/cpu_vs_llama.sh" >"$out/stdout" 2>"$out/stderr" ||
  fail "the IK_LLAMA_BENCH run failed: $(tail -20 "$out/stderr")"
ikmd="$out/ik/cpu-vs-llama.md"
grep -qF '| file | test | pagedinfer t/s | llama.cpp t/s | ratio | ik_llama.cpp t/s | ratio | decode' "$ikmd" ||
  fail "no ik_llama.cpp columns in $ikmd"
grep -qF '`llama-bench -m stories260K.gguf -p 0 -n 0 -gp 32,4 -r 1 -t 2 -rtr 1 -o json`' "$ikmd" ||
  fail "ik_llama.cpp's depth command is not in $ikmd as run"
grep -qF 'ik_llama.cpp: ik-stand-in' "$ikmd" || fail "$ikmd does not name the ik_llama.cpp build"
for t in 'pp16' 'tg4' 'tg4 @ d32'; do
  row=$(grep -F "| stories260K.gguf | $t |" "$ikmd") || fail "ik: no table row for $t"
  ik=$(cut -d'|' -f7 <<<"$row" | xargs)
  ikratio=$(cut -d'|' -f8 <<<"$row" | xargs)
  ours=$(jq -r --arg t "$t" '[.[].pagedinfer[] | select(.test == $t)][0].avg_ts' "$out/ik/cpu-vs-llama.json")
  case $t in pp*) want='200.00 ± 2.00' div=200 ;; 'tg4') want='25.00 ± 0.25' div=25 ;; *) want='20.00 ± 0.20' div=20 ;; esac
  [[ "$ik" == "$want" ]] || fail "$t: ik_llama.cpp column '$ik', want '$want'"
  want_ratio=$(printf '%.2fx' "$(jq -rn --argjson o "$ours" --argjson d "$div" '$o / $d * 100 | round / 100')")
  [[ "$ikratio" == "$want_ratio" ]] || fail "$t: ik_llama.cpp ratio '$ikratio', want '$want_ratio'"
  [[ $(cut -d'|' -f5 <<<"$row" | xargs) == $([[ $t == pp* ]] && echo '100.00 ± 1.50' || echo '50.00 ± 0.50') ]] ||
    fail "$t: the llama.cpp column moved when ik_llama.cpp's was added"
done
echo "ok: $(grep -c '^| stories260K.gguf |' "$md") rows, then $(grep -c '^| copy.gguf |' "$out/README.md") appended; ik_llama.cpp columns"

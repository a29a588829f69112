#!/usr/bin/env bash
# The sanitizer and fuzzing stages of scripts/test.sh (what CI runs; a developer may run one
# stage alone). Needs clang 14 and its runtimes (scripts/setup.sh installs them). Runs every
# stage asked for, then exits non-zero if any finding, failed test or crash came up.
#
#   asan  one clang build (ASAN_BUILD_DIR, default build-asan) with AddressSanitizer and
#         UndefinedBehaviorSanitizer, in which the libraries the fuzz targets reach also carry
#         libFuzzer's coverage. Only what the stage runs is built: the fuzz targets and the
#         tests of the server, the HTTP layer, the chat-template interpreter and the parsers
#         of untrusted files (ASAN_TESTS below), and those tests run (with each fuzz target's
#         replay of its seeds and regressions).
#   fuzz  each libFuzzer target of tests/fuzz for FUZZ_SECONDS (20) from its seed corpus (not
#         its regressions: the asan stage replays those under the same sanitizers, and one,
#         chat_template_fuzz's nested_loops_10_to_the_12, alone takes 29 CPU-s at -O0 under
#         ASan), as many at once as there are cores, in the asan build; prints each
#         one's executions. A crash, a leak, a sanitizer report or an input running past
#         60 s fails the stage; the input is kept in $ASAN_BUILD_DIR/fuzz/findings/ and printed
#         as base64 (add it under tests/fuzz/regressions/<target>/ with the fix).
# No ThreadSanitizer stage: a second sanitizer build of the server and the engine would add
# about as much again as the asan build, past CI's budget (README, Continuous integration).
#
#   SANITIZE_STAGES="asan fuzz"   the stages to run (default: asan fuzz)
#   FUZZ_SECONDS=20               each fuzz target's time
set -uo pipefail
cd "$(dirname "$0")/.."
STAGES=${SANITIZE_STAGES:-asan fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
ASAN_DIR=${ASAN_BUILD_DIR:-build-asan}
JOBS=$(nproc)
failed=()

# Under ASan + UBSan: tests of code that reads what a client or a model file sends: the GGUF,
# safetensors and Hugging Face JSON loaders and the tokenizers; the OpenAI request parser, the
# HTTP layer, the chat-template interpreter and the server; and the KV cache's property test
# (two of its runs: ASAN_FILTERS), besides each fuzz target's replay of its seeds and
# regressions.
ASAN_TESTS=(gguf_malformed_test gguf_hparams_test safetensors_malformed_test json_limits_test
  hf_json_limits_test tokenizer_unit_test tokenizer_unicode_test
  openai_request_test request_limits_test auth_test chat_template_test jinja_unit_test
  http_exchange_test http_limits_test server_reliability_test
  kv_cache_property_test)
# GoogleTest filters for tests too slow to run whole at -O0 under ASan (test=filter): of the
# KV cache's 42 random runs of 4,000 operations, two with prefix caching and sliding windows
# (blocks of 8, a table per layer; blocks of 16 holding two layers each): ~40 CPU-s together;
# the plain build runs all 42. (scheduler_test runs models through the engine: too slow here.)
ASAN_FILTERS=("kv_cache_property_test=*paged_bs8_prefix_windows_24_0_24_40_seed1:\
*paged_bs16_prefix_windows_0_0_20_20_100_100_seed1")

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

stage_start() { STAGE_T0=$(date +%s); echo "sanitize: == $1 =="; }
stage_end() { echo "sanitize: $1 took $(($(date +%s) - STAGE_T0)) s"; }
names_regex() { local IFS='|'; echo "^($*)\$"; }

configure() {  # dir, extra cmake arguments...
  local dir=$1
  shift
  # A unity build (16 sources per compiler run: the Boost.Beast, JSON and Abseil headers
  # parsed once per run, not per source) at -O0: the server's libraries took 254 CPU-s this
  # way, 470 at -O1, and a build of single sources at -O1 is several times that (one Beast
  # source alone, 43 CPU-s). The tests run models small enough for -O0. A source that cannot
  # share a unity file (two files with the same name in anonymous namespaces) fails here
  # first. -gline-tables-only (CMakeLists.txt): file and line in every report.
  CC=${SANITIZE_CC:-clang} CXX=${SANITIZE_CXX:-clang++} cmake -S . -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE="${SANITIZE_OPT:--O0}" \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 "$@" >/dev/null
}

fuzz_targets() {
  local src
  for src in tests/fuzz/*_fuzz.cc; do basename "$src" .cc; done
}

run_asan() {
  stage_start "asan: ASan + UBSan build of ${#ASAN_TESTS[@]} tests and the fuzz targets ($ASAN_DIR)"
  local fuzz
  mapfile -t fuzz < <(fuzz_targets)
  configure "$ASAN_DIR" -DPAGEDINFER_SANITIZE=address,undefined -DPAGEDINFER_FUZZ=ON || return 1
  # -k 0: every source that fails is reported, not only the first.
  cmake --build "$ASAN_DIR" -j "$JOBS" --target "${ASAN_TESTS[@]}" "${fuzz[@]}" -- -k 0 || return 1
  ASAN_BUILT=1
  stage_end "asan build"
  stage_start "asan: tests under ASan + UBSan"
  local rc=0 whole=() entry name filtered=()
  for entry in "${ASAN_FILTERS[@]}"; do filtered+=("${entry%%=*}"); done
  for name in "${ASAN_TESTS[@]}"; do
    [[ " ${filtered[*]} " == *" $name "* ]] || whole+=("$name")
  done
  ctest --test-dir "$ASAN_DIR" --no-tests=error --output-on-failure -j "$JOBS" --timeout 900 \
    -R "$(names_regex "${whole[@]}" "${fuzz[@]/%/_replay}")" || rc=1
  for entry in "${ASAN_FILTERS[@]}"; do
    echo "sanitize: ${entry%%=*} with GTEST_FILTER=${entry#*=}"
    GTEST_FILTER=${entry#*=} ctest --test-dir "$ASAN_DIR" --no-tests=error --output-on-failure --timeout 900 \
      -R "$(names_regex "${entry%%=*}")" || rc=1
  done
  stage_end "asan tests"
  return $rc
}

# One fuzz target for FUZZ_SECONDS from its seeds (read only: the inputs it adds land in a
# scratch folder, not in the repository); prints its executions and the inputs it added.
fuzz_one() {
  local name=$1 bin="$ASAN_DIR/tests/fuzz/$1"
  local work="$ASAN_DIR/fuzz/$name" findings="$ASAN_DIR/fuzz/findings"
  rm -rf "$work" "$findings/$name"-* && mkdir -p "$work/corpus" "$findings"
  local seeds=(tests/fuzz/corpus/"$name")
  [ "$name" = chat_template_fuzz ] && seeds+=(tests/server/jinja/templates)
  "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=60 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$findings/$name-" "$work/corpus" "${seeds[@]}" \
    >"$work/log" 2>&1
  local rc=$?
  local execs corpus
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
  corpus=$(find "$work/corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    echo "fuzz: $name: ${execs:-?} executions in $FUZZ_SECONDS s, 0 findings ($corpus new inputs)"
    return 0
  fi
  echo "fuzz: $name: FAILED (exit $rc) after ${execs:-?} executions; its log:"
  tail -n 60 "$work/log"
  local f
  for f in "$findings/$name"-*; do
    [ -f "$f" ] || continue
    echo "fuzz: $name: the input, $f, as base64 (add it to tests/fuzz/regressions/$name/):"
    base64 "$f"
  done
  return 1
}

run_fuzz() {
  if [[ $STAGES == *asan* && -z ${ASAN_BUILT:-} ]]; then
    echo "sanitize: fuzz not run: the asan build failed (its binaries would be stale)"
    return 1
  fi
  stage_start "fuzz: each target for $FUZZ_SECONDS s under ASan + UBSan, $JOBS at once"
  local rc=0
  export -f fuzz_one
  export ASAN_DIR FUZZ_SECONDS
  fuzz_targets | xargs -P "$JOBS" -I{} bash -c 'fuzz_one {}' || rc=1
  stage_end "fuzz"
  return $rc
}

for stage in $STAGES; do
  case $stage in
    asan) run_asan || failed+=(asan) ;;
    fuzz) run_fuzz || failed+=(fuzz) ;;
    *) echo "sanitize: unknown stage '$stage' (asan, fuzz)"; failed+=("$stage") ;;
  esac
done
if ((${#failed[@]})); then
  echo "sanitize: FAILED: ${failed[*]}"
  exit 1
fi
echo "sanitize: stages passed: $STAGES (0 sanitizer findings, 0 fuzz crashes)"

#!/usr/bin/env bash
# Regenerates tests/engine/llama_cpp_refs/: llama.cpp's logits and greedy continuation for the
# tiny synthetic model of each architecture, which tests/engine/architectures_test.cc compares
# with the engine's (CI has no llama.cpp, so the figures are stored). The synth files are
# seeded and deterministic: the test writes the same files again.
#
# usage: LLAMA_BIN=path/to/llama.cpp/build/bin scripts/arch_references.sh [BUILD_DIR]
#   LLAMA_BIN must hold llama-debug (logits after the prompt) and llama-completion (greedy
#   continuation, read back from its --prompt-cache-all session file).
# Both run on the CPU with an f32 K/V cache and without flash attention, the prompt decoded
# in one batch, as the engine's reference path computes.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PI=$BUILD/pagedinfer
OUT=tests/engine/llama_cpp_refs
[ -x "$PI" ] || { echo "build $PI first: ninja -C $BUILD pagedinfer" >&2; exit 2; }
[ -n "${LLAMA_BIN:-}" ] || { echo "set LLAMA_BIN to llama.cpp's build/bin" >&2; exit 2; }
for tool in llama-debug llama-completion; do
  [ -x "$LLAMA_BIN/$tool" ] || { echo "$LLAMA_BIN/$tool not found" >&2; exit 2; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
# 244 tokens of the synthetic vocabulary: past every tiny-* window (32 tokens).
PROMPT="Once upon a time there was a little story about the world and the people in it. \
The man said that he had been there before, but she could not see him from where she was. \
Then two of them made their way back through the long day, and each one of the men had \
a good life with many years after that, so they were never the same again."
GREEDY=16
# llama.cpp reads no sliding window in llama files and disables the one in phi3 files
# (src/models/llama.cpp never reads llama.attention.sliding_window; src/models/phi3.cpp sets
# swa_type NONE), so for those it also runs a prompt that stays inside their 32-token window
# with its greedy tokens (13 + 16): there it computes what the file's window states.
IN_WINDOW_PROMPT="Once upon a time"
IN_WINDOW_SHAPES=" tiny-phi3 tiny-mistral-swa "

# reference MODEL PROMPT OUT_FILE SHAPE TYPE NOTE: llama.cpp's logits after PROMPT and its
# greedy continuation, written to OUT_FILE.
reference() {
  local model=$1 prompt=$2 out=$3 shape=$4 type=$5 note=$6
  local name
  name=$(basename "$model" .gguf)
  "$LLAMA_BIN/llama-debug" -m "$model" -p "$prompt" --save-logits --logits-output-dir "$TMP" \
    -ctk f32 -ctv f32 -fa off -t 2 -c 512 -b 512 -ub 512 >"$TMP/debug.log" 2>&1 ||
    { cat "$TMP/debug.log" >&2; exit 1; }
  rm -f "$TMP/session.bin"
  "$LLAMA_BIN/llama-completion" -m "$model" -p "$prompt" -n $GREEDY --temp 0 -s 1 -no-cnv \
    --no-warmup -ctk f32 -ctv f32 -fa off -t 2 -c 512 -b 512 -ub 512 \
    --prompt-cache "$TMP/session.bin" --prompt-cache-all >"$TMP/completion.log" 2>&1 ||
    { cat "$TMP/completion.log" >&2; exit 1; }
  python3 - "$TMP/llamacpp-$name.bin" "$TMP/llamacpp-$name-tokens.bin" "$TMP/session.bin" \
    "$out" "$shape" "$type" "$note" <<'PY'
import struct, sys
logits_path, tokens_path, session_path, out_path, shape, ftype, note = sys.argv[1:]
raw = open(logits_path, 'rb').read()
logits = struct.unpack('<%df' % (len(raw) // 4), raw)
raw = open(tokens_path, 'rb').read()
prompt = list(struct.unpack('<%di' % (len(raw) // 4), raw))
raw = open(session_path, 'rb').read()
magic, version, n = struct.unpack_from('<III', raw, 0)
assert magic == 0x6767736e, 'not a llama.cpp session file'
session = list(struct.unpack_from('<%di' % n, raw, 12))
assert session[:len(prompt)] == prompt, 'llama-completion tokenized the prompt differently'
greedy = session[len(prompt):]
with open(out_path, 'w') as f:
    f.write('# llama.cpp on `pagedinfer synth --shape %s --type %s --seed 1`\n' % (shape, ftype))
    f.write('# written by scripts/arch_references.sh: llama-debug --save-logits (logits after\n')
    f.write('# the prompt) and llama-completion --temp 0 (greedy tokens), f32 K/V, no flash\n')
    f.write('# attention. Regenerate with that script; do not edit.\n')
    if note:
        f.write('# %s\n' % note)
    f.write('prompt ' + ' '.join(map(str, prompt)) + '\n')
    f.write('greedy ' + ' '.join(map(str, greedy)) + '\n')
    for i in range(0, len(logits), 8):
        f.write('logits ' + ' '.join('%.9g' % v for v in logits[i:i + 8]) + '\n')
print('%s: %d prompt tokens, %d greedy, %d logits' % (out_path, len(prompt), len(greedy),
                                                     len(logits)))
PY
}

for shape in tiny-qwen3 tiny-gemma2 tiny-gemma3 tiny-phi3 tiny-mistral-swa; do
  for type in F32 Q8_0; do
    name=$shape-$type
    model=$TMP/$name.gguf
    "$PI" synth --shape "$shape" --type "$type" --seed 1 -o "$model" >/dev/null
    reference "$model" "$PROMPT" "$OUT/$name.txt" "$shape" "$type" ""
    if [[ "$IN_WINDOW_SHAPES" == *" $shape "* ]]; then
      reference "$model" "$IN_WINDOW_PROMPT" "$OUT/$name-in-window.txt" "$shape" "$type" \
        "A prompt that stays inside the file's window, with its greedy tokens."
    fi
  done
done

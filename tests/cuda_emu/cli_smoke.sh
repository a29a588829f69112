#!/usr/bin/env bash
# The pagedinfer command with --device cuda on the CUDA emulator (tests/cuda_emu): `run`
# writes the CPU's greedy text (f16 and q8_0 KV, CUDA graphs and eager), names the device and
# shows the ledger's CUDA lines; bench-kv runs both layouts on cuda. What gpu-check.sh runs on
# a GPU, checked to run here first. Speed figures on the emulator mean nothing.
# Usage: cli_smoke.sh PAGEDINFER PAGEDINFER_EMU MODEL
set -euo pipefail
# The KV pool takes the whole budget of the emulated device, as on a GPU: 1 GiB keeps it small.
export PINFER_CUDA_EMU_MIB=${PINFER_CUDA_EMU_MIB:-1024}
cpu_bin=$1 emu_bin=$2 model=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

for kv in f16 q8_0; do
  want=$("$cpu_bin" run -m "$model" -p "Once upon a time" -n 32 --temp 0 --kv-dtype "$kv" \
    --device cpu 2>/dev/null)
  for eager in "" --enforce-eager; do
    what="run --device cuda --kv-dtype $kv ${eager:-(graphs)}"
    if ! got=$("$emu_bin" run -m "$model" -p "Once upon a time" -n 32 --temp 0 --kv-dtype "$kv" \
      --device cuda $eager --memory-report 2>"$tmp/err"); then
      fail "$what exited non-zero: $(tail -3 "$tmp/err")"
      continue
    fi
    before=$failures
    [[ "$got" == "$want" ]] || fail "$what wrote '$got', the CPU '$want'"
    grep -q "^device: cuda:0 (pagedinfer CUDA emulator" "$tmp/err" || fail "$what: no device line"
    # The pool is all the budget leaves (vLLM's sizing), not run's one sequence.
    grep -q "^KV pool: .*the whole budget after the other lines (0.90 of .* (free device memory)), as vLLM sizes it" \
      "$tmp/err" || fail "$what: the pool is not the whole budget: $(grep '^KV pool' "$tmp/err")"
    # The ledger's graph line: with graphs only.
    if grep -q "^  cuda graphs " "$tmp/err"; then
      [[ -z "$eager" ]] || fail "$what: a 'cuda graphs' ledger line without graphs"
    else
      [[ -n "$eager" ]] || fail "$what: no 'cuda graphs' ledger line"
    fi
    ((failures > before)) || echo "ok: $what"
  done
done

# The GEMVs as programmatic dependents (PINFER_CUDA_PDL=1), captured into graphs.
want=$("$cpu_bin" run -m "$model" -p "Once upon a time" -n 32 --temp 0 --device cpu 2>/dev/null)
if got=$(PINFER_CUDA_PDL=1 "$emu_bin" run -m "$model" -p "Once upon a time" -n 32 --temp 0 \
  --device cuda 2>"$tmp/err"); then
  if [[ "$got" == "$want" ]]; then echo "ok: run --device cuda with PINFER_CUDA_PDL=1"; else
    fail "PINFER_CUDA_PDL=1 run wrote '$got', the CPU '$want'"
  fi
else
  fail "PINFER_CUDA_PDL=1 run exited non-zero: $(tail -3 "$tmp/err")"
fi

if "$emu_bin" bench-kv -m "$model" --device cuda --requests 3 --dist uniform --min 8 --max 24 \
  --seed 1 --max-model-len 64 --kv-cache-memory 40960 --max-num-seqs 4 \
  --max-num-batched-tokens 64 >"$tmp/bench" 2>&1; then
  grep -q "^| requests finished | 3 | 3 |" "$tmp/bench" || fail "bench-kv --device cuda: $(cat "$tmp/bench")"
  echo "ok: bench-kv --device cuda"
else
  fail "bench-kv --device cuda exited non-zero: $(tail -5 "$tmp/bench")"
fi
# qwen3 (per-head Q/K norms through the RMSNorm kernel) writes the CPU's greedy text.
"$cpu_bin" synth --shape tiny-qwen3 --type Q8_0 --seed 1 -o "$tmp/tiny-qwen3.gguf" >/dev/null 2>&1 ||
  fail "synth --shape tiny-qwen3"
want=$("$cpu_bin" run -m "$tmp/tiny-qwen3.gguf" -p "Once upon a time" -n 16 --temp 0 --device cpu \
  2>/dev/null)
if got=$("$emu_bin" run -m "$tmp/tiny-qwen3.gguf" -p "Once upon a time" -n 16 --temp 0 \
  --device cuda 2>"$tmp/err"); then
  if [[ "$got" == "$want" ]]; then echo "ok: tiny-qwen3 on cuda"; else
    fail "tiny-qwen3 on cuda wrote '$got', the CPU '$want'"
  fi
else
  fail "tiny-qwen3 on cuda exited non-zero: $(tail -3 "$tmp/err")"
fi

# Architectures whose features the kernels do not compute yet are refused at start, naming
# what is missing, never run to a wrong answer.
for shape in tiny-gemma2 tiny-gemma3 tiny-phi3 tiny-mistral-swa; do
  "$cpu_bin" synth --shape "$shape" --type F32 --seed 1 -o "$tmp/$shape.gguf" >/dev/null 2>&1 ||
    { fail "synth --shape $shape"; continue; }
  if "$emu_bin" run -m "$tmp/$shape.gguf" -p "Once" -n 2 --device cuda >/dev/null 2>"$tmp/err"; then
    fail "$shape ran on --device cuda, whose kernels lack its features"
  elif grep -q "the CUDA backend does not run .* models yet (not implemented: " "$tmp/err"; then
    echo "ok: $shape refused on cuda: $(grep -o 'not implemented: [^)]*' "$tmp/err" | head -1)"
  else
    fail "$shape on cuda failed without naming what is missing: $(tail -2 "$tmp/err")"
  fi
done
((failures == 0)) || exit 1

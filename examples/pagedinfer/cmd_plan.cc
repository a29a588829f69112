// pagedinfer plan: the memory ledger for a model and engine settings, before loading anything.
#include <cstdio>
#include <string>

#include "absl/strings/str_join.h"
#include "engine/memory/memory_ledger.h"
#include "engine/memory/model_plan.h"
#include "engine/model/model_shapes.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"

namespace pinfer::cli {

int PlanMain(int argc, char** argv) {
  std::string model, shape, type = "Q4_K_M", memory, kv = "f16", reserve, device = "cuda";
  LedgerOptions o;
  bool json = false;
  Args args("plan",
            "pagedinfer plan (--shape NAME --type TYPE | -m FILE) --memory BYTES [options]\n"
            "Prints the memory ledger: weights, KV bytes per token, workspace, reserve, and the\n"
            "KV pool the rest holds. Exit status 1 when one max_model_len sequence does not fit.",
            {"pagedinfer plan --shape llama2-7b --type Q4_0 --memory 16GiB --kv-dtype f16",
             "pagedinfer plan --shape mistral-7b --type Q4_K_M --memory 8GiB --max-model-len "
             "32768 --json"});
  args.Add("-m,--model", &model, "model: a GGUF file or a Hugging Face folder");
  args.Add("--shape", &shape,
           "named shape instead of a file: " + absl::StrJoin(NamedShapeNames(), ", "));
  args.Add("--type", &type, "file type with --shape (Q4_0, Q4_K_M, Q8_0, F16, ...)");
  args.Add("--memory", &memory, "memory the engine may use in all (e.g. 16GiB); required");
  args.Add("--kv-dtype", &kv, "KV cache format: f32, f16, bf16, q8_0, q4_0, fp8");
  args.Add("--block-size", &o.block_size, "tokens per KV block");
  args.Add("--max-model-len", &o.max_model_len,
           "tokens per sequence (prompt + output); 0: the model's context length");
  args.Add("--max-num-seqs", &o.max_num_seqs, "sequences running at once");
  args.Add("--max-num-batched-tokens", &o.max_num_batched_tokens, "tokens per forward step");
  args.Add("--device", &device,
           "where the engine will run: cuda (default reserve 1GiB: context, cuBLAS, slack) or "
           "cpu (the engine's CPU default, 64MiB)");
  args.Add("--reserve", &reserve,
           "runtime reserve (allocator slack, runtime buffers); default from --device");
  args.AddSwitch("--json", &json, "print JSON instead of a table");
  if (int rc = ParseOrExit(args, argc, argv); rc >= 0) return rc;

  if (model.empty() == shape.empty()) {
    return Fail(absl::InvalidArgumentError(
                    "give either -m FILE or --shape NAME (see pagedinfer plan --help)"),
                2);
  }
  if (memory.empty()) {
    return Fail(
        absl::InvalidArgumentError(
            "--memory is required: how much memory the engine may use in all, e.g. --memory 16GiB"),
        2);
  }
  absl::StatusOr<uint64_t> budget = ParseBytes(memory);
  if (!budget.ok()) return Fail(budget.status(), 2);
  if (device != "cuda" && device != "cpu") {
    return Fail(absl::InvalidArgumentError("--device must be cuda or cpu, not '" + device + "'"),
                2);
  }
  if (reserve.empty()) reserve = device == "cpu" ? "64MiB" : "1GiB";
  absl::StatusOr<uint64_t> reserve_bytes = ParseBytes(reserve);
  if (!reserve_bytes.ok()) return Fail(reserve_bytes.status(), 2);
  absl::StatusOr<KvDtype> kv_dtype = ParseKvDtype(kv);
  if (!kv_dtype.ok()) return Fail(kv_dtype.status(), 2);
  o.budget_bytes = *budget;
  o.reserve_bytes = *reserve_bytes;
  o.kv_dtype = *kv_dtype;

  absl::StatusOr<PlanInput> input =
      model.empty() ? PlanInputFromShape(shape, type) : PlanInputFromModelFile(model);
  if (!input.ok()) return Fail(input.status(), 2);
  absl::StatusOr<MemoryLedger> ledger = ComputeLedger(*input, o);
  if (!ledger.ok()) return Fail(ledger.status(), 2);
  std::string out = json ? ledger->ToJson() + "\n" : ledger->ToText();
  std::fputs(out.c_str(), stdout);
  return ledger->fits ? 0 : 1;
}

}  // namespace pinfer::cli

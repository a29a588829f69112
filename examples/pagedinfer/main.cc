// pagedinfer: the command line. `pagedinfer help` lists the subcommands.
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/build_info.h"
#include "examples/pagedinfer/commands.h"
#include "loaders/kernel_set.h"

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(out, "pagedinfer %s: a small inference engine with a block-paged KV cache\n\n",
               pinfer::BuildInfo().c_str());
  std::fprintf(out, "usage: pagedinfer <command> [options]   (pagedinfer <command> --help)\n\n");
  for (const pinfer::cli::Command& c : pinfer::cli::kCommands) {
    std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
  }
  std::fprintf(out, "\nexample: pagedinfer run -m model.gguf -p \"Once upon a time\" -n 64\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "-h")) {
    PrintUsage(stdout);
    return argc < 2 ? 2 : 0;
  }
  // PAGEDINFER_KERNELS (loaders/kernel_set.h): a set this CPU cannot run, or no set at all,
  // ends the run here with the reason.
  if (absl::StatusOr<pinfer::KernelSet> k = pinfer::KernelSetFromEnvironment(); !k.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(k.status().message()).c_str());
    return 2;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version")) {
    std::printf("pagedinfer %s\n", pinfer::BuildInfo().c_str());
    return 0;
  }
  for (const pinfer::cli::Command& c : pinfer::cli::kCommands) {
    if (std::strcmp(argv[1], c.name) == 0) return c.main(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}

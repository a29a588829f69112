// pagedinfer chat: a conversation on the terminal using the model's chat template, with the
// reply streamed token by token. /reset starts over, /exit (or Ctrl-D) leaves.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "engine/engine.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"
#include "server/chat_template.h"

namespace pinfer::cli {
namespace {

// A bar over the loading stages, drawn only when stderr is a terminal. Loading maps the file
// (instant), so the bar counts stages honestly rather than pretending to count bytes.
class StageBar {
 public:
  explicit StageBar(int stages) : stages_(stages), tty_(isatty(fileno(stderr))) {}
  void Start(const char* what) {
    what_ = what;
    t0_ = std::chrono::steady_clock::now();
    Draw(false);
  }
  void Done() {
    ++done_;
    Draw(true);
    if (tty_ && done_ == stages_) std::fputc('\n', stderr);
  }

 private:
  void Draw(bool finished) {
    if (!tty_) return;
    const int width = 24, filled = width * done_ / stages_;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::fprintf(stderr, "\r\033[K[%s%s] %d/%d %s%s", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), done_, stages_, what_,
                 finished ? "" : "...");
    if (finished) std::fprintf(stderr, " (%.2f s)", s);
    std::fflush(stderr);
  }
  const int stages_;
  const bool tty_;
  int done_ = 0;
  const char* what_ = "";
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

int ChatMain(int argc, char** argv) {
  EngineFlags ef;
  SamplingParams sp;
  sp.max_tokens = 256;
  std::string system;
  int64_t seed = 0;
  Args a("chat", "pagedinfer chat -m MODEL [--system TEXT] [-n N] [--temp T] [engine options]",
         {"pagedinfer chat -m stories260K.gguf --temp 0",
          "pagedinfer chat -m model.gguf --system \"You are terse.\" -n 512 --kv-dtype q8_0"});
  ef.Register(a);
  a.Add("--system", &system, "system message opening the conversation");
  a.Add("-n,--n-predict", &sp.max_tokens, "most tokens per reply");
  a.Add("--temp", &sp.temperature, "temperature (0: greedy)");
  a.Add("--top-k", &sp.top_k, "top-k (0: off)");
  a.Add("--top-p", &sp.top_p, "top-p (1: off)");
  a.Add("--min-p", &sp.min_p, "min-p (0: off)");
  a.Add("-s,--seed", &seed, "sampling seed");
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (ef.model.empty()) return Fail(absl::InvalidArgumentError("-m MODEL is required"));
  sp.seed = static_cast<uint64_t>(seed);
  auto config = ef.ToConfig();
  if (!config.ok()) return Fail(config.status());

  StageBar bar(2);
  bar.Start("mapping the file, binding weights and tokenizer");
  auto model = Model::Load(ef.model);
  if (!model.ok()) return Fail(model.status());
  bar.Done();
  bar.Start("sizing and reserving the KV pool");
  auto engine = Engine::Create(**model, *config, nullptr, /*quiet=*/true);
  if (!engine.ok()) return Fail(engine.status());
  bar.Done();
  Engine& e = **engine;
  const Tokenizer& tok = (*model)->tokenizer();
  const server::ChatTemplate tmpl = server::DetectChatTemplate(tok.spec().chat_template);
  std::fprintf(stderr, "%s\nchat template: %s. Type a message; /reset starts over, /exit leaves.\n",
               e.pool_summary().c_str(), server::ChatTemplateName(tmpl));

  std::vector<server::ChatMessage> history;
  if (!system.empty()) history.push_back({"system", system});
  const size_t keep = history.size();
  std::string line;
  while (true) {
    std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line) || line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history.resize(keep);
      std::fprintf(stderr, "(conversation cleared)\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({"user", line});
    GenerationRequest req;
    req.params = sp;
    req.params.stop.push_back(server::ChatTemplateEndOfTurn(tmpl));
    absl::StatusOr<int64_t> rid;
    while (true) {  // drop the oldest turns while the conversation is too long
      req.prompt = tok.Encode(server::FormatChat(tmpl, history), true, /*parse_special=*/true);
      rid = e.AddRequest(req);
      if (rid.ok() || !absl::IsInvalidArgument(rid.status()) || history.size() <= keep + 1) break;
      history.erase(history.begin() + static_cast<ptrdiff_t>(keep));
      std::fprintf(stderr, "(the conversation outgrew max_model_len: oldest turn dropped)\n");
    }
    if (!rid.ok()) {
      Fail(rid.status());  // report it and keep the conversation going
      history.pop_back();
      continue;
    }
    std::string reply;
    while (e.HasWork()) {
      auto outs = e.Step();
      if (!outs.ok()) return Fail(outs.status());
      for (const SequenceOutput& o : *outs) {
        reply += o.new_text;
        std::fwrite(o.new_text.data(), 1, o.new_text.size(), stdout);
        std::fflush(stdout);
      }
    }
    std::fputc('\n', stdout);
    history.push_back({"assistant", reply});
  }
  return 0;
}

}  // namespace pinfer::cli

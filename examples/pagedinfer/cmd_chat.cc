// pagedinfer chat: a conversation on the terminal using the model's chat template, with the
// reply streamed token by token. Line editing and history (libedit) on a terminal; Ctrl-C
// stops the reply being written and keeps the conversation; /reset starts over, /history
// shows it, /exit (or Ctrl-D) leaves.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/chat_template_flag.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"
#include "examples/pagedinfer/line_reader.h"
#include "examples/pagedinfer/sampling_flags.h"
#include "server/chat_formatter.h"
#include "server/chat_prompt.h"

namespace pinfer::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void OnInterrupt(int) { g_interrupted = 1; }

// SIGINT sets a flag instead of ending the program; without SA_RESTART, so a read in
// progress returns (EINTR) and the line reader sees it.
void CatchInterrupt() {
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

// PAGEDINFER_STEP_DELAY_MS: a pause after each engine step, so that tests can interrupt a
// reply of a tiny model midway. Unset: none.
std::chrono::milliseconds StepDelay() {
  int ms = 0;
  const char* env = std::getenv("PAGEDINFER_STEP_DELAY_MS");
  if (env == nullptr || !absl::SimpleAtoi(env, &ms) || ms < 0) ms = 0;
  return std::chrono::milliseconds(ms);
}

class ChatSession {
 public:
  ChatSession(Engine& e, const Tokenizer& tok,
              std::shared_ptr<const server::ChatFormatter> formatter, SamplingParams sp,
              const std::string& system)
      : e_(e),
        tok_(tok),
        formatter_(std::move(formatter)),
        sp_(std::move(sp)),
        delay_(StepDelay()) {
    if (!system.empty()) history_.push_back({"system", system});
    keep_ = history_.size();
  }

  // One user message and the reply, streamed to stdout. The conversation keeps both, also
  // when Ctrl-C cut the reply short. An error leaves the conversation as it was.
  absl::Status Turn(const std::string& user) {
    history_.push_back({"user", user});
    absl::StatusOr<int64_t> rid = Submit();
    if (!rid.ok()) {
      history_.pop_back();
      return rid.status();
    }
    bool interrupted = false;
    absl::StatusOr<std::string> reply = Stream(*rid, &interrupted);
    if (!reply.ok()) {
      history_.pop_back();
      return reply.status();
    }
    std::fputs(interrupted ? "\n(interrupted)\n" : "\n", stdout);
    std::fflush(stdout);
    history_.push_back({"assistant", *reply});
    return absl::OkStatus();
  }

  void Reset() { history_.resize(keep_); }

  void PrintHistory() const {
    for (const server::ChatMessage& m : history_) {
      std::fprintf(stdout, "%s: %s\n", m.role.c_str(), m.content.c_str());
    }
    std::fflush(stdout);
  }

 private:
  // Adds the request: the reply is capped at what the context leaves after the prompt, and
  // the oldest turns are dropped while the conversation leaves no room at all.
  absl::StatusOr<int64_t> Submit() {
    const int max_len = e_.config().max_model_len;
    while (true) {
      GenerationRequest req;
      req.params = sp_;
      req.params.stop.push_back(server::ChatTemplateEndOfTurn(formatter_->family()));
      // Only the template's text may spell special tokens; what was typed stays text.
      auto pieces =
          formatter_->Format(history_, nlohmann::ordered_json(), nlohmann::ordered_json());
      if (!pieces.ok()) return pieces.status();
      req.prompt = server::ChatPromptEncoder(tok_).Encode(*pieces);
      const int room = max_len - static_cast<int>(req.prompt.size());
      if (room >= 1) {
        req.params.max_tokens = std::min(req.params.max_tokens, room);
        return e_.AddRequest(std::move(req));
      }
      if (history_.size() <= keep_ + 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("the message is ", req.prompt.size(), " tokens with the template; ",
                         "max_model_len is ", max_len, " (start with a larger -c)"));
      }
      history_.erase(history_.begin() + static_cast<ptrdiff_t>(keep_));
      std::fprintf(stderr, "(the conversation outgrew max_model_len: oldest turn dropped)\n");
    }
  }

  // Steps the engine until the reply is done or Ctrl-C cancels it; returns the text written.
  absl::StatusOr<std::string> Stream(int64_t rid, bool* interrupted) {
    std::string reply;
    g_interrupted = 0;
    while (e_.HasWork()) {
      if (g_interrupted) {
        e_.Cancel(rid);
        *interrupted = true;
        break;
      }
      auto outs = e_.Step();
      if (!outs.ok()) return outs.status();
      for (const SequenceOutput& o : *outs) {
        reply += o.new_text;
        std::fwrite(o.new_text.data(), 1, o.new_text.size(), stdout);
        std::fflush(stdout);
      }
      if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    }
    g_interrupted = 0;
    return reply;
  }

  Engine& e_;
  const Tokenizer& tok_;
  const std::shared_ptr<const server::ChatFormatter> formatter_;
  const SamplingParams sp_;
  const std::chrono::milliseconds delay_;
  std::vector<server::ChatMessage> history_;
  size_t keep_ = 0;  // leading messages /reset keeps (the system message)
};

// Reads and answers lines until /exit or the end of input.
void Converse(ChatSession& chat) {
  LineReader reader("pagedinfer");
  std::string line;
  while (true) {
    const LineReader::Result r = reader.Read("\n> ", &line);
    if (r == LineReader::Result::kEnd) break;
    if (r == LineReader::Result::kInterrupted) {
      std::fputs("^C (Ctrl-D or /exit leaves)\n", stderr);
      continue;
    }
    if (line.empty()) continue;
    reader.Remember(line);
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      chat.Reset();
      std::fprintf(stderr, "(conversation cleared)\n");
    } else if (line == "/history") {
      chat.PrintHistory();
    } else if (absl::Status s = chat.Turn(line); !s.ok()) {
      Fail(s);  // report it and keep the conversation going
    }
  }
}

}  // namespace

int ChatMain(int argc, char** argv) {
  EngineFlags ef;
  ef.max_num_seqs = 1;  // one conversation: the pool holds one max_model_len sequence
  SamplingFlags sf;
  sf.params.max_tokens = 256;
  std::string system, chat_template;
  Args a("chat", "pagedinfer chat -m MODEL [--system TEXT] [-n N] [--temp T] [engine options]",
         {"pagedinfer chat -m stories260K.gguf --temp 0",
          "pagedinfer chat -m model.gguf --system \"You are terse.\" -n 512 --kv-dtype q8_0"});
  ef.Register(a);
  a.Add("-sys,--system,--system-prompt", &system, "system message opening the conversation");
  a.Add("-n,--n-predict", &sf.params.max_tokens,
        "most tokens per reply (capped at what the context leaves after the conversation)");
  sf.Register(a);
  RegisterChatTemplateFlag(a, &chat_template);
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (ef.model.empty()) return Fail(absl::InvalidArgumentError("-m MODEL is required"));
  if (sf.params.max_tokens < 1) {
    return Fail(absl::InvalidArgumentError("-n must be at least 1"), 2);
  }
  auto config = ef.ToConfig();
  if (!config.ok()) return Fail(config.status());
  auto loaded = LoadEngine(ef, *config);
  if (!loaded.ok()) return Fail(loaded.status());
  const Tokenizer& tok = loaded->model->tokenizer();
  auto tmpl = ResolveChatTemplate(chat_template, tok);
  if (!tmpl.ok()) return Fail(tmpl.status(), 2);
  std::fprintf(stderr,
               "chat template: %s. Type a message; Ctrl-C stops a reply, /reset starts "
               "over, /history shows the conversation, /exit leaves.\n",
               tmpl->source.c_str());
  ChatSession chat(*loaded->engine, tok, tmpl->formatter, sf.Resolved(), system);
  CatchInterrupt();
  Converse(chat);
  return 0;
}

}  // namespace pinfer::cli

// pagedinfer serve: an OpenAI-compatible HTTP server (completions, chat completions with
// streaming, models, health, Prometheus metrics, the memory ledger) over one engine.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/engine.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/chat_template_flag.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"
#include "nlohmann/json.hpp"
#include "server/openai_server.h"

namespace pinfer::cli {
namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// Each connection is a descriptor: raise the soft limit to the hard one, and keep
// --max-connections below what is left.
absl::Status FitDescriptors(server::ServerOptions* so) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return absl::OkStatus();
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  const int64_t room = static_cast<int64_t>(rl.rlim_cur) - 64;  // model files, pipes, ...
  if (room < 16) return absl::ResourceExhaustedError("too few file descriptors (ulimit -n)");
  if (so->limits.max_connections > room) {
    std::fprintf(stderr, "--max-connections %d lowered to %lld (ulimit -n %llu)\n",
                 so->limits.max_connections, (long long)room, (unsigned long long)rl.rlim_cur);
    so->limits.max_connections = static_cast<int>(room);
  }
  return absl::OkStatus();
}

// SIGINT/SIGTERM: the first is handed to the watcher thread through a pipe (a handler may
// only do async-signal-safe things, and may run on any thread); the second exits at once.
int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signals{0};

extern "C" void OnStopSignal(int sig) {
  if (g_signals.fetch_add(1) >= 1) _exit(128 + sig);
  const char c = static_cast<char>(sig);
  (void)!write(g_signal_pipe[1], &c, 1);
}

// Serves until the first SIGINT/SIGTERM, then drains for up to `drain`; a second signal
// ends the process at once. Returns the exit code: 0 when every request got its answer.
int ServeUntilSignalled(server::OpenAiServer& srv, std::chrono::milliseconds drain) {
  if (pipe(g_signal_pipe) != 0) return Fail(absl::InternalError("pipe() failed"));
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::atomic<bool> clean{true};
  std::thread watcher([&] {
    char sig = 0;
    while (read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig == 0) return;  // the server stopped on its own
    std::fprintf(stderr,
                 "signal %d: shutting down (up to %.1f s for requests in flight; "
                 "a second signal stops at once)\n",
                 sig, drain.count() / 1000.0);
    clean = srv.Shutdown(drain);
    srv.Stop();
  });
  srv.Listen();
  // Listen returns after the watcher's Stop(); should it return on its own, wake the watcher.
  const char zero = 0;
  if (g_signals.load() == 0) (void)!write(g_signal_pipe[1], &zero, 1);
  watcher.join();
  if (!clean) {
    std::fprintf(stderr, "shutdown: some connections were closed before their answer\n");
    return 1;
  }
  std::fprintf(stderr, "shutdown: done\n");
  return 0;
}

// "a,b" or ["a", "b"] (vLLM's --allowed-origins takes a JSON list).
absl::StatusOr<std::vector<std::string>> ParseOrigins(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  if (text[0] == '[') {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_array()) return absl::InvalidArgumentError("--allowed-origins: not a JSON list");
    for (const auto& o : j) {
      if (!o.is_string())
        return absl::InvalidArgumentError("--allowed-origins: origins are strings");
      out.push_back(o.get<std::string>());
    }
    return out;
  }
  for (absl::string_view o : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(o));
  }
  return out;
}

struct ServeFlags {
  EngineFlags engine;
  server::ServerOptions server;
  int max_waiting = 64;
  std::string max_body = "1MiB", chat_template, allowed_origins;
  double request_timeout = 30, keep_alive = 5, shutdown_timeout = 30;

  void Register(Args& a);
  // Checks the values and completes the server options from them.
  absl::Status Check();
};

void ServeFlags::Register(Args& a) {
  server::ServerOptions& so = server;
  engine.Register(a);
  a.Add("--host", &so.host, "address to listen on (127.0.0.1: this machine only)");
  a.Add("--port", &so.port, "TCP port (0: any free port, printed at start)");
  a.Add("--api-key", &so.api_key, "require 'Authorization: Bearer KEY' on /v1/ endpoints");
  a.Add("--max-waiting", &max_waiting,
        "requests queued beyond the running ones; more are refused with 503 + Retry-After");
  a.Add("--max-body", &max_body, "largest request body (413 beyond it), e.g. 1MiB");
  a.Add("--http-threads", &so.http_threads,
        "HTTP I/O threads (every connection is served by them; requests in flight are not "
        "limited by threads)");
  a.Add("--request-timeout", &request_timeout,
        "seconds a client has to send a whole request (headers and body)");
  a.Add("--timeout-keep-alive", &keep_alive,
        "seconds an idle kept-alive connection stays open waiting for its next request");
  a.Add("--max-connections", &so.limits.max_connections,
        "open connections in all; more are refused with 503");
  a.Add("--max-connections-per-client", &so.limits.max_connections_per_client,
        "open connections per client IP address; more are refused with 503 (raise it behind "
        "a reverse proxy)");
  a.Add("--shutdown-timeout", &shutdown_timeout,
        "seconds SIGTERM/SIGINT waits for requests in flight before ending them (streams get "
        "an error event, others a 503)");
  a.AddSwitch("--parse-special", &so.special_in_content,
              "also turn special-token text inside chat messages (</s>, <|im_end|>...) into "
              "special tokens, as llama.cpp does; off: only the template's text can");
  a.Add("-a,--alias,--model-id", &so.model_id,
        "model name in /v1/models and in responses (default: the file's name)");
  RegisterChatTemplateFlag(a, &chat_template);
  a.Add("--allowed-origins", &allowed_origins,
        "CORS: browser origins allowed to call the API, comma-separated or vLLM's JSON list "
        "('[\"*\"]': any); default none (no CORS headers, no preflight answers)");
}

absl::Status ServeFlags::Check() {
  server::ServerOptions& so = server;
  if (engine.model.empty()) return absl::InvalidArgumentError("-m MODEL is required (see --help)");
  if (max_waiting < 1) return absl::InvalidArgumentError("--max-waiting must be >= 1");
  if (so.port < 0 || so.port > 65535) return absl::InvalidArgumentError("--port must be 0..65535");
  if (so.http_threads < 1) return absl::InvalidArgumentError("--http-threads must be >= 1");
  for (double t : {request_timeout, keep_alive, shutdown_timeout}) {
    if (!(t > 0) || t > 86400) {
      return absl::InvalidArgumentError(
          "--request-timeout, --timeout-keep-alive and --shutdown-timeout take seconds > 0");
    }
  }
  if (so.limits.max_connections < 1 || so.limits.max_connections_per_client < 1) {
    return absl::InvalidArgumentError(
        "--max-connections and --max-connections-per-client must be >= 1");
  }
  so.limits.request_timeout = Ms(request_timeout);
  so.limits.keep_alive_timeout = Ms(keep_alive);
  auto body_bytes = ParseBytes(max_body);
  if (!body_bytes.ok()) return body_bytes.status();
  so.limits.max_body = static_cast<size_t>(*body_bytes);
  if (absl::Status s = FitDescriptors(&so); !s.ok()) return s;
  if (so.model_id.empty()) so.model_id = BaseName(engine.model);
  auto origins = ParseOrigins(allowed_origins);
  if (!origins.ok()) return origins.status();
  so.allowed_origins = *origins;
  return absl::OkStatus();
}

}  // namespace

int ServeMain(int argc, char** argv) {
  ServeFlags f;
  Args a("serve",
         "pagedinfer serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] "
         "[--max-waiting N] [--max-body BYTES] [engine options]",
         {"pagedinfer serve -m stories260K.gguf --port 8080",
          "pagedinfer serve -m model.gguf --kv-cache-memory 2GiB --kv-dtype q8_0 --api-key s3cret",
          "curl http://127.0.0.1:8080/v1/completions -H 'Content-Type: application/json' "
          "-d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 32}'",
          "curl -s http://127.0.0.1:8080/metrics | grep vllm:"});
  f.Register(a);
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (absl::Status s = f.Check(); !s.ok()) {
    return Fail(s, absl::IsInvalidArgument(s) ? 2 : 1);
  }
  auto config = f.engine.ToConfig();
  if (!config.ok()) return Fail(config.status());
  config->max_waiting = f.max_waiting;
  auto loaded = LoadEngine(f.engine, *config);
  if (!loaded.ok()) return Fail(loaded.status());
  auto tmpl = ResolveChatTemplate(f.chat_template, loaded->model->tokenizer());
  if (!tmpl.ok()) return Fail(tmpl.status(), 2);
  f.server.chat_formatter = tmpl->formatter;

  // A client that vanishes mid-write must not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  server::OpenAiServer srv(*loaded->engine, f.server);
  std::fprintf(stderr, "chat template: %s\n", tmpl->source.c_str());
  auto port = srv.Bind();
  if (!port.ok()) return Fail(port.status());
  std::fprintf(stderr, "serving %s on http://%s:%d (OpenAI API under /v1; /health, /metrics)\n",
               f.server.model_id.c_str(), f.server.host.c_str(), *port);
  return ServeUntilSignalled(srv, Ms(f.shutdown_timeout));
}

}  // namespace pinfer::cli

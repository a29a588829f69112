// pagedinfer serve: an OpenAI-compatible HTTP server (completions, chat completions with
// streaming, models, health, Prometheus metrics, the memory ledger) over one engine.
#include <csignal>
#include <cstdio>
#include <thread>

#include "engine/engine.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/chat_template_flag.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"
#include "server/openai_server.h"

namespace pinfer::cli {
namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int ServeMain(int argc, char** argv) {
  EngineFlags ef;
  server::ServerOptions so;
  int max_waiting = 64;
  std::string max_body = "1MiB", chat_template;
  Args a("serve",
         "pagedinfer serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] "
         "[--max-waiting N] [--max-body BYTES] [engine options]",
         {"pagedinfer serve -m stories260K.gguf --port 8080",
          "pagedinfer serve -m model.gguf --kv-cache-memory 2GiB --kv-dtype q8_0 --api-key s3cret",
          "curl http://127.0.0.1:8080/v1/completions -H 'Content-Type: application/json' "
          "-d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 32}'",
          "curl -s http://127.0.0.1:8080/metrics | grep kv_blocks"});
  ef.Register(a);
  a.Add("--host", &so.host, "address to listen on (127.0.0.1: this machine only)");
  a.Add("--port", &so.port, "TCP port (0: any free port, printed at start)");
  a.Add("--api-key", &so.api_key, "require 'Authorization: Bearer KEY' on /v1/ endpoints");
  a.Add("--max-waiting", &max_waiting,
        "requests queued beyond the running ones; more are refused with 503 + Retry-After");
  a.Add("--max-body", &max_body, "largest request body (413 beyond it), e.g. 1MiB");
  a.Add("--http-threads", &so.http_threads, "HTTP handler threads (requests in flight at once)");
  a.Add("-a,--alias,--model-id", &so.model_id,
        "model name in /v1/models and in responses (default: the file's name)");
  RegisterChatTemplateFlag(a, &chat_template);
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (ef.model.empty()) {
    return Fail(absl::InvalidArgumentError("-m MODEL is required (see --help)"));
  }
  if (max_waiting < 1) return Fail(absl::InvalidArgumentError("--max-waiting must be >= 1"));
  if (so.port < 0 || so.port > 65535) {
    return Fail(absl::InvalidArgumentError("--port must be 0..65535"));
  }
  if (so.http_threads < 2) return Fail(absl::InvalidArgumentError("--http-threads must be >= 2"));
  auto body_bytes = ParseBytes(max_body);
  if (!body_bytes.ok()) return Fail(body_bytes.status());
  so.max_body = static_cast<size_t>(*body_bytes);
  if (so.model_id.empty()) so.model_id = BaseName(ef.model);
  auto config = ef.ToConfig();
  if (!config.ok()) return Fail(config.status());
  config->max_waiting = max_waiting;

  auto loaded = LoadEngine(ef, *config);
  if (!loaded.ok()) return Fail(loaded.status());
  auto tmpl = ResolveChatTemplate(chat_template, loaded->model->tokenizer());
  if (!tmpl.ok()) return Fail(tmpl.status(), 2);
  so.chat_template = tmpl->tmpl;

  // SIGINT / SIGTERM end the server from a thread of their own (httplib's stop() is not
  // async-signal-safe); a client that vanishes mid-write must not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  server::OpenAiServer srv(*loaded->engine, so);
  std::fprintf(stderr, "chat template: %s (%s)\n", server::ChatTemplateName(srv.chat_template()),
               tmpl->source.c_str());
  auto port = srv.Bind();
  if (!port.ok()) return Fail(port.status());
  std::fprintf(stderr, "serving %s on http://%s:%d (OpenAI API under /v1; /health, /metrics)\n",
               so.model_id.c_str(), so.host.c_str(), *port);
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) std::fprintf(stderr, "signal %d: stopping\n", sig);
    srv.Stop();
  });
  srv.Listen();
  // Listen also returns on its own (socket error): wake the signal thread to end it.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  return 0;
}

}  // namespace pinfer::cli

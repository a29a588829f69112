// The OpenAI request fields through an in-process server (stories260K), each checked for its
// effect against what the engine saw: logprobs equal the log-softmax of the raw logits the
// engine computed (to 1e-4, both shapes); penalties pick the argmax of the raw logits
// penalised by their formula; logit_bias -100 bans a token; seeds; a list of prompts numbered
// as OpenAI numbers them; echo; cached prompt tokens; unknown fields named in a header; the
// served model's id, random ids, a system fingerprint; /tokenize and /detokenize; CORS; and
// /metrics parsed by the Prometheus text-format rules, with vLLM's names and histograms.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>
#include <utility>

#include "engine/model/model.h"
#include "nlohmann/json.hpp"
#include "server/openai_server.h"
#include "server/response_json.h"
#include "tests/server/http_client.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/test_models.h"

namespace pinfer::server {
namespace {

using json = nlohmann::json;

class ServerFieldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::signal(SIGPIPE, SIG_IGN);
    const std::string path = testing::ModelPath("stories260K.gguf");
    if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under " << testing::ModelsDir();
    auto model = Model::Load(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    EngineConfig c;
    c.max_model_len = 256;
    c.max_num_seqs = 8;
    c.threads = 2;
    c.kv_cache_memory = 8 << 20;
    auto engine = Engine::Create(*model_, c, nullptr, /*quiet=*/true);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    // Set before the engine thread starts: it is then called on that thread only.
    engine_->SetLogitsObserver([this](int64_t, int, const float* l, int n) {
      std::function<void()> hold;
      {
        std::lock_guard<std::mutex> lock(mu_);
        rows_.emplace_back(l, l + n);
        hold = std::exchange(hold_, nullptr);  // once: a test holding the engine thread
      }
      if (hold) hold();
    });
    ServerOptions so;
    so.port = 0;
    so.model_id = "stories-served";
    so.allowed_origins = {"http://ok.test"};
    server_ = std::make_unique<OpenAiServer>(*engine_, so);
    auto port = server_->Bind();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    listener_ = std::thread([this] { server_->Listen(); });
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (listener_.joinable()) listener_.join();
    server_.reset();
  }

  pinfer::testing::HttpReply Post(const std::string& path, const json& body) {
    return pinfer::testing::HttpClient(port_).Post(path, body.dump());
  }
  // A request's JSON answer, with the logits rows the engine saw while making it.
  json Complete(const std::string& path, const json& body,
                std::vector<std::vector<float>>* rows = nullptr) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      rows_.clear();
    }
    auto res = Post(path, body);
    EXPECT_EQ(res.status, 200) << res.body << res.error;
    std::lock_guard<std::mutex> lock(mu_);
    if (rows) *rows = rows_;
    return json::parse(res.body, nullptr, false);
  }
  // The id of a token text as TokenText writes it: a vocabulary piece rather than the byte
  // token of the same text (the model emits "," as the piece, not as <0x2C>).
  int32_t IdOf(const std::string& text) {
    const Tokenizer& tok = model_->tokenizer();
    const std::vector<TokenType>& types = tok.spec().types;
    int32_t found = -1;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (TokenText(tok, id) != text) continue;
      if (types.empty() || types[static_cast<size_t>(id)] != TokenType::kByte) return id;
      if (found < 0) found = id;
    }
    if (found < 0) ADD_FAILURE() << "no token '" << text << "'";
    return found;
  }
  std::vector<int32_t> Ids(const json& logprobs_tokens) {
    std::vector<int32_t> ids;
    for (const json& t : logprobs_tokens) ids.push_back(IdOf(t.get<std::string>()));
    return ids;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<OpenAiServer> server_;
  std::thread listener_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::vector<float>> rows_;  // guarded by mu_
  std::function<void()> hold_;            // guarded by mu_; run once inside the next step
  std::promise<void> gate_;
};

double LogSoftmax(const std::vector<float>& row, int32_t t) {
  double mx = row[0], sum = 0;
  for (float v : row) mx = std::max<double>(mx, v);
  for (float v : row) sum += std::exp(v - mx);
  return row[static_cast<size_t>(t)] - mx - std::log(sum);
}

TEST_F(ServerFieldsTest, LogprobsAreTheLogSoftmaxOfTheEnginesLogits) {
  std::vector<std::vector<float>> rows;
  json r = Complete("/v1/completions",
                    {{"prompt", "Once upon a time"},
                     {"max_tokens", 8},
                     {"temperature", 0},
                     {"logprobs", 3},
                     {"frequency_penalty", 0.5}},
                    &rows);
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 8u) << r;
  ASSERT_EQ(rows.size(), 8u);
  const std::vector<int32_t> ids = Ids(lp["tokens"]);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), LogSoftmax(rows[i], ids[i]), 1e-4);
    EXPECT_GE(lp["top_logprobs"][i].size(), 3u);
    EXPECT_LE(lp["top_logprobs"][i].size(), 4u);
    for (auto it = lp["top_logprobs"][i].begin(); it != lp["top_logprobs"][i].end(); ++it) {
      EXPECT_NEAR(it.value().get<double>(), LogSoftmax(rows[i], IdOf(it.key())), 1e-4);
    }
  }
  // The tokens' texts add up to the completion's, and the offsets count them.
  std::string joined;
  for (const json& t : lp["tokens"]) joined += t.get<std::string>();
  EXPECT_EQ(joined, r["choices"][0]["text"]);
  EXPECT_EQ(lp["text_offset"][1], lp["tokens"][0].get<std::string>().size());

  json chat = Complete("/v1/chat/completions",
                       {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                        {"max_tokens", 6},
                        {"temperature", 0},
                        {"logprobs", true},
                        {"top_logprobs", 2}},
                       &rows);
  const json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), rows.size()) << chat;
  for (size_t i = 0; i < content.size(); ++i) {
    const int32_t id = IdOf(content[i]["token"]);
    EXPECT_NEAR(content[i]["logprob"].get<double>(), LogSoftmax(rows[i], id), 1e-4);
    ASSERT_EQ(content[i]["top_logprobs"].size(), 2u);
    EXPECT_TRUE(content[i]["bytes"].is_array());
  }
}

// Greedy with penalties: each token is the argmax of the raw row penalised by the formula.
template <typename Penalise>
void ExpectPenalisedArgmax(const std::vector<int32_t>& prompt, const std::vector<int32_t>& out,
                           const std::vector<std::vector<float>>& rows, Penalise penalise) {
  ASSERT_EQ(out.size(), rows.size());
  std::vector<int32_t> history = prompt;
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<float> s = rows[i];
    penalise(history, prompt.size(), &s);
    EXPECT_EQ(out[i], std::max_element(s.begin(), s.end()) - s.begin()) << "token " << i;
    history.push_back(out[i]);
  }
}

TEST_F(ServerFieldsTest, PenaltiesChangeTheGreedyTextAsTheirFormulaSays) {
  const std::string prompt = "Once upon a time";
  const std::vector<int32_t> prompt_ids = model_->tokenizer().Encode(prompt, true);
  json base = {{"prompt", prompt}, {"max_tokens", 40}, {"temperature", 0}, {"logprobs", 0}};
  const json plain = Complete("/v1/completions", base);
  std::vector<std::vector<float>> rows;
  json freq = base;
  freq["frequency_penalty"] = 1.0;
  freq["presence_penalty"] = 0.5;
  json r = Complete("/v1/completions", freq, &rows);
  EXPECT_NE(r["choices"][0]["text"], plain["choices"][0]["text"]);
  ExpectPenalisedArgmax(prompt_ids, Ids(r["choices"][0]["logprobs"]["tokens"]), rows,
                        [](const std::vector<int32_t>& h, size_t np, std::vector<float>* s) {
                          std::map<int32_t, int> count;
                          for (size_t i = np; i < h.size(); ++i) ++count[h[i]];
                          for (auto [t, c] : count) (*s)[t] -= 1.0f * c + 0.5f;
                        });
  // repetition_penalty (vLLM: the whole sequence) and repeat_penalty (llama.cpp: last 64).
  for (const char* field : {"repetition_penalty", "repeat_penalty"}) {
    json rep = base;
    rep[field] = 1.8;
    json got = Complete("/v1/completions", rep, &rows);
    EXPECT_NE(got["choices"][0]["text"], plain["choices"][0]["text"]) << field;
    const size_t window = std::string(field) == "repeat_penalty" ? 64 : SIZE_MAX;
    ExpectPenalisedArgmax(prompt_ids, Ids(got["choices"][0]["logprobs"]["tokens"]), rows,
                          [window](const std::vector<int32_t>& h, size_t, std::vector<float>* s) {
                            std::set<int32_t> seen(h.end() - (ptrdiff_t)std::min(window, h.size()),
                                                   h.end());
                            for (int32_t t : seen)
                              (*s)[t] = (*s)[t] > 0 ? (*s)[t] / 1.8f : (*s)[t] * 1.8f;
                          });
  }
}

TEST_F(ServerFieldsTest, LogitBiasMinus100BansAToken) {
  json base = {
      {"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}, {"logprobs", 0}};
  const json plain = Complete("/v1/completions", base);
  const std::string banned = plain["choices"][0]["logprobs"]["tokens"][0];
  json ban = base;
  ban["logit_bias"] = {{std::to_string(IdOf(banned)), -100}};
  const json r = Complete("/v1/completions", ban);
  for (const json& t : r["choices"][0]["logprobs"]["tokens"]) EXPECT_NE(t, banned);
  EXPECT_NE(r["choices"][0]["text"], plain["choices"][0]["text"]);
}

TEST_F(ServerFieldsTest, SeedlessRequestsDifferSeededOnesRepeat) {
  json body = {{"prompt", "The dog"}, {"max_tokens", 48}, {"temperature", 1.0}};
  const json a = Complete("/v1/completions", body), b = Complete("/v1/completions", body);
  EXPECT_NE(a["choices"][0]["text"], b["choices"][0]["text"]);
  body["seed"] = 1234;
  const json c = Complete("/v1/completions", body), d = Complete("/v1/completions", body);
  EXPECT_EQ(c["choices"][0]["text"], d["choices"][0]["text"]);
}

TEST_F(ServerFieldsTest, MaxCompletionTokensCapsTheReplyAndWinsOverMaxTokens) {
  const json messages = {{{"role", "user"}, {"content", "Tell me a story."}}};
  // ignore_eos: the reply runs to its cap, so the cap is what the count shows.
  for (const auto& [path, body] :
       {std::pair<std::string, json>{"/v1/chat/completions",
                                     {{"messages", messages}, {"max_completion_tokens", 3}}},
        std::pair<std::string, json>{"/v1/completions",
                                     {{"prompt", "Once upon"}, {"max_completion_tokens", 5}}},
        std::pair<std::string, json>{
            "/v1/chat/completions",
            {{"messages", messages}, {"max_tokens", 12}, {"max_completion_tokens", 4}}}}) {
    json b = body;
    b["ignore_eos"] = true;
    b["temperature"] = 0;
    const json r = Complete(path, b);
    EXPECT_EQ(r["usage"]["completion_tokens"], b["max_completion_tokens"]) << path << " " << r;
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length") << r;
  }
}

TEST_F(ServerFieldsTest, AListOfPromptsEchoAndTheResponseHead) {
  const json r = Complete("/v1/completions", {{"prompt", {"Once upon a time", "The dog"}},
                                              {"n", 2},
                                              {"max_tokens", 6},
                                              {"seed", 5},
                                              {"model", "whatever-the-client-says"}});
  ASSERT_EQ(r["choices"].size(), 4u) << r;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r["choices"][i]["index"], i);
  // Choice 2 is the second prompt's first completion: the same as that prompt alone.
  const json alone =
      Complete("/v1/completions", {{"prompt", "The dog"}, {"max_tokens", 6}, {"seed", 5}});
  EXPECT_EQ(r["choices"][2]["text"], alone["choices"][0]["text"]);
  EXPECT_EQ(r["model"], "stories-served");
  EXPECT_TRUE(std::regex_match(r["id"].get<std::string>(), std::regex("cmpl-[0-9a-f]{32}")));
  EXPECT_NE(r["id"], alone["id"]);
  EXPECT_EQ(r["system_fingerprint"], alone["system_fingerprint"]);
  EXPECT_EQ(r["system_fingerprint"].get<std::string>().rfind("fp_", 0), 0u);
  // Echo: the prompt's text, then the completion, which continues it (its space kept).
  const json plain =
      Complete("/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 5}, {"temperature", 0}});
  const json echo =
      Complete("/v1/completions",
               {{"prompt", "Once upon"}, {"max_tokens", 5}, {"temperature", 0}, {"echo", true}});
  EXPECT_EQ(plain["choices"][0]["text"].get<std::string>().rfind(" a time", 0), 0u) << plain;
  EXPECT_EQ(echo["choices"][0]["text"],
            "Once upon" + plain["choices"][0]["text"].get<std::string>());
}

TEST_F(ServerFieldsTest, CachedPromptTokensAndIgnoredFields) {
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends and her dog.";
  json body = {{"prompt", prompt},
               {"max_tokens", 2},
               {"temperature", 0},
               {"metadata", {{"a", 1}}},
               {"frobnicate", true}};
  auto first = Post("/v1/completions", body);
  EXPECT_EQ(first.Header("x-ignored-fields"), "frobnicate, metadata");
  auto second = Post("/v1/completions", body);
  const json a = json::parse(first.body), b = json::parse(second.body);
  EXPECT_EQ(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const int cached = b["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, 16) << b;  // whole blocks of 16 tokens, at least one left to compute
  EXPECT_LT(cached, b["usage"]["prompt_tokens"].get<int>());
}

TEST_F(ServerFieldsTest, TokenizeAndDetokenize) {
  const json t = Complete("/tokenize", {{"content", "Once upon a time"}, {"add_special", true}});
  const std::vector<int32_t> want = model_->tokenizer().Encode("Once upon a time", true);
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), want);
  const json pieces = Complete("/tokenize", {{"content", "Once"}, {"with_pieces", true}});
  EXPECT_EQ(pieces["tokens"][0]["piece"], " Once") << pieces;
  const json d = Complete("/detokenize", {{"tokens", want}});
  EXPECT_EQ(d["content"], "Once upon a time");
  EXPECT_EQ(Post("/detokenize", {{"tokens", {100000}}}).status, 400);
}

TEST_F(ServerFieldsTest, CorsForTheAllowedOriginOnly) {
  pinfer::testing::HttpClient cli(port_);
  auto pre = cli.Send("OPTIONS", "/v1/chat/completions", "",
                      {{"Origin", "http://ok.test"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(pre.status, 204) << pre.body;
  EXPECT_EQ(pre.Header("access-control-allow-origin"), "http://ok.test");
  EXPECT_NE(pre.Header("access-control-allow-methods").find("POST"), std::string::npos);
  auto other = cli.Get("/v1/models", {{"Origin", "http://evil.test"}});
  EXPECT_EQ(other.status, 200);
  EXPECT_EQ(other.Header("access-control-allow-origin"), "");
  auto evil_pre = cli.Send("OPTIONS", "/v1/models", "", {{"Origin", "http://evil.test"}});
  EXPECT_NE(evil_pre.status, 204);
  auto allowed = cli.Get("/v1/models", {{"Origin", "http://ok.test"}});
  EXPECT_EQ(allowed.Header("access-control-allow-origin"), "http://ok.test");
}

TEST_F(ServerFieldsTest, ARequestsOwnFaultsAreAnsweredWithoutWaitingForTheEngine) {
  // The engine thread is held inside a step (its logits observer waits on a gate) while a
  // request too long for the context comes in: its 400 arrives before the gate opens.
  std::promise<void> in_step;
  std::shared_future<void> open = gate_.get_future().share();
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = [&] {
      in_step.set_value();
      open.wait();
    };
  }
  std::thread busy([&] {
    Post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}, {"temperature", 0}});
  });
  in_step.get_future().wait();
  auto bad = Post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 100000}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("max_model_len"), std::string::npos);
  gate_.set_value();
  busy.join();
}

TEST_F(ServerFieldsTest, MetricsFollowThePrometheusTextFormat) {
  for (int i = 0; i < 3; ++i) {
    Complete("/v1/completions", {{"prompt", "The cat"}, {"max_tokens", 8}, {"temperature", 0}});
  }
  // The page shows the engine thread's last publication: wait for the third request's end.
  std::string page;
  for (int i = 0; i < 100; ++i) {
    page = pinfer::testing::HttpClient(port_).Get("/metrics").body;
    if (page.find("vllm:e2e_request_latency_seconds_count{model_name=\"stories-served\"} 3") !=
        std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::map<std::string, testing::PromFamily> fams;
  std::string error;
  ASSERT_TRUE(testing::ParsePrometheusText(page, &fams, &error)) << error << "\n" << page;
  const std::map<std::string, std::string> types = {
      {"vllm:num_requests_running", "gauge"},
      {"vllm:num_requests_waiting", "gauge"},
      {"vllm:kv_cache_usage_perc", "gauge"},
      {"vllm:prompt_tokens_total", "counter"},
      {"vllm:generation_tokens_total", "counter"},
      {"vllm:num_preemptions_total", "counter"},
      {"vllm:request_success_total", "counter"},
      {"vllm:time_to_first_token_seconds", "histogram"},
      {"vllm:inter_token_latency_seconds", "histogram"},
      {"vllm:e2e_request_latency_seconds", "histogram"},
      {"vllm:request_queue_time_seconds", "histogram"},
  };
  for (const auto& [name, type] : types) {
    ASSERT_TRUE(fams.count(name)) << name;
    EXPECT_EQ(fams[name].type, type) << name;
    for (const auto& s : fams[name].samples) EXPECT_EQ(s.labels.at("model_name"), "stories-served");
  }
  // The project's own figures beside them.
  for (const char* name : {"pagedinfer_kv_blocks_used", "pagedinfer_kv_blocks_capacity",
                           "pagedinfer_ledger_bytes", "pagedinfer_http_requests_total"}) {
    EXPECT_TRUE(fams.count(name)) << name;
  }
  auto value = [&](const std::string& fam, const std::string& sample,
                   const std::map<std::string, std::string>& extra = {}) {
    for (const auto& s : fams[fam].samples) {
      bool match = s.name == sample;
      for (const auto& [k, v] : extra) match &= s.labels.count(k) && s.labels.at(k) == v;
      if (match) return s.value;
    }
    return -1.0;
  };
  // Three requests of 8 tokens: three first tokens, 3 x 7 gaps, three finished by length.
  EXPECT_EQ(value("vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count"), 3);
  EXPECT_EQ(value("vllm:inter_token_latency_seconds", "vllm:inter_token_latency_seconds_count"),
            21);
  EXPECT_EQ(value("vllm:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds_count"), 3);
  EXPECT_EQ(value("vllm:request_queue_time_seconds", "vllm:request_queue_time_seconds_count"), 3);
  EXPECT_EQ(value("vllm:request_success_total", "vllm:request_success_total",
                  {{"finished_reason", "length"}}),
            3);
  EXPECT_EQ(value("vllm:generation_tokens_total", "vllm:generation_tokens_total"), 24);
}

}  // namespace
}  // namespace pinfer::server

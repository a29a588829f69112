// bench-serve's HTTP client against a test double of an OpenAI-compatible server
// (fake_openai_server.h, on a free 127.0.0.1 port): streams are timed and counted; refusals
// (503, 429), streams cut mid-way, error events and a silent server are failed requests
// with their errors, and the run still finishes every request.
#include <limits>
#include <map>
#include <string>

#include "bench/serve/client.h"
#include "bench/serve/requests.h"
#include "bench/serve/server_api.h"
#include "bench/serve/stats.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/bench/serve/fake_openai_server.h"

namespace pinfer::bench_serve {
namespace {

using testing::FakeAnswer;
using testing::FakeOpenAiServer;

std::vector<BenchRequest> Requests(int n, double gap_s = 0) {
  std::vector<BenchRequest> out(n);
  for (int i = 0; i < n; ++i) {
    out[i].prompt_ids = {5, 6, 7};
    out[i].prompt_len = 3;
    out[i].output_len = 4;
    out[i].arrival_s = gap_s * i;
  }
  return out;
}

ClientOptions Options(const FakeOpenAiServer& s) {
  ClientOptions o;
  o.url = *ParseBaseUrl(s.url());
  o.model = "fake-model";
  o.request_timeout_s = 10;
  return o;
}

TEST(ServeClient, StreamsAreTimedAndCounted) {
  FakeOpenAiServer fake([](int) { return FakeAnswer::kStream; }, /*tokens=*/4, /*gap_ms=*/20);
  int calls = 0;
  Progress last;
  auto run = RunBenchmark(
      Options(fake), Requests(6, 0.01), /*max_concurrency=*/2,
      [&](const Progress& p) { ++calls, last = p; }, 0.01);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->results.size(), 6u);
  for (const RequestResult& r : run->results) {
    EXPECT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, 4);
    EXPECT_TRUE(r.usage_seen);
    EXPECT_EQ(r.chunks, 4);
    EXPECT_EQ(r.itl_s.size(), 3u);
    EXPECT_GT(r.ttft_s, 0);
    EXPECT_GE(r.latency_s, r.ttft_s);
    // Each event is timed when it arrives, not when the body ends: 60 ms of the double's
    // pauses cannot all vanish (a client that read the whole body first measures 0 gaps).
    EXPECT_GT(r.itl_s[0] + r.itl_s[1] + r.itl_s[2], 0.0);
    EXPECT_LT(r.ttft_s, r.latency_s);
  }
  EXPECT_LE(run->peak_in_flight, 2);
  EXPECT_GT(run->duration_s, 0);
  EXPECT_GE(calls, 1);
  EXPECT_EQ(last.finished, 6);
  EXPECT_EQ(last.failed, 0);
  const BenchMetrics m = ComputeMetrics(run->results, run->duration_s, {99});
  EXPECT_EQ(m.completed, 6);
  EXPECT_EQ(m.total_output_tokens, 24);
  // The body a server gets: vLLM's fields, a token-id prompt, streaming with usage.
  const auto body = nlohmann::json::parse(fake.bodies().at(0));
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["prompt"], nlohmann::json({5, 6, 7}));
  EXPECT_EQ(body["max_tokens"], 4);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["temperature"], 0.0);
}

TEST(ServeClient, RefusalsAndBrokenStreamsAreFailuresWithTheirErrors) {
  // Connection i gets answer i % 5, whichever request it carries: exact counts per kind.
  FakeOpenAiServer fake([](int i) {
    constexpr FakeAnswer kCycle[] = {FakeAnswer::kStream, FakeAnswer::kRefuse503,
                                     FakeAnswer::kCutMidStream, FakeAnswer::kErrorEvent,
                                     FakeAnswer::kRefuse429};
    return kCycle[i % 5];
  });
  auto run = RunBenchmark(Options(fake), Requests(20), /*max_concurrency=*/0, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(fake.completions(), 20);
  std::map<std::string, int> kinds;
  for (const RequestResult& r : run->results) {
    if (r.success) {
      ++kinds["ok"];
    } else if (r.error.find("HTTP 503: the queue is full (server_overloaded)") == 0) {
      ++kinds["503"];
    } else if (r.error.find("HTTP 429") == 0) {
      ++kinds["429"];
    } else if (r.error.find("the stream broke after 2 chunks") == 0) {
      ++kinds["cut"];
    } else if (r.error.find("error event mid-stream: the engine failed") == 0) {
      ++kinds["event"];
    } else {
      ADD_FAILURE() << "unexpected error: " << r.error;
    }
  }
  EXPECT_EQ(kinds, (std::map<std::string, int>{
                       {"ok", 4}, {"503", 4}, {"429", 4}, {"cut", 4}, {"event", 4}}));
  const BenchMetrics m = ComputeMetrics(run->results, run->duration_s, {99});
  EXPECT_EQ(m.completed, 4);
  EXPECT_EQ(m.failed, 16);
}

TEST(ServeClient, SilentServerTimesOutAndUnreachableServerFails) {
  FakeOpenAiServer fake([](int) { return FakeAnswer::kSilent; });
  ClientOptions o = Options(fake);
  o.request_timeout_s = 0.2;
  auto run = RunBenchmark(o, Requests(2), 0, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  for (const RequestResult& r : run->results) {
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("no data for 0.2 s"), std::string::npos) << r.error;
  }
  ClientOptions closed = o;
  closed.url.port = "1";  // nothing listens on port 1
  auto refused = RunBenchmark(closed, Requests(3), 0, nullptr);
  ASSERT_TRUE(refused.ok());
  for (const RequestResult& r : refused->results) {
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("cannot connect"), std::string::npos) << r.error;
  }
}

TEST(ServeClient, ModelIdAndTokenizerFromTheServer) {
  FakeOpenAiServer fake([](int) { return FakeAnswer::kStream; });
  const BaseUrl url = *ParseBaseUrl(fake.url());
  auto id = FirstModelId(url, "");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "fake-model");
  TokenizeFn tok = ServerTokenizer(url, "");
  auto ids = tok("one two three", true);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->size(), 4u);  // BOS + a token per word (the double's rule)
  // Text prompts fitted through /tokenize: the double counts words, so lengths are exact.
  auto reqs = BuildRequests({{10, 2}, {25, 2}}, {0, 0}, {PromptKind::kText, 0}, tok, 3);
  ASSERT_TRUE(reqs.ok()) << reqs.status();
  EXPECT_EQ((*reqs)[0].prompt_len, 10);
  EXPECT_EQ((*reqs)[1].prompt_len, 25);
  EXPECT_EQ(
      ParseTokenizeReply(R"({"tokens":[{"id":1,"piece":"<s>"},{"id":9,"piece":"a"}]})")->at(1), 9);
  EXPECT_FALSE(ParseTokenizeReply(R"({"ids":[1]})").ok());
}

TEST(ServeClient, ReadyCheckWaitsForTheModelList) {
  FakeOpenAiServer fake([](int) { return FakeAnswer::kStream; });
  fake.set_loading(3);  // three 503 "Loading model" answers, then 200
  const BaseUrl url = *ParseBaseUrl(fake.url());
  EXPECT_TRUE(WaitUntilReady(url, "", /*timeout_s=*/30, /*poll_s=*/0.01).ok());
  EXPECT_EQ(fake.model_lists(), 4);

  FakeOpenAiServer loading([](int) { return FakeAnswer::kStream; });
  loading.set_loading(1000000);
  absl::Status late = WaitUntilReady(*ParseBaseUrl(loading.url()), "", 0.2, 0.01);
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_NE(late.message().find("HTTP 503"), std::string::npos) << late;
  EXPECT_NE(late.message().find("Loading model"), std::string::npos) << late;

  BaseUrl closed = url;
  closed.port = "1";  // nothing listens on port 1
  absl::Status down = WaitUntilReady(closed, "", 0.2, 0.01);
  EXPECT_EQ(down.code(), absl::StatusCode::kDeadlineExceeded) << down;
  EXPECT_NE(down.message().find("cannot connect"), std::string::npos) << down;
}

}  // namespace
}  // namespace pinfer::bench_serve

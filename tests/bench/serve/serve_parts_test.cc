// bench-serve's small pieces, each against hand-worked cases: the SSE parser (fed in every
// split), percentiles and the metrics (vLLM's formulas), the seeded workload, prompts fitted
// with a tokenizer, base URLs, stream events and the report's keys.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bench/serve/compare.h"
#include "bench/serve/events.h"
#include "bench/serve/prompts.h"
#include "bench/serve/report.h"
#include "bench/serve/requests.h"
#include "bench/serve/sse.h"
#include "bench/serve/stats.h"
#include "bench/serve/url.h"
#include "bench/serve/workload.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pinfer::bench_serve {
namespace {

std::vector<std::string> ParseAll(const std::vector<std::string>& pieces) {
  SseParser p;
  std::vector<std::string> out;
  auto on = [&](std::string_view d) { out.emplace_back(d); };
  for (const std::string& s : pieces) p.Feed(s, on);
  p.Finish(on);
  return out;
}

TEST(SseParser, EventsInAnySplit) {
  const std::string stream =
      ": keep-alive\n\ndata: {\"a\":1}\n\nevent: x\r\ndata: two\r\ndata: lines\r\n\r\n"
      "id: 3\ndata:nospace\n\ndata: [DONE]\n\n";
  const std::vector<std::string> want = {"{\"a\":1}", "two\nlines", "nospace", "[DONE]"};
  EXPECT_EQ(ParseAll({stream}), want);
  for (size_t cut = 0; cut <= stream.size(); ++cut) {  // every split in two
    EXPECT_EQ(ParseAll({stream.substr(0, cut), stream.substr(cut)}), want) << cut;
  }
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(ParseAll(bytes), want);
}

TEST(SseParser, LoneCrEndsLinesAndFinishFlushes) {
  EXPECT_EQ(ParseAll({"data: a\r\rdata: b"}), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ParseAll({"data: a\n", "\n", "data:"}), (std::vector<std::string>{"a", ""}));
  EXPECT_TRUE(ParseAll({": only a comment\n\n", "retry: 5\n\n"}).empty());
}

TEST(Stats, PercentileInterpolatesLikeNumpy) {
  const std::vector<double> xs = {4, 1, 3, 2};  // sorted 1 2 3 4
  EXPECT_DOUBLE_EQ(Percentile(xs, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(xs, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(Percentile(xs, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_EQ(Percentile({}, 99), 0);
}

TEST(Stats, MetricsFollowVllm) {
  RequestResult a;  // 5 tokens: ttft 0.1, latency 0.5 -> tpot 0.1
  a.success = true;
  a.prompt_len = 10;
  a.output_tokens = 5;
  a.ttft_s = 0.1;
  a.latency_s = 0.5;
  a.itl_s = {0.1, 0.1, 0.1, 0.1};
  a.usage_seen = true;
  RequestResult b = a;  // 1 token: no tpot
  b.output_tokens = 1;
  b.ttft_s = 0.3;
  b.latency_s = 0.3;
  b.itl_s = {};
  RequestResult failed;
  failed.error = "HTTP 503";
  failed.prompt_len = 100;
  const BenchMetrics m = ComputeMetrics({a, b, failed}, 2.0, {50, 99});
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input_tokens, 20);  // the failed request's prompt is not counted
  EXPECT_EQ(m.total_output_tokens, 6);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 3.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 13.0);
  EXPECT_NEAR(m.ttft.mean, 200, 1e-9);
  EXPECT_NEAR(m.ttft.std, 100, 1e-9);  // population std of 100 and 300 ms
  EXPECT_NEAR(m.ttft.percentiles[1], 298, 1e-9);
  EXPECT_NEAR(m.tpot.mean, 100, 1e-9);  // only a: (0.5 - 0.1) / 4
  EXPECT_NEAR(m.itl.median, 100, 1e-9);
  EXPECT_NEAR(m.e2el.mean, 400, 1e-9);
  EXPECT_EQ(m.requests_without_usage, 0);
}

TEST(Workload, SeededUniformWithinBounds) {
  RandomLengths spec;
  spec.input_len = 100;
  spec.output_len = 20;
  spec.range_ratio = 0.5;
  auto a = *RandomLengthPairs(spec, 500, 7), b = *RandomLengthPairs(spec, 500, 7);
  auto c = *RandomLengthPairs(spec, 500, 8);
  bool differs = false;
  int lo = 1 << 30, hi = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt_len, b[i].prompt_len);
    EXPECT_EQ(a[i].output_len, b[i].output_len);
    differs |= a[i].prompt_len != c[i].prompt_len;
    EXPECT_GE(a[i].output_len, 10);
    EXPECT_LE(a[i].output_len, 30);
    lo = std::min(lo, a[i].prompt_len), hi = std::max(hi, a[i].prompt_len);
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(lo, 50);  // 500 draws of 101 values reach both ends
  EXPECT_EQ(hi, 150);
  spec.range_ratio = 0;
  const std::vector<LengthPair> fixed = *RandomLengthPairs(spec, 10, 1);
  for (const LengthPair& p : fixed) EXPECT_EQ(p.prompt_len, 100);
  spec.range_ratio = 1.0;
  EXPECT_FALSE(RandomLengthPairs(spec, 10, 1).ok());
}

TEST(Workload, PoissonArrivals) {
  const std::vector<double> t = PoissonArrivals(20001, 4.0, 3);
  EXPECT_EQ(t[0], 0);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
  EXPECT_NEAR(t.back() / 20000, 0.25, 0.01);  // mean gap 1/rate, seeded: 4% would be 8 sigma
  EXPECT_EQ(PoissonArrivals(20001, 4.0, 3), t);
  const std::vector<double> at_once =
      PoissonArrivals(5, std::numeric_limits<double>::infinity(), 3);
  for (double x : at_once) EXPECT_EQ(x, 0);
  EXPECT_TRUE(std::isinf(*ParseRequestRate("inf")));
  EXPECT_DOUBLE_EQ(*ParseRequestRate("2.5"), 2.5);
  EXPECT_FALSE(ParseRequestRate("0").ok());
  EXPECT_FALSE(ParseRequestRate("fast").ok());
  EXPECT_EQ(*ParsePercentiles("50,90,99.9"), (std::vector<double>{50, 90, 99.9}));
  EXPECT_FALSE(ParsePercentiles("0").ok());
  EXPECT_FALSE(ParsePercentiles("101").ok());
}

TEST(Workload, LengthPairs) {
  auto p = ParseLengthPairs("# prompt output\n10 5\n\n 20,\t7  # comment\n");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[1].prompt_len, 20);
  EXPECT_EQ((*p)[1].output_len, 7);
  auto bad = ParseLengthPairs("10 5\n10\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status();
  EXPECT_FALSE(ParseLengthPairs("10 0\n").ok());
  EXPECT_FALSE(ParseLengthPairs("# nothing\n").ok());
  EXPECT_FALSE(LengthPairsFromFile("/nonexistent/lengths.txt", 3).ok());
}

// A tokenizer double: BOS, then a token per 3 characters of each word (rounded up).
absl::StatusOr<std::vector<int32_t>> ThreeCharTokens(const std::string& text, bool special) {
  std::vector<int32_t> ids;
  if (special) ids.push_back(1);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    for (size_t i = start; i < end; i += 3) ids.push_back(100 + static_cast<int>(i % 7));
    start = end + 1;
  }
  return ids;
}

TEST(Prompts, TextFitsTheTargetInFewCalls) {
  for (int target : {1, 2, 5, 17, 100, 1000}) {
    int calls = 0;
    TokenizeFn tok = [&](const std::string& t, bool s) {
      ++calls;
      return ThreeCharTokens(t, s);
    };
    auto p = FitTextPrompt(tok, 11, 3, target);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->tokens, static_cast<int>(ThreeCharTokens(p->text, true)->size()));
    if (target >= 4) {
      EXPECT_LE(p->tokens, target);
      EXPECT_GE(p->tokens, target - 2);  // a word is at most 3 tokens here
      auto again = FitTextPrompt(tok, 11, 3, target);
      EXPECT_EQ(again->text, p->text);  // seeded: the same words again
    }
    EXPECT_LE(calls, 2 * (3 + static_cast<int>(std::log2(target + 1)) * 2)) << target;
  }
  TokenizeFn broken = [](const std::string&, bool) -> absl::StatusOr<std::vector<int32_t>> {
    return absl::NotFoundError("no /tokenize");
  };
  EXPECT_FALSE(FitTextPrompt(broken, 1, 0, 10).ok());
}

TEST(Prompts, IdsFromAPoolSeeded) {
  auto pool = VocabPool(512);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->front(), 3);
  EXPECT_EQ(pool->back(), 511);
  EXPECT_FALSE(VocabPool(3).ok());
  const auto a = IdsPrompt(*pool, 5, 0, 64), b = IdsPrompt(*pool, 5, 0, 64);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, IdsPrompt(*pool, 5, 1, 64));
  for (int32_t id : a) EXPECT_TRUE(id >= 3 && id < 512);
  auto from_tok = TokenizerPool(ThreeCharTokens, 5);
  ASSERT_TRUE(from_tok.ok());
  EXPECT_EQ(from_tok->front(), 100);  // no BOS: add_special is off
  EXPECT_LE(from_tok->size(), 7u);
}

TEST(Requests, BuildIdsAndText) {
  const std::vector<LengthPair> lens = {{8, 2}, {20, 3}};
  const std::vector<double> at = {0, 0.5};
  auto ids = BuildRequests(lens, at, {PromptKind::kIds, 64}, nullptr, 1);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ((*ids)[1].prompt_ids.size(), 20u);
  EXPECT_EQ((*ids)[1].output_len, 3);
  EXPECT_EQ((*ids)[1].arrival_s, 0.5);
  auto text = BuildRequests(lens, at, {PromptKind::kText, 0}, ThreeCharTokens, 1);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE((*text)[0].prompt_ids.empty());
  EXPECT_LE((*text)[0].prompt_len, 8);
  TokenizeFn missing = [](const std::string&, bool) -> absl::StatusOr<std::vector<int32_t>> {
    return absl::NotFoundError("the server has no /tokenize endpoint");
  };
  auto no_tok = BuildRequests(lens, at, {PromptKind::kIds, 0}, missing, 1);
  ASSERT_FALSE(no_tok.ok());
  EXPECT_NE(no_tok.status().message().find("--vocab-size"), std::string::npos);
  EXPECT_FALSE(ParsePromptKind("words").ok());
}

TEST(Url, BaseUrls) {
  auto u = ParseBaseUrl("http://127.0.0.1:8080/v1/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8080");
  EXPECT_EQ(u->Under("/completions"), "/v1/completions");
  EXPECT_EQ(u->ToString(), "http://127.0.0.1:8080/v1");
  auto v6 = ParseBaseUrl("http://[::1]:9000/v1");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->HostHeader(), "[::1]:9000");
  EXPECT_EQ(ParseBaseUrl("http://localhost")->port, "80");
  for (const char* bad : {"https://x/v1", "127.0.0.1:8080/v1", "http://:80/v1", "http://h:0/v1",
                          "http://h:99999", "http://u@h/v1", "http://h/v1?x=1"}) {
    EXPECT_FALSE(ParseBaseUrl(bad).ok()) << bad;
  }
}

TEST(Events, CompletionChunksUsageAndErrors) {
  RequestResult r;
  StreamAccumulator acc(&r, /*chat=*/false);
  EXPECT_TRUE(acc.OnEvent(R"({"choices":[{"text":"a"}]})", 0.2));
  EXPECT_TRUE(acc.OnEvent(R"({"choices":[{"text":""}]})", 0.25));  // no text: no arrival
  EXPECT_TRUE(acc.OnEvent(R"({"choices":[{"text":"b"}],"usage":{"completion_tokens":3}})", 0.3));
  EXPECT_TRUE(acc.OnEvent("[DONE]", 0.3));
  acc.Finish(0.31, "");
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.2);
  ASSERT_EQ(r.itl_s.size(), 1u);
  EXPECT_NEAR(r.itl_s[0], 0.1, 1e-12);
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_TRUE(r.usage_seen);

  RequestResult c;
  StreamAccumulator chat(&c, /*chat=*/true);
  chat.OnEvent(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})", 0.1);
  chat.OnEvent(R"({"choices":[{"delta":{"content":"hi"}}]})", 0.2);
  chat.OnEvent("[DONE]", 0.2);
  chat.Finish(0.2, "");
  EXPECT_TRUE(c.success);
  EXPECT_DOUBLE_EQ(c.ttft_s, 0.2);
  EXPECT_EQ(c.output_tokens, 1);  // no usage: chunks
  EXPECT_FALSE(c.usage_seen);

  RequestResult e;
  StreamAccumulator err(&e, false);
  err.OnEvent(R"({"choices":[{"text":"a"}]})", 0.1);
  EXPECT_FALSE(err.OnEvent(R"({"error":{"message":"out of blocks","type":"server_error"}})", .2));
  err.Finish(0.2, "");
  EXPECT_FALSE(e.success);
  EXPECT_NE(e.error.find("out of blocks"), std::string::npos) << e.error;

  RequestResult cut;
  StreamAccumulator cutacc(&cut, false);
  cutacc.OnEvent(R"({"choices":[{"text":"a"}]})", 0.1);
  cutacc.Finish(0.2, "partial message");
  EXPECT_FALSE(cut.success);
  EXPECT_NE(cut.error.find("broke after 1 chunks"), std::string::npos) << cut.error;

  RequestResult nodone;
  StreamAccumulator nd(&nodone, false);
  nd.OnEvent(R"({"choices":[{"text":"a"}]})", 0.1);
  nd.Finish(0.2, "");
  EXPECT_FALSE(nodone.success);
  EXPECT_NE(nodone.error.find("without [DONE]"), std::string::npos);

  EXPECT_EQ(HttpErrorText(503, R"({"error":{"message":"queue full","type":"server_overloaded"}})"),
            "HTTP 503: queue full (server_overloaded)");
  EXPECT_EQ(HttpErrorText(500, "oops\n"), "HTTP 500: oops ");
}

TEST(Report, JsonKeysAndTextBlock) {
  RequestResult ok;
  ok.success = true;
  ok.prompt_len = 4;
  ok.output_tokens = 3;
  ok.ttft_s = 0.1;
  ok.latency_s = 0.3;
  ok.itl_s = {0.1, 0.1};
  RequestResult bad;
  bad.error = "HTTP 503: full";
  const std::vector<RequestResult> rs = {ok, bad, bad};
  const BenchMetrics m = ComputeMetrics(rs, 1.0, {99.9});
  RunInfo info;
  info.request_rate = std::numeric_limits<double>::infinity();
  info.num_prompts = 3;
  const nlohmann::json j = nlohmann::json::parse(JsonReport(m, info, rs, /*detailed=*/true));
  for (const char* key : {"date",
                          "backend",
                          "model_id",
                          "num_prompts",
                          "request_rate",
                          "max_concurrency",
                          "duration",
                          "completed",
                          "failed",
                          "total_input_tokens",
                          "total_output_tokens",
                          "request_throughput",
                          "output_throughput",
                          "total_token_throughput",
                          "mean_ttft_ms",
                          "median_ttft_ms",
                          "std_ttft_ms",
                          "p99.9_ttft_ms",
                          "mean_tpot_ms",
                          "p99.9_itl_ms",
                          "mean_e2el_ms",
                          "input_lens",
                          "output_lens",
                          "ttfts",
                          "itls",
                          "errors",
                          "error_counts"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_TRUE(j["max_concurrency"].is_null());
  EXPECT_EQ(j["failed"], 2);
  EXPECT_EQ(j["error_counts"]["HTTP 503: full"], 2);
  EXPECT_EQ(j["errors"], nlohmann::json({"", "HTTP 503: full", "HTTP 503: full"}));
  const nlohmann::json brief = nlohmann::json::parse(JsonReport(m, info, rs, false));
  EXPECT_FALSE(brief.contains("itls"));
  EXPECT_TRUE(brief.contains("error_counts"));
  const std::string text = TextReport(m, info, rs);
  for (const char* line :
       {"Successful requests:", "Failed requests:", "Benchmark duration (s):",
        "Output token throughput (tok/s):", "P99.9 TTFT (ms):", "Mean TPOT (ms):",
        "Median ITL (ms):", "Mean E2EL (ms):", "failed: 2 x HTTP 503: full"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

TEST(Compare, TableRatiosAndPlotFromResults) {
  auto point = [](const std::string& label, double rate, double tps, double ttft) {
    RequestResult ok;
    ok.success = true;
    ok.output_tokens = 2;
    ok.ttft_s = ttft;
    ok.latency_s = ttft + 0.1;
    const BenchMetrics m = ComputeMetrics({ok}, 2.0 / tps, {99});
    RunInfo info;
    info.label = label;
    info.request_rate = rate;
    return *RunPointFromJson(JsonReport(m, info, {ok}, /*detailed=*/false));
  };
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<RunPoint> points = {point("ours", 1, 10, 0.1), point("ours", inf, 40, 0.2),
                                        point("theirs", 1, 10, 0.1), point("theirs", inf, 20, 0.8)};
  EXPECT_DOUBLE_EQ(points[1].output_tps, 40);
  EXPECT_TRUE(std::isinf(points[1].rate));
  const std::string md = CompareMarkdown(points);
  EXPECT_NE(md.find("| ours | inf | 1 | 0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| theirs | inf | 2.00x | 0.25x | 0 / 0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| theirs | 1 | 1.00x | 1.00x |"), std::string::npos) << md;
  const std::string svg = CompareSvg(points, "a <title>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("a &lt;title&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">inf</text>"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 10, true);
  EXPECT_FALSE(RunPointFromJson("{}").ok());
  EXPECT_FALSE(RunPointFromJson("not json").ok());
}

}  // namespace
}  // namespace pinfer::bench_serve

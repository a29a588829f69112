// A test double for bench-serve's client tests: a tiny OpenAI-shaped HTTP server on a free
// 127.0.0.1 port (plain POSIX sockets, a thread per connection) whose answer to each
// completion is chosen by the test: a normal stream, a refusal (503 or 429), a stream cut
// mid-way, an error event mid-stream, or silence. It also answers GET /v1/models (with 503
// "Loading model" the first set_loading(k) times, as llama-server does while it loads) and
// POST /tokenize (one token per word after a BOS of 1), so the client's setup calls can be
// tested.
// It is not a server to benchmark: it generates nothing.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pinfer::bench_serve::testing {

enum class FakeAnswer { kStream, kRefuse503, kRefuse429, kCutMidStream, kErrorEvent, kSilent };

class FakeOpenAiServer {
 public:
  // answer(i): what the i-th completion request (0, 1, ... in arrival order) gets.
  // gap_ms: the pause between a stream's events.
  explicit FakeOpenAiServer(std::function<FakeAnswer(int)> answer, int tokens_per_stream = 4,
                            int gap_ms = 2)
      : answer_(std::move(answer)), tokens_(tokens_per_stream), gap_ms_(gap_ms) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int yes = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_fd_, 128);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~FakeOpenAiServer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    acceptor_.join();
    std::vector<std::thread> conns;
    {
      std::lock_guard<std::mutex> l(mu_);
      conns.swap(conns_);
    }
    for (std::thread& t : conns) t.join();
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int completions() const { return completions_; }
  int model_lists() const { return model_lists_; }  // GET /v1/models answered, 503s included
  void set_loading(int k) { loading_ = k; }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> l(mu_);
    return bodies_;
  }

 private:
  void Accept() {
    while (!stop_) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      std::lock_guard<std::mutex> l(mu_);
      conns_.emplace_back([this, fd] { Serve(fd); });
    }
  }
  static bool Send(int fd, const std::string& s) {
    return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  static std::string Chunk(const std::string& s) {
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", s.size());
    return size + s + "\r\n";
  }
  static std::string Event(const std::string& data) { return Chunk("data: " + data + "\n\n"); }
  // Reads one request: its request line + headers, and a Content-Length body.
  static bool ReadRequest(int fd, std::string* head, std::string* body) {
    std::string in;
    char buf[4096];
    size_t end = std::string::npos;
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      in.append(buf, n);
    }
    *head = in.substr(0, end);
    size_t length = 0;
    const size_t cl = head->find("Content-Length: ");
    if (cl != std::string::npos) length = std::stoul(head->substr(cl + 16));
    *body = in.substr(end + 4);
    while (body->size() < length) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      body->append(buf, n);
    }
    return true;
  }
  static std::string Json(int status, const std::string& body) {
    return "HTTP/1.1 " + std::to_string(status) + (status == 200 ? " OK" : " Error") +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n\r\n" + body;
  }
  static std::string Tokenize(const std::string& body) {
    // {"content": "w1 w2 ...", "add_special": b}: 1 (BOS, when add_special) + one per word.
    const size_t c = body.find("\"content\":\"");
    std::string text = c == std::string::npos ? "" : body.substr(c + 11);
    text = text.substr(0, text.find('"'));
    std::string ids = body.find("\"add_special\":true") != std::string::npos ? "1" : "";
    size_t words = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] != ' ' && (i == 0 || text[i - 1] == ' ')) {
        ids += (ids.empty() ? "" : ",") + std::to_string(10 + (words++ % 50));
      }
    }
    return "{\"tokens\":[" + ids + "]}";
  }
  void Serve(int fd) {
    std::string head, body;
    if (ReadRequest(fd, &head, &body)) Answer(fd, head, body);
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
  }
  void Answer(int fd, const std::string& head, const std::string& body) {
    if (head.rfind("GET /v1/models", 0) == 0) {
      if (model_lists_++ < loading_) {
        Send(fd, Json(503, R"({"error":{"message":"Loading model","type":"unavailable_error",)"
                           R"("code":503}})"));
        return;
      }
      Send(fd, Json(200, R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})"));
      return;
    }
    if (head.rfind("POST /tokenize", 0) == 0) {
      Send(fd, Json(200, Tokenize(body)));
      return;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      bodies_.push_back(body);
    }
    const FakeAnswer a = answer_(completions_++);
    if (a == FakeAnswer::kRefuse503 || a == FakeAnswer::kRefuse429) {
      const int status = a == FakeAnswer::kRefuse503 ? 503 : 429;
      Send(fd, Json(status, R"({"error":{"message":"the queue is full","type":)"
                            R"("server_overloaded","param":null,"code":"queue_full"}})"));
      return;
    }
    Send(fd,
         "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
         "chunked\r\nConnection: close\r\n\r\n");
    if (a == FakeAnswer::kSilent) {  // until the client gives up and closes (or 30 s)
      timeval tv{30, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char c;
      while (::recv(fd, &c, 1, 0) > 0) {
      }
      return;
    }
    const int n = a == FakeAnswer::kStream ? tokens_ : 2;
    for (int i = 0; i < n; ++i) {
      Send(fd, Event(R"({"object":"text_completion","choices":[{"index":0,"text":"tok",)"
                     R"("finish_reason":null}]})"));
      std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms_));
    }
    if (a == FakeAnswer::kCutMidStream) return;  // closed without the last chunk
    if (a == FakeAnswer::kErrorEvent) {
      Send(fd, Event(R"({"error":{"message":"the engine failed","type":"server_error"}})"));
      Send(fd, "0\r\n\r\n");
      return;
    }
    Send(fd, Event(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":)" +
                   std::to_string(n) + "}}"));
    Send(fd, Event("[DONE]"));
    Send(fd, "0\r\n\r\n");
  }

  std::function<FakeAnswer(int)> answer_;
  const int tokens_, gap_ms_;
  int listen_fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> completions_{0};
  std::atomic<int> model_lists_{0}, loading_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> conns_;   // guarded by mu_
  std::vector<std::string> bodies_;  // guarded by mu_
};

}  // namespace pinfer::bench_serve::testing

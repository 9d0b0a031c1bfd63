// Shared pieces of the dashboard/API tests: synthetic trend updates and a small blocking HTTP client
// (plain sockets, so a test can also play a client that never reads).
#pragma once

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "stream/trend.h"

namespace surge::stream::web::testing {

inline TrendUpdate MakeUpdate(std::string id, int rank, double heat) {
  TrendUpdate t;
  t.topic_id = std::move(id);
  t.hashtag = fmt::format("#话题{}#", t.topic_id);
  t.rank = rank;
  t.heat = heat;
  t.terms = {"话题", t.topic_id};
  t.category = "科技";
  t.sentiment = {0.5, 0.3, 0.2};
  t.posts = 100 * rank;
  t.authors = 80 * rank;
  t.first_seen_ms = 1000;
  t.samples = {"p-" + t.topic_id};
  return t;
}

// n updates t1..tn ranked 1..n, heat decreasing.
inline std::vector<TrendUpdate> MakeList(int n, double top_heat = 1000) {
  std::vector<TrendUpdate> v;
  for (int i = 1; i <= n; ++i) v.push_back(MakeUpdate("t" + std::to_string(i), i, top_heat / i));
  return v;
}

// Polls `cond` until it holds or `limit` passes (a guard against hangs, not a timing check).
template <typename F>
bool WaitFor(F cond, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class Socket {
 public:
  // Connects to 127.0.0.1:port; rcvbuf > 0 shrinks the receive buffer first (a slow client).
  explicit Socket(int port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    timeval tv{20, 0};  // a read that waits this long fails the test instead of hanging it
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~Socket() { Close(); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool ok() const { return ok_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool Send(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Appends what arrives to `buf`; false on EOF, error or timeout.
  bool ReadSome(std::string* buf) {
    char tmp[16384];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf->append(tmp, static_cast<size_t>(n));
    return true;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

struct Response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::optional<std::string> Header(const std::string& name) const {
    for (const auto& [k, v] : headers) {
      if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
    }
    return std::nullopt;
  }
};

// Parses status line and headers from the front of `buf` (which must hold them all); returns the
// offset of the body, or npos if the head is incomplete.
inline size_t ParseHead(const std::string& buf, Response* r) {
  size_t end = buf.find("\r\n\r\n");
  if (end == std::string::npos) return std::string::npos;
  size_t line_end = buf.find("\r\n");
  r->status = std::stoi(buf.substr(9, 3));
  size_t pos = line_end + 2;
  while (pos < end) {
    size_t e = buf.find("\r\n", pos);
    std::string line = buf.substr(pos, e - pos);
    size_t colon = line.find(':');
    std::string v = line.substr(colon + 1);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    r->headers.emplace_back(line.substr(0, colon), v);
    pos = e + 2;
  }
  return end + 4;
}

// One request on a fresh connection ("Connection: close"); reads to EOF. HEAD responses carry no
// body, whatever Content-Length says.
inline Response Request(int port, const std::string& method, const std::string& target,
                        const std::string& extra_headers = "") {
  Socket s(port);
  Response r;
  if (!s.ok()) return r;
  s.Send(method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" +
         extra_headers + "\r\n");
  std::string buf;
  while (s.ReadSome(&buf)) {
  }
  size_t body = ParseHead(buf, &r);
  if (body != std::string::npos) r.body = buf.substr(body);
  return r;
}

// A server-sent-events client: decodes the chunked body and splits it into events.
class SseClient {
 public:
  struct Event {
    std::string id, event, data;
    std::vector<std::string> comments;
    std::optional<int> retry;
  };

  SseClient(int port, const std::string& extra_headers = "", int rcvbuf = 0)
      : socket_(port, rcvbuf) {
    if (socket_.ok()) {
      socket_.Send(
          "GET /v1/trends/stream HTTP/1.1\r\nHost: localhost\r\nAccept: "
          "text/event-stream\r\n" +
          extra_headers + "\r\n");
    }
  }

  Socket& socket() { return socket_; }
  const Response& head() const { return head_; }

  // Reads until the response head is in; false on EOF/timeout.
  bool ReadHead() {
    while (body_start_ == std::string::npos) {
      if (!socket_.ReadSome(&raw_)) return false;
      body_start_ = ParseHead(raw_, &head_);
      if (body_start_ != std::string::npos) raw_.erase(0, body_start_);
    }
    return true;
  }

  // The next event (or comment/retry-only block); nullopt on EOF, timeout or the last chunk.
  std::optional<Event> Next() {
    if (!ReadHead()) return std::nullopt;
    for (;;) {
      size_t sep = text_.find("\n\n");
      if (sep != std::string::npos) {
        std::string block = text_.substr(0, sep);
        text_.erase(0, sep + 2);
        return ParseBlock(block);
      }
      if (ended_ || !DecodeMore()) return std::nullopt;
    }
  }

  // The next block that is a real event (has data), skipping comments and retry lines.
  std::optional<Event> NextEvent() {
    for (;;) {
      auto e = Next();
      if (!e || !e->data.empty()) return e;
    }
  }

 private:
  // Moves whole chunks from raw_ to text_, reading more when needed.
  bool DecodeMore() {
    for (;;) {
      size_t line = raw_.find("\r\n");
      if (line != std::string::npos) {
        size_t size = std::stoul(raw_.substr(0, line), nullptr, 16);
        if (size == 0) {
          ended_ = true;
          return false;
        }
        if (raw_.size() >= line + 2 + size + 2) {
          text_.append(raw_, line + 2, size);
          raw_.erase(0, line + 2 + size + 2);
          return true;
        }
      }
      if (!socket_.ReadSome(&raw_)) return false;
    }
  }

  static Event ParseBlock(const std::string& block) {
    Event e;
    size_t pos = 0;
    while (pos <= block.size()) {
      size_t nl = block.find('\n', pos);
      std::string line = block.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      if (!line.empty() && line[0] == ':') {
        e.comments.push_back(line.substr(1));
      } else if (line.rfind("id: ", 0) == 0) {
        e.id = line.substr(4);
      } else if (line.rfind("event: ", 0) == 0) {
        e.event = line.substr(7);
      } else if (line.rfind("data: ", 0) == 0) {
        e.data += line.substr(6);
      } else if (line.rfind("retry: ", 0) == 0) {
        e.retry = std::stoi(line.substr(7));
      }
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
    return e;
  }

  Socket socket_;
  Response head_;
  std::string raw_, text_;
  size_t body_start_ = std::string::npos;
  bool ended_ = false;
};

}  // namespace surge::stream::web::testing

// HttpServer: the HTTP/1.1 transport of `gearbox serve` -- listening socket, connection
// threads, strict request framing, keep-alive and pipelining, bounded read times.
//
// Requests are framed by RequestParser (http_request_parser.h: Boost.Beast plus the checks it
// leaves to its caller); every framing error is answered 400 SERVE_HTTP_MALFORMED as soon as its
// bytes arrive.
// A request's header must arrive within header_timeout of its first byte (of the accept for a
// connection's first request) and its body within body_timeout of the header's end; a slower
// client is answered 408 SERVE_CLIENT_TOO_SLOW and disconnected. Pipelined requests are answered
// one after the other, in order, on the same connection. After any framing error the connection
// is closed (its later bytes cannot be trusted to start a request).
//
// The transport knows nothing of KServe: it hands each complete request to the handler and
// turns its own errors into answers through the error renderer, both given by the caller.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "serve/http_request_parser.h"

namespace gearbox::serve {

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;  // answer with "Connection: close" and close the connection after it

  void set_content(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

struct HttpLimits {
  int threads = 32;  // connections served at once; more wait for a thread
  size_t max_body_bytes = 64u << 20;
  size_t max_header_bytes = 64u << 10;
  double header_timeout = 10;     // seconds from a request's first byte to the end of its header
  double body_timeout = 60;       // seconds from the end of the header to the end of the body
  double keep_alive_timeout = 2;  // seconds an idle kept-alive connection waits for a request
};

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  // Fills in the answer to an error the transport found (framing, size, slow client).
  using ErrorRenderer = std::function<void(const Status&, HttpResponse&)>;

  HttpServer(HttpLimits limits, Handler handler, ErrorRenderer render_error);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on host:port (0: any free port); the port listened on, or SERVE_BIND_FAILED.
  Result<int> bind(const std::string& host, int port);
  // Accepts and serves connections until stop(); then serves what the open connections still
  // send (every answer closing its connection) and returns once they are all closed.
  void serve();
  // Stops accepting; safe from any thread, repeatedly.
  void stop();
  bool stopping() const { return stopping_.load(); }

 private:
  void accept_loop();
  void connection_thread();
  void serve_connection(int fd);

  HttpLimits limits_;
  Handler handler_;
  ErrorRenderer render_error_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<int> active_requests_{0};  // in the handler now

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> pending_;  // accepted connections waiting for a thread
  bool accepting_done_ = false;
};

}  // namespace gearbox::serve

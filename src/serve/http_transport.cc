// HttpServer: sockets, connection threads, deadlines; the framing is RequestParser's.
#include "serve/http_transport.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/http/status.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/logging.h"

namespace gearbox::serve {
namespace {

namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int remaining_ms(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 1000 * 1000));
}

enum class ReadResult { Data, Timeout, Closed };

// Appends what the socket has to `buf`, waiting until `deadline` for it.
ReadResult read_some(int fd, std::string& buf, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ReadResult::Closed;
    if (r == 0) return ReadResult::Timeout;
    char chunk[64 * 1024];
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return ReadResult::Closed;
    buf.append(chunk, static_cast<size_t>(n));
    return ReadResult::Data;
  }
}

bool write_all(int fd, const char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    pollfd p{fd, POLLOUT, 0};
    int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Sends our side's FIN and reads what the client still sends for a moment before closing, so
// that unread request bytes do not turn the close into a reset that destroys the answer.
void lingering_close(int fd) {
  ::shutdown(fd, SHUT_WR);
  const auto deadline = after(0.5);
  std::string sink;
  while (read_some(fd, sink, deadline) == ReadResult::Data) sink.clear();
  ::close(fd);
}

std::string serialize_head(const HttpResponse& res, bool close) {
  std::string reason(http::obsolete_reason(static_cast<http::status>(res.status)));
  std::string out = "HTTP/1.1 " + std::to_string(res.status) + " " + reason + "\r\n";
  if (!res.content_type.empty()) out += "Content-Type: " + res.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  for (const auto& [k, v] : res.headers) out += k + ": " + v + "\r\n";
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  return out;
}

}  // namespace

HttpServer::HttpServer(HttpLimits limits, Handler handler, ErrorRenderer render_error)
    : limits_(limits), handler_(std::move(handler)), render_error_(std::move(render_error)) {}

HttpServer::~HttpServer() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

Result<int> HttpServer::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return make_error(ErrorCode::SERVE_BIND_FAILED, "cannot resolve '", host, "': ", gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) return make_error(ErrorCode::SERVE_BIND_FAILED, "cannot listen on ", host, ":", port, ": ", why);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

void HttpServer::stop() { stopping_ = true; }

void HttpServer::serve() {
  std::vector<std::thread> threads;
  for (int i = 0; i < std::max(1, limits_.threads); ++i) threads.emplace_back([this] { connection_thread(); });
  accept_loop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_done_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

void HttpServer::accept_loop() {
  while (!stopping_ && listen_fd_ >= 0) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;  // wakes every 100 ms to notice stop()
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors (EMFILE) or memory: back off instead of spinning on the ready socket.
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(fd);
    }
    cv_.notify_one();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);  // new connections are refused from here on
  listen_fd_ = -1;
}

void HttpServer::connection_thread() {
  for (;;) {
    int fd;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return accepting_done_ || !pending_.empty(); });
      if (pending_.empty()) return;
      fd = pending_.front();
      pending_.pop_front();
    }
    serve_connection(fd);
  }
}

void HttpServer::serve_connection(int fd) {
  std::string buf;  // bytes received and not yet parsed: the start of the next (pipelined) request
  bool first = true;
  auto fail = [&](const Status& st) {
    HttpResponse res;
    render_error_(st, res);
    const std::string head = serialize_head(res, true);
    if (write_all(fd, head.data(), head.size(), after(limits_.body_timeout)))
      write_all(fd, res.body.data(), res.body.size(), after(limits_.body_timeout));
    lingering_close(fd);
  };
  auto too_slow = [&](const char* part, double seconds) {
    fail(
        make_error(ErrorCode::SERVE_CLIENT_TOO_SLOW, "the request's ", part, " did not arrive within ", seconds, " s"));
  };

  for (;;) {
    // Wait for the request's first byte: a new connection must send its header within
    // header_timeout of the accept (else 408), a kept-alive one may idle keep_alive_timeout
    // (then closed silently). During a drain an idle connection stays open while requests are
    // in flight, so that what it sends then is answered (503 by the handler), and is closed
    // once nothing is in flight.
    auto header_deadline = after(limits_.header_timeout);
    if (buf.empty()) {
      const auto idle_deadline = first ? header_deadline : after(limits_.keep_alive_timeout);
      ReadResult r;
      for (;;) {
        r = read_some(fd, buf, std::min(idle_deadline, after(0.05)));
        if (r != ReadResult::Timeout || Clock::now() >= idle_deadline) break;
        if (stopping_ && active_requests_ == 0) {
          r = ReadResult::Closed;
          break;
        }
      }
      if (r == ReadResult::Timeout && first) return too_slow("header", limits_.header_timeout);
      if (r != ReadResult::Data) return (void)::close(fd);
      if (!first) header_deadline = after(limits_.header_timeout);
    }
    first = false;

    RequestParser parser(limits_.max_header_bytes, limits_.max_body_bytes);
    RequestParser::Step step;
    while ((step = parser.feed(buf)) == RequestParser::Step::NeedHeader) {
      ReadResult r = read_some(fd, buf, header_deadline);
      if (r == ReadResult::Timeout) return too_slow("header", limits_.header_timeout);
      if (r == ReadResult::Closed) return (void)::close(fd);
    }
    if (step == RequestParser::Step::HeaderDone && parser.expects_continue()) {
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      write_all(fd, kContinue, sizeof kContinue - 1, after(limits_.body_timeout));
    }
    const auto body_deadline = after(limits_.body_timeout);
    while (step != RequestParser::Step::Done && step != RequestParser::Step::Failed &&
           (step = parser.feed(buf)) == RequestParser::Step::NeedBody) {
      ReadResult r = read_some(fd, buf, body_deadline);
      if (r == ReadResult::Timeout) return too_slow("body", limits_.body_timeout);
      if (r == ReadResult::Closed) return (void)::close(fd);
    }
    if (step == RequestParser::Step::Failed) return fail(parser.error());

    HttpRequest req = parser.take();
    req.client_gone = [fd] {
      pollfd p{fd, POLLRDHUP, 0};
      return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
    };
    const bool keep_alive = req.keep_alive;

    HttpResponse res;
    ++active_requests_;
    handler_(req, res);
    --active_requests_;
    const bool close = res.close || !keep_alive || stopping_;
    const std::string head = serialize_head(res, close);
    const auto write_deadline = after(limits_.body_timeout);
    if (!write_all(fd, head.data(), head.size(), write_deadline) ||
        !write_all(fd, res.body.data(), res.body.size(), write_deadline))
      return (void)::close(fd);
    if (close) return lingering_close(fd);
  }
}

}  // namespace gearbox::serve

// RequestParser: the strict HTTP/1.1 request framing of `gearbox serve`, apart from sockets and
// clocks, so that the server, the tests and the fuzzer (fuzz/http_framing.cc) drive the same code.
//
// Requests are parsed by Boost.Beast's HTTP parser (Debian's libboost-dev, header-only), a
// strict and fuzzed parser, with the checks it leaves to its caller added here, so that every
// ambiguity a proxy in front could resolve differently is refused with SERVE_HTTP_MALFORMED as
// soon as the header is in:
//   * Content-Length that is not a plain digit string ("+5", "5, 5", "0x5"), or given twice;
//   * Content-Length together with Transfer-Encoding, a Transfer-Encoding other than "chunked";
//   * obs-folded header lines (a line starting with a space or tab);
//   * HTTP/1.1 without exactly one Host header;
//   * malformed chunked bodies, request lines and field names (Beast).
// A header or body over its limit is SERVE_REQUEST_TOO_LARGE.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gearbox::serve {

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // percent-decoded, without the query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool keep_alive = true;  // the client allows another request on this connection
  // True once the client has closed its side of the connection (it will not read the answer):
  // a long run can be cancelled then. Cheap (one poll with no wait); safe from the handler's
  // thread. Set by the transport; empty when parsed elsewhere.
  std::function<bool()> client_gone;

  // Case-insensitive header lookup; "" when absent.
  bool has_header(const std::string& name) const;
  std::string header(const std::string& name) const;
};

// Parses the requests of one connection, one after the other (pipelining): feed() it the bytes
// received so far; it consumes what belongs to the current request and says what it needs next.
class RequestParser {
 public:
  enum class Step {
    NeedHeader,  // the header is incomplete: read more, within the header's time limit
    HeaderDone,  // the header is in and checked; the body is not (answer "Expect: 100-continue" now)
    NeedBody,    // the body is incomplete: read more, within the body's time limit
    Done,        // a whole request: take() it
    Failed,      // malformed or too large: answer error() and close the connection
  };

  RequestParser(size_t max_header_bytes, size_t max_body_bytes);
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Consumes a prefix of `buf` (erased from it); what remains starts the next request, or is
  // the incomplete header. Call again after appending bytes, until Done or Failed.
  Step feed(std::string& buf);
  // After HeaderDone: the client sent "Expect: 100-continue" and waits for it before the body.
  bool expects_continue() const;
  // After Done: the request; the parser is then ready for the connection's next one.
  HttpRequest take();
  // After Failed: why (SERVE_HTTP_MALFORMED or SERVE_REQUEST_TOO_LARGE).
  const Status& error() const { return error_; }

 private:
  struct Beast;  // Beast's parser, kept out of this header
  Step fail(Status st);

  size_t max_header_bytes_, max_body_bytes_;
  std::unique_ptr<Beast> beast_;  // the current request's parser; null between requests
  Status error_;
};

}  // namespace gearbox::serve

// RequestParser: Boost.Beast's request parser plus the framing checks it leaves to its caller.
#include "serve/http_request_parser.h"

// Boost 1.74's chunk parser asserts (BOOST_ASSERT(n >= 5) in parse_chunk_header) when the last
// chunk's line is fed again with fewer than 2 new bytes after it asked for more: reachable by any
// client sending a chunked body a byte at a time (found by fuzz/http_framing). The code under the
// assertion is right for those sizes (it re-reads the already validated "0\r\n" line), and the
// Release build, which defines NDEBUG, never had the assertion; this keeps debug and fuzz builds
// (where it aborted the process) the same as what ships. This file is Beast's only parser user.
#define BOOST_DISABLE_ASSERTS
#include <algorithm>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <cstdint>

namespace gearbox::serve {
namespace {

namespace http = boost::beast::http;

bool iequal(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

int hex_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
}

std::string percent_decode(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The framing checks Beast leaves to its caller (see the header). `head`: the header's bytes.
Status check_framing(const http::request_parser<http::string_body>& p, const std::string& head) {
  for (size_t at = head.find('\n'); at != std::string::npos && at + 1 < head.size(); at = head.find('\n', at + 1))
    if (head[at + 1] == ' ' || head[at + 1] == '\t')
      return make_error(ErrorCode::SERVE_HTTP_MALFORMED, "obs-folded header line (a line starting with white space)");
  const auto& h = p.get();
  int hosts = 0, lengths = 0, encodings = 0;
  for (const auto& f : h) {
    const std::string name(f.name_string()), value(f.value());
    if (iequal(name, "Host")) ++hosts;
    if (iequal(name, "Content-Length")) {
      ++lengths;
      if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
        return make_error(ErrorCode::SERVE_HTTP_MALFORMED, "Content-Length '", value, "' is not a decimal byte count");
    }
    if (iequal(name, "Transfer-Encoding")) {
      ++encodings;
      if (!iequal(trim(value), "chunked"))
        return make_error(ErrorCode::SERVE_HTTP_MALFORMED, "Transfer-Encoding '", value,
                          "': only 'chunked' is accepted");
    }
  }
  if (lengths > 1) return make_error(ErrorCode::SERVE_HTTP_MALFORMED, lengths, " Content-Length headers");
  if (encodings > 1) return make_error(ErrorCode::SERVE_HTTP_MALFORMED, encodings, " Transfer-Encoding headers");
  if (lengths && encodings)
    return make_error(ErrorCode::SERVE_HTTP_MALFORMED, "Content-Length together with Transfer-Encoding");
  if (h.version() >= 11 && hosts != 1)
    return make_error(ErrorCode::SERVE_HTTP_MALFORMED, "an HTTP/1.1 request needs exactly one Host header, it has ",
                      hosts);
  return Status::OK();
}

// Boost 1.74 reads a chunk extension's quoted string (parse_chunk_extensions) to the end of the
// bytes it was given, past the CRLF that ends the chunk's line. With the quote not closed on the
// line, it asks for more bytes, and each time the line is fed again it charges the chunk's size
// against the body limit again (parse_chunk_header subtracts it before reading the extensions).
// So the same bytes were malformed when read whole and a '"' followed the line, too large when
// read in short pieces (the retries used the limit up), or waited on until the body's time limit,
// buffering what came (found by fuzz/http_framing). A quoted string holds no CR or LF: once the
// line's CRLF is in, an extension that Beast still reads is malformed. Called when Beast waits
// at a chunk's line (`buf` starts there): checks the line with Beast's own grammar, bounded by
// the line, so that a bad line fails now, whatever else is buffered or how it was read. (Beast
// checks the last chunk's extension only once its trailers are in; this checks it sooner.)
// `scanned`: how much of `buf` earlier calls searched for the line's end, npos once the line was
// found good, so that a line arriving in many reads is searched once, not once a read.
Status check_waiting_chunk_line(const std::string& buf, size_t& scanned) {
  if (scanned == std::string::npos) return Status::OK();
  size_t at = buf.compare(0, 2, "\r\n") == 0 ? 2 : 0;  // the CRLF closing the previous chunk's data
  const size_t eol = buf.find("\r\n", std::max(at, scanned > 0 ? scanned - 1 : 0));  // a CR may end it
  if (eol == std::string::npos) {
    scanned = buf.size();
    return Status::OK();  // the line is not all in: waiting is right
  }
  while (at < eol && std::isxdigit(static_cast<unsigned char>(buf[at]))) ++at;  // the chunk's size
  const char* it = buf.data() + at;
  boost::beast::error_code ec;
  http::detail::basic_parser_base::parse_chunk_extensions(it, buf.data() + eol + 2, ec);
  if (!ec && it == buf.data() + eol) {  // well-formed: Beast waits for the trailers
    scanned = std::string::npos;
    return Status::OK();
  }
  return make_error(ErrorCode::SERVE_HTTP_MALFORMED,
                    "malformed request: bad chunk extension (it does not end where its line does)");
}

}  // namespace

bool HttpRequest::has_header(const std::string& name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return iequal(h.first, name); });
}

std::string HttpRequest::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (iequal(k, name)) return v;
  return "";
}

struct RequestParser::Beast {
  http::request_parser<http::string_body> parser;
  std::string head;  // the header's bytes taken so far
  bool header_checked = false;
  size_t chunk_line_scanned = 0;  // check_waiting_chunk_line's progress on the line Beast waits at
};

RequestParser::RequestParser(size_t max_header_bytes, size_t max_body_bytes)
    : max_header_bytes_(max_header_bytes), max_body_bytes_(max_body_bytes) {}

RequestParser::~RequestParser() = default;

RequestParser::Step RequestParser::fail(Status st) {
  error_ = std::move(st);
  return Step::Failed;
}

RequestParser::Step RequestParser::feed(std::string& buf) {
  if (!error_.ok()) return Step::Failed;
  if (!beast_) {
    beast_ = std::make_unique<Beast>();
    beast_->parser.header_limit(static_cast<std::uint32_t>(std::min<size_t>(max_header_bytes_, UINT32_MAX)));
    beast_->parser.body_limit(max_body_bytes_);
    beast_->parser.eager(false);  // stop after the header, to check it before taking the body
  }
  auto& p = beast_->parser;
  boost::beast::error_code ec;
  auto parse_error = [&](const boost::beast::error_code& e) {
    if (e == http::error::body_limit)
      return fail(make_error(ErrorCode::SERVE_REQUEST_TOO_LARGE, "the request body exceeds --max-request-bytes ",
                             max_body_bytes_));
    if (e == http::error::header_limit)
      return fail(
          make_error(ErrorCode::SERVE_REQUEST_TOO_LARGE, "the request header exceeds ", max_header_bytes_, " bytes"));
    return fail(make_error(ErrorCode::SERVE_HTTP_MALFORMED, "malformed request: ", e.message()));
  };

  if (!beast_->header_checked) {
    // Beast takes the request line as soon as it is whole and the fields only all together;
    // what it has taken is erased from `buf` (fed again, it would be read as a field) and kept
    // in `head` for the checks.
    const size_t used = p.put(boost::asio::buffer(buf.data(), buf.size()), ec);
    beast_->head.append(buf, 0, used);
    buf.erase(0, used);
    if (ec && ec != http::error::need_more) return parse_error(ec);
    if (!p.is_header_done()) return Step::NeedHeader;
    if (Status st = check_framing(p, beast_->head); !st.ok()) return fail(std::move(st));
    beast_->header_checked = true;
    p.eager(true);
    return p.is_done() ? Step::Done : Step::HeaderDone;
  }

  while (!p.is_done() && !buf.empty()) {
    ec = {};
    const size_t used = p.put(boost::asio::buffer(buf.data(), buf.size()), ec);
    buf.erase(0, used);
    if (ec && ec != http::error::need_more) return parse_error(ec);
    // Beast only asks for more of a chunked body at a chunk's line (or the trailers after the
    // last one), and that line is now at the start of `buf`.
    if (used > 0) beast_->chunk_line_scanned = 0;  // Beast is at another line
    if (ec && p.chunked())
      if (Status st = check_waiting_chunk_line(buf, beast_->chunk_line_scanned); !st.ok()) return fail(std::move(st));
    if (used == 0 || ec) break;  // Beast needs more than `buf` holds (e.g. a whole chunk header)
  }
  return p.is_done() ? Step::Done : Step::NeedBody;
}

bool RequestParser::expects_continue() const {
  return beast_ && iequal(std::string(beast_->parser.get()[http::field::expect]), "100-continue");
}

HttpRequest RequestParser::take() {
  auto& msg = beast_->parser.get();
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  req.path = percent_decode(req.target.substr(0, req.target.find('?')));
  for (const auto& f : msg) req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  req.body = std::move(msg.body());
  req.keep_alive = beast_->parser.keep_alive();
  beast_.reset();
  return req;
}

}  // namespace gearbox::serve

// libFuzzer target: bytes -> serve::RequestParser, the HTTP/1.1 framing of `gearbox serve`
// (Boost.Beast's parser plus gearbox's checks against smuggling), as one connection's stream.
// The first byte chooses how the rest arrives (pieces of 1-64 bytes, as reads deliver them) and
// the stream is also parsed whole: both must give the same requests, and the same error when
// both fail, or framing would depend on network timing. One may fail where the other still waits
// for bytes: Beast checks the lines of a header it got in one piece at once, but one it got in
// parts only once the whole header is in, so a bad line in an unfinished header is found sooner
// or later (never accepted). Each request's body must match its Content-Length. A mismatch
// aborts (a finding). Small limits reach the too-large paths.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "serve/http_request_parser.h"

namespace {

using gearbox::serve::HttpRequest;
using gearbox::serve::RequestParser;
using Step = RequestParser::Step;

struct Outcome {
  std::vector<std::string> requests;  // method, target and body of each, joined
  int error = 0;                      // the failure's code; 0: none
  bool unfinished = false;            // no error, but the stream ends inside a request
};

Outcome parse(const std::string& wire, size_t piece) {
  RequestParser parser(/*max_header_bytes=*/4096, /*max_body_bytes=*/16384);
  Outcome out;
  std::string buf;
  size_t at = 0, last_request_end = 0;
  for (;;) {
    const Step step = parser.feed(buf);
    if (step == Step::Failed) {
      out.error = static_cast<int>(parser.error().code());
      return out;
    }
    if (step == Step::Done) {
      HttpRequest r = parser.take();
      const std::string length = r.header("Content-Length");
      if (!length.empty() && length.find_first_not_of('0') != std::string::npos &&
          length.substr(length.find_first_not_of('0')) != std::to_string(r.body.size()))
        std::abort();  // a body that is not the length the header promised (digits only: checked)
      if (!length.empty() && length.find_first_not_of('0') == std::string::npos && !r.body.empty()) std::abort();
      out.requests.push_back(r.method + ' ' + r.target + ' ' + r.body);
      last_request_end = at - buf.size();
      continue;
    }
    if (step == Step::HeaderDone) continue;
    if (at == wire.size()) {
      out.unfinished = last_request_end != wire.size();
      return out;
    }
    buf.append(wire, at, piece);
    at = std::min(wire.size(), at + piece);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  const std::string wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Outcome split = parse(wire, piece), whole = parse(wire, wire.size() + 1);
  if (split.requests != whole.requests) std::abort();
  if (split.error && whole.error ? split.error != whole.error
                                 : (split.error && !whole.unfinished) || (whole.error && !split.unfinished))
    std::abort();
  return 0;
}

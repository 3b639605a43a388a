// The KServe v2 REST server: routing, authentication, error answers, metrics (the HTTP
// transport itself is serve/http_transport.cc).
#include "serve/server.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "serve/kserve_codec.h"

namespace gearbox::serve {

using json = nlohmann::json;

namespace {

constexpr const char* kServerName = "gearbox";
constexpr const char* kServerVersion = GEARBOX_VERSION_STRING;  // the CMake project version
constexpr const char* kJson = "application/json";

void send_error(HttpResponse& res, const Status& status) {
  res.status = http_status(status.code());
  res.set_content(json{{"error", status.to_string()}}.dump(), kJson);
}

json io_metadata(const std::vector<IoInfo>& ios) {
  json list = json::array();
  for (const auto& io : ios) {
    json shape = json::array();
    for (const auto& d : io.type.shape.dims) shape.push_back(d.known() ? d.value : -1);
    list.push_back({{"name", io.name}, {"datatype", std::string(kserve_datatype(io.type.dtype))}, {"shape", shape}});
  }
  return list;
}

// Compares without an early exit, so the time taken does not tell how much of a guess was right.
bool equal_constant_time(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The request header that shortens a model's --request-timeout: seconds, a plain decimal.
constexpr const char* kTimeoutHeader = "Gearbox-Timeout";

Result<double> parse_timeout(const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double seconds = v.empty() ? 0 : std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(seconds) || seconds <= 0)
    return make_error(ErrorCode::SERVE_TIMEOUT_INVALID, kTimeoutHeader, ": '", v, "' is not a number of seconds > 0");
  return seconds;
}

// Decrements the model's in-flight gauge however the handler exits.
struct InFlight {
  explicit InFlight(ModelMetrics& m) : m_(m) { ++m_.in_flight; }
  ~InFlight() { --m_.in_flight; }
  ModelMetrics& m_;
};

}  // namespace

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::SERVE_REQUEST_TOO_LARGE:
      return 413;
    case ErrorCode::SERVE_MODEL_NOT_FOUND:
    case ErrorCode::SERVE_MODEL_VERSION_NOT_FOUND:
    case ErrorCode::SERVE_ROUTE_NOT_FOUND:
      return 404;
    case ErrorCode::SERVE_UNAUTHORIZED:
      return 401;
    case ErrorCode::SERVE_SHUTTING_DOWN:
    case ErrorCode::SERVE_QUEUE_FULL:  // with Retry-After: overload, not this client's doing
    case ErrorCode::RUN_CANCELLED:
      return 503;  // cancelled at the end of a shutdown's grace period
    case ErrorCode::RUN_DEADLINE_EXCEEDED:
      return 504;
    case ErrorCode::SERVE_CLIENT_TOO_SLOW:
      return 408;
    case ErrorCode::SERVE_HTTP_MALFORMED:
    case ErrorCode::SERVE_REQUEST_INVALID:
    case ErrorCode::SERVE_TIMEOUT_INVALID:
    case ErrorCode::SERVE_DATATYPE_UNKNOWN:
    case ErrorCode::SERVE_TENSOR_DATA_INVALID:
    case ErrorCode::SERVE_BINARY_DATA_INVALID:
    case ErrorCode::SERVE_OUTPUT_UNKNOWN:
    case ErrorCode::INPUT_MISSING:
    case ErrorCode::INPUT_UNKNOWN:
    case ErrorCode::INPUT_DTYPE_MISMATCH:
    case ErrorCode::INPUT_SHAPE_MISMATCH:
    // Kernels report these when the request's values do not suit the model (an index out of
    // range, shapes a symbolic dim cannot take): the client's to fix.
    case ErrorCode::SHAPE_MISMATCH:
    case ErrorCode::INVALID_ARGUMENT:
      return 400;
    default:
      return 500;
  }
}

Server::Server(ServerOptions options, std::vector<std::unique_ptr<ModelRunner>> models, Metrics* metrics)
    : options_(std::move(options)), models_(std::move(models)), metrics_(metrics) {
  HttpLimits limits;
  limits.threads = std::max(2, options_.http_threads);
  limits.max_body_bytes = options_.max_request_bytes;
  limits.header_timeout = options_.header_timeout;
  limits.body_timeout = options_.body_timeout;
  limits.keep_alive_timeout = options_.keep_alive_timeout;
  auto render_error = [this](const Status& st, HttpResponse& res) {
    send_error(res, st);
    metrics_->record_http_response(res.status);
  };
  http_ = std::make_unique<HttpServer>(
      limits, [this](const HttpRequest& req, HttpResponse& res) { handle(req, res); }, render_error);
  HttpLimits metrics_limits = limits;
  metrics_limits.threads = 2;
  metrics_http_ = std::make_unique<HttpServer>(
      metrics_limits,
      [this](const HttpRequest& req, HttpResponse& res) {
        if (req.method == "GET" && req.path == "/metrics")
          res.set_content(metrics_->render(), "text/plain; version=0.0.4; charset=utf-8");
        else
          send_error(res, make_error(ErrorCode::SERVE_ROUTE_NOT_FOUND, "no endpoint ", req.method, " ", req.path,
                                     " on the metrics port (only GET /metrics)"));
      },
      [](const Status& st, HttpResponse& res) { send_error(res, st); });
  install_routes();
}

Server::~Server() = default;

ModelRunner* Server::find_model(const std::string& name, const std::string& version, Status* error) const {
  for (const auto& m : models_) {
    if (m->name() != name) continue;
    if (!version.empty() && version != m->version()) {
      *error = make_error(ErrorCode::SERVE_MODEL_VERSION_NOT_FOUND, "model '", name, "' has no version '", version,
                          "'; it serves version ", m->version());
      return nullptr;
    }
    return m.get();
  }
  std::string names;
  for (const auto& m : models_) names += (names.empty() ? "'" : ", '") + m->name() + "'";
  *error = make_error(ErrorCode::SERVE_MODEL_NOT_FOUND, "no model '", name, "'; this server serves ", names);
  return nullptr;
}

void Server::route(std::string method, const char* pattern, RouteHandler handler) {
  routes_.push_back({std::move(method), std::regex(pattern), std::move(handler)});
}

void Server::handle(const HttpRequest& req, HttpResponse& res) {
  dispatch(req, res);
  metrics_->record_http_response(res.status);
  GBX_LOG_DEBUG("SERVE", "{} {} -> {}", req.method, req.path, res.status);
}

void Server::dispatch(const HttpRequest& req, HttpResponse& res) {
  if (stopping_) {
    // Also on connections kept alive from before the drain: the client learns to go elsewhere.
    res.close = true;
    return send_error(res, make_error(ErrorCode::SERVE_SHUTTING_DOWN, req.method, " ", req.path,
                                      ": the server is shutting down and takes no new requests"));
  }
  if (!options_.auth_token.empty() && req.path.rfind("/v2/health/", 0) != 0) {
    const std::string auth = req.header("Authorization");
    if (auth.rfind("Bearer ", 0) != 0 || !equal_constant_time(auth.substr(7), options_.auth_token)) {
      res.set_header("WWW-Authenticate", "Bearer");
      return send_error(res, make_error(ErrorCode::SERVE_UNAUTHORIZED, req.method, " ", req.path, ": ",
                                        auth.empty() ? "no Authorization header" : "the bearer token does not match"));
    }
  }
  for (const auto& r : routes_) {
    std::smatch m;
    if (r.method != req.method || !std::regex_match(req.path, m, r.pattern)) continue;
    std::vector<std::string> matches;
    for (const auto& sub : m) matches.push_back(sub.matched ? sub.str() : std::string());
    try {
      r.handler(req, matches, res);
    } catch (const std::exception& e) {
      res = HttpResponse();
      send_error(res, make_error(ErrorCode::INTERNAL, "request handler threw: ", e.what()));
    }
    return;
  }
  send_error(res, make_error(ErrorCode::SERVE_ROUTE_NOT_FOUND, "no endpoint ", req.method, " ", req.path));
}

void Server::install_routes() {
  using Matches = std::vector<std::string>;
  route("GET", "/v2/health/live", [](const HttpRequest&, const Matches&, HttpResponse& res) {
    res.set_content(json{{"live", true}}.dump(), kJson);
  });
  route("GET", "/v2/health/ready", [](const HttpRequest&, const Matches&, HttpResponse& res) {
    res.set_content(json{{"ready", true}}.dump(), kJson);  // while draining, dispatch() answers 503
  });
  route("GET", "/v2", [](const HttpRequest&, const Matches&, HttpResponse& res) {
    res.set_content(
        json{{"name", kServerName}, {"version", kServerVersion}, {"extensions", {"binary_tensor_data"}}}.dump(), kJson);
  });
  route("GET", R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)",
        [this](const HttpRequest&, const Matches& matches, HttpResponse& res) {
          Status err;
          ModelRunner* m = find_model(matches[1], matches[2], &err);
          if (!m) return send_error(res, err);
          json j{{"name", m->name()},
                 {"versions", {m->version()}},
                 {"platform", "gearbox"},
                 {"inputs", io_metadata(m->session().inputs())},
                 {"outputs", io_metadata(m->session().outputs())},
                 {"parameters", {{"dynamic_batching", m->batching()}}}};
          res.set_content(j.dump(), kJson);
        });
  route("GET", R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/ready)",
        [this](const HttpRequest&, const Matches& matches, HttpResponse& res) {
          Status err;
          ModelRunner* m = find_model(matches[1], matches[2], &err);
          if (!m) return send_error(res, err);
          res.set_content(json{{"name", m->name()}, {"ready", true}}.dump(), kJson);
        });
  route("POST", R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/infer)",
        [this](const HttpRequest& req, const Matches& matches, HttpResponse& res) { infer(req, matches, res); });
}

void Server::infer(const HttpRequest& req, const std::vector<std::string>& matches, HttpResponse& res) {
  const double t0 = now_seconds();
  const auto arrival = RunOptions::Clock::now();  // a request's deadline counts from here
  Status err;
  ModelRunner* m = find_model(matches[1], matches[2], &err);
  if (!m) return send_error(res, err);
  ModelMetrics& mm = m->metrics();
  InFlight in_flight(mm);
  auto fail = [&](const Status& st) {
    ++mm.failure;
    mm.request_seconds.observe(now_seconds() - t0);
    send_error(res, st);
    // A full queue drains at the pace of the model's runs: a second is a fair first guess.
    if (st.code() == ErrorCode::SERVE_QUEUE_FULL) res.set_header("Retry-After", "1");
  };

  std::optional<size_t> header_length;
  if (req.has_header("Inference-Header-Content-Length")) {
    const std::string v = req.header("Inference-Header-Content-Length");
    char* end = nullptr;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || v[0] == '-')
      return fail(make_error(ErrorCode::SERVE_BINARY_DATA_INVALID, "Inference-Header-Content-Length '", v,
                             "' is not a byte count"));
    header_length = static_cast<size_t>(n);
  }
  double header_timeout = 0;
  if (req.has_header(kTimeoutHeader)) {
    auto t = parse_timeout(req.header(kTimeoutHeader));
    if (!t.ok()) return fail(t.status());
    header_timeout = *t;
  }
  auto parsed = parse_infer_request(req.body, header_length);
  if (!parsed.ok()) return fail(parsed.status());
  InferRequest& r = *parsed;
  if (Status st = m->check(r.inputs); !st.ok()) return fail(st);

  const auto& outs = m->session().outputs();
  std::vector<std::pair<size_t, bool>> selected;  // (model output index, binary)
  if (r.outputs.empty()) {
    for (size_t i = 0; i < outs.size(); ++i) selected.emplace_back(i, r.binary_outputs_default);
  } else {
    for (const auto& want : r.outputs) {
      auto it = std::find_if(outs.begin(), outs.end(), [&](const IoInfo& io) { return io.name == want.name; });
      if (it == outs.end()) {
        std::string names;
        for (const auto& io : outs) names += (names.empty() ? "'" : ", '") + io.name + "'";
        return fail(make_error(ErrorCode::SERVE_OUTPUT_UNKNOWN, "model '", m->name(), "' has no output '", want.name,
                               "'; its outputs are ", names));
      }
      selected.emplace_back(static_cast<size_t>(it - outs.begin()), want.binary);
    }
  }

  // A client that hangs up stops its run: nobody would read the answer.
  auto outcome = m->infer(std::move(r.inputs), m->deadline_for(arrival, header_timeout), req.client_gone);
  if (!outcome.ok()) return fail(outcome.status());
  mm.queue_seconds.observe(outcome->queue_seconds);
  mm.compute_seconds.observe(outcome->compute_seconds);

  std::vector<NamedOutput> named;
  for (const auto& [index, binary] : selected) {
    const Tensor& t = outcome->outputs[index];
    if (kserve_datatype(t.dtype()).empty())
      return fail(make_error(ErrorCode::DTYPE_UNSUPPORTED, "output '", outs[index].name, "' is ", dtype_name(t.dtype()),
                             ", which the KServe v2 protocol cannot carry here"));
    named.push_back({outs[index].name, t, binary});
  }
  EncodedResponse enc = encode_infer_response(m->name(), m->version(), r.id, named);
  if (enc.header_length) {
    res.set_header("Inference-Header-Content-Length", std::to_string(*enc.header_length));
    res.set_content(std::move(enc.body), "application/octet-stream");
  } else {
    res.set_content(std::move(enc.body), kJson);
  }
  ++mm.success;
  mm.request_seconds.observe(now_seconds() - t0);
}

Status Server::bind() {
  auto port = http_->bind(options_.host, options_.port);
  if (!port.ok()) return port.status().with_context("--port: ");
  port_ = *port;
  if (options_.metrics_port >= 0) {
    auto mport = metrics_http_->bind(options_.host, options_.metrics_port);
    if (!mport.ok()) return mport.status().with_context("--metrics-port: ");
    metrics_port_ = *mport;
  }
  return Status::OK();
}

void Server::run() {
  std::thread metrics_thread;
  if (metrics_port_ >= 0) metrics_thread = std::thread([this] { metrics_http_->serve(); });
  http_->serve();  // returns after stop(), once its connections have closed
  if (metrics_thread.joinable()) {
    metrics_http_->stop();
    metrics_thread.join();
  }
  for (auto& m : models_) m->shutdown();
}

void Server::cancel_runs() {
  for (auto& m : models_) m->cancel_runs();
}

void Server::stop() {
  stopping_ = true;
  http_->stop();
  metrics_http_->stop();
}

}  // namespace gearbox::serve

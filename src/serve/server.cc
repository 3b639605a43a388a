// The KServe v2 REST server: routing, authentication, size limits, error answers, metrics.
#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/logging.h"
#include "serve/kserve_codec.h"

namespace gearbox::serve {

using json = nlohmann::json;

namespace {

constexpr const char* kServerName = "gearbox";
constexpr const char* kServerVersion = GEARBOX_VERSION_STRING;  // the CMake project version
constexpr const char* kJson = "application/json";

void send_error(httplib::Response& res, const Status& status) {
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
    case ErrorCode::RUN_CANCELLED:
      return 503;  // cancelled at the end of a shutdown's grace period
    case ErrorCode::RUN_DEADLINE_EXCEEDED:
      return 504;
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
    : options_(std::move(options)),
      models_(std::move(models)),
      metrics_(metrics),
      http_(std::make_unique<httplib::Server>()),
      metrics_http_(std::make_unique<httplib::Server>()) {
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

void Server::install_routes() {
  httplib::Server& s = *http_;
  // httplib owns the task queue it is given (its API takes a raw pointer).
  const int threads = std::max(2, options_.http_threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(options_.max_request_bytes);
  // Idle keep-alive connections hold a thread and delay shutdown by up to this much.
  s.set_keep_alive_timeout(2);

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.auth_token.empty() || req.path.rfind("/v2/health/", 0) == 0)
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0 && equal_constant_time(auth.substr(7), options_.auth_token))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, make_error(ErrorCode::SERVE_UNAUTHORIZED, req.method, " ", req.path, ": ",
                               auth.empty() ? "no Authorization header" : "the bearer token does not match"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Answers httplib produced itself (unknown route, body over the limit) get a catalogue error too.
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, make_error(ErrorCode::SERVE_REQUEST_TOO_LARGE, "the body of ", req.method, " ", req.path,
                                 " exceeds --max-request-bytes ", options_.max_request_bytes));
    else if (res.status == 404)
      send_error(res, make_error(ErrorCode::SERVE_ROUTE_NOT_FOUND, "no endpoint ", req.method, " ", req.path));
    else
      send_error(res,
                 make_error(ErrorCode::SERVE_REQUEST_INVALID, "HTTP ", res.status, " for ", req.method, " ", req.path));
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_->record_http_response(res.status);
    GBX_LOG_DEBUG("SERVE", "{} {} -> {}", req.method, req.path, res.status);
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, make_error(ErrorCode::INTERNAL, "request handler threw: ", what));
  });

  s.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"live", true}}.dump(), kJson);
  });
  s.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = !stopping_;
    res.status = ready ? 200 : 503;
    res.set_content(json{{"ready", ready}}.dump(), kJson);
  });
  s.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        json{{"name", kServerName}, {"version", kServerVersion}, {"extensions", {"binary_tensor_data"}}}.dump(), kJson);
  });
  s.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)", [this](const httplib::Request& req, httplib::Response& res) {
    Status err;
    ModelRunner* m = find_model(req.matches[1], req.matches[2], &err);
    if (!m) return send_error(res, err);
    json j{{"name", m->name()},
           {"versions", {m->version()}},
           {"platform", "gearbox"},
           {"inputs", io_metadata(m->session().inputs())},
           {"outputs", io_metadata(m->session().outputs())},
           {"parameters", {{"dynamic_batching", m->batching()}}}};
    res.set_content(j.dump(), kJson);
  });
  s.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/ready)",
        [this](const httplib::Request& req, httplib::Response& res) {
          Status err;
          ModelRunner* m = find_model(req.matches[1], req.matches[2], &err);
          if (!m) return send_error(res, err);
          res.set_content(json{{"name", m->name()}, {"ready", !stopping_}}.dump(), kJson);
          if (stopping_) res.status = 503;
        });
  s.Post(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/infer)",
         [this](const httplib::Request& req, httplib::Response& res) {
           const double t0 = now_seconds();
           const auto arrival = RunOptions::Clock::now();  // a request's deadline counts from here
           Status err;
           ModelRunner* m = find_model(req.matches[1], req.matches[2], &err);
           if (!m) return send_error(res, err);
           ModelMetrics& mm = m->metrics();
           InFlight in_flight(mm);
           auto fail = [&](const Status& st) {
             ++mm.failure;
             mm.request_seconds.observe(now_seconds() - t0);
             send_error(res, st);
           };

           std::optional<size_t> header_length;
           if (req.has_header("Inference-Header-Content-Length")) {
             const std::string v = req.get_header_value("Inference-Header-Content-Length");
             char* end = nullptr;
             unsigned long long n = std::strtoull(v.c_str(), &end, 10);
             if (v.empty() || *end != '\0' || v[0] == '-')
               return fail(make_error(ErrorCode::SERVE_BINARY_DATA_INVALID, "Inference-Header-Content-Length '", v,
                                      "' is not a byte count"));
             header_length = static_cast<size_t>(n);
           }
           double header_timeout = 0;
           if (req.has_header(kTimeoutHeader)) {
             auto t = parse_timeout(req.get_header_value(kTimeoutHeader));
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
                 return fail(make_error(ErrorCode::SERVE_OUTPUT_UNKNOWN, "model '", m->name(), "' has no output '",
                                        want.name, "'; its outputs are ", names));
               }
               selected.emplace_back(static_cast<size_t>(it - outs.begin()), want.binary);
             }
           }

           auto outcome = m->infer(std::move(r.inputs), m->deadline_for(arrival, header_timeout));
           if (!outcome.ok()) return fail(outcome.status());
           mm.queue_seconds.observe(outcome->queue_seconds);
           mm.compute_seconds.observe(outcome->compute_seconds);

           std::vector<NamedOutput> named;
           for (const auto& [index, binary] : selected) {
             const Tensor& t = outcome->outputs[index];
             if (kserve_datatype(t.dtype()).empty())
               return fail(make_error(ErrorCode::DTYPE_UNSUPPORTED, "output '", outs[index].name, "' is ",
                                      dtype_name(t.dtype()), ", which the KServe v2 protocol cannot carry here"));
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
         });

  metrics_http_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  metrics_http_->set_keep_alive_timeout(2);
  metrics_http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_->render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

Status Server::bind() {
  auto bind_one = [&](httplib::Server& s, int want, int* got, const char* what) -> Status {
    // httplib listens with a backlog of 5, which resets connections when a burst of clients
    // (16 at once in the batching test) connects; remember the socket to listen on it again
    // with a deeper queue (Linux lets listen() resize the backlog of a listening socket).
    int fd = -1;
    s.set_socket_options([&fd](socket_t sock) {
      httplib::default_socket_options(sock);
      fd = static_cast<int>(sock);
    });
    *got = want == 0 ? s.bind_to_any_port(options_.host) : (s.bind_to_port(options_.host, want) ? want : -1);
    s.set_socket_options(httplib::default_socket_options);  // the lambda above refers to this frame
    if (*got < 0)
      return make_error(ErrorCode::SERVE_BIND_FAILED, "cannot listen on ", options_.host, ":", want, " (", what, ")");
    if (fd >= 0 && ::listen(fd, SOMAXCONN) != 0)
      GBX_LOG_WARN("SERVE", "could not raise the listen backlog of {}:{}", options_.host, *got);
    return Status::OK();
  };
  GBX_RETURN_IF_ERROR(bind_one(*http_, options_.port, &port_, "--port"));
  if (options_.metrics_port >= 0)
    GBX_RETURN_IF_ERROR(bind_one(*metrics_http_, options_.metrics_port, &metrics_port_, "--metrics-port"));
  return Status::OK();
}

void Server::run() {
  std::thread metrics_thread;
  if (metrics_port_ >= 0) metrics_thread = std::thread([this] { metrics_http_->listen_after_bind(); });
  http_->listen_after_bind();  // returns after stop(), once its handler threads have finished
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

// Server: the KServe v2 REST endpoints over serve/http_transport.h, and /metrics on a second port.
//
//   GET  /v2/health/live, /v2/health/ready, /v2
//   GET  /v2/models/NAME[/versions/V], /v2/models/NAME[/versions/V]/ready
//   POST /v2/models/NAME[/versions/V]/infer     (JSON tensors or binary tensor data)
//   GET  /metrics                                (metrics port; Prometheus text format)
//
// Every error answer is {"error": "GBX-E<code> <NAME>: ..."} with a 4xx/5xx status
// (http_status() maps catalogue codes to statuses). stop() closes the listening sockets and
// starts the drain: every request after it, on connections already open too, is answered 503
// SERVE_SHUTTING_DOWN; run() returns once the requests in flight have been answered. A
// request's run stops at its deadline (the model's --request-timeout, shortened by a
// Gearbox-Timeout header: 504 RUN_DEADLINE_EXCEEDED), when its client hangs up, or when
// cancel_runs() stops every run (503 RUN_CANCELLED).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "base/status.h"
#include "serve/http_transport.h"
#include "serve/metrics.h"
#include "serve/model_runner.h"

namespace gearbox::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;          // 0: any free port (port() tells which)
  int metrics_port = 8002;  // 0: any free port; -1: no metrics listener
  int http_threads = 32;    // connections served at once
  size_t max_request_bytes = 64u << 20;
  double header_timeout = 10;     // seconds for a request's header (408 SERVE_CLIENT_TOO_SLOW after)
  double body_timeout = 60;       // seconds for its body, from the header's end
  double keep_alive_timeout = 2;  // seconds an idle connection stays open
  std::string auth_token;         // empty: no authentication
};

// The HTTP status for an error from the catalogue.
int http_status(ErrorCode code);

class Server {
 public:
  Server(ServerOptions options, std::vector<std::unique_ptr<ModelRunner>> models, Metrics* metrics);
  ~Server();

  // Binds both ports (SERVE_BIND_FAILED when one cannot be bound).
  Status bind();
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  // Serves until stop(); then drains the requests in flight and the model queues.
  void run();
  // Safe from any thread (the signal watcher calls it).
  void stop();
  // Cancels every model's runs in flight and queued (RUN_CANCELLED, answered 503): the end of
  // a shutdown's grace period. Safe from any thread.
  void cancel_runs();

 private:
  using RouteHandler = std::function<void(const HttpRequest&, const std::vector<std::string>& matches, HttpResponse&)>;
  struct Route {
    std::string method;
    std::regex pattern;  // matches the whole percent-decoded path
    RouteHandler handler;
  };
  void route(std::string method, const char* pattern, RouteHandler handler);
  void install_routes();
  void handle(const HttpRequest& req, HttpResponse& res);
  void dispatch(const HttpRequest& req, HttpResponse& res);
  void infer(const HttpRequest& req, const std::vector<std::string>& matches, HttpResponse& res);
  ModelRunner* find_model(const std::string& name, const std::string& version, Status* error) const;

  ServerOptions options_;
  std::vector<std::unique_ptr<ModelRunner>> models_;
  Metrics* metrics_;
  std::vector<Route> routes_;
  std::unique_ptr<HttpServer> http_, metrics_http_;
  int port_ = -1, metrics_port_ = -1;
  std::atomic<bool> stopping_{false};
};

}  // namespace gearbox::serve

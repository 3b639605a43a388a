// Server: the KServe v2 REST endpoints over cpp-httplib, and /metrics on a second port.
//
//   GET  /v2/health/live, /v2/health/ready, /v2
//   GET  /v2/models/NAME[/versions/V], /v2/models/NAME[/versions/V]/ready
//   POST /v2/models/NAME[/versions/V]/infer     (JSON tensors or binary tensor data)
//   GET  /metrics                                (metrics port; Prometheus text format)
//
// Every error answer is {"error": "GBX-E<code> <NAME>: ..."} with a 4xx/5xx status
// (http_status() maps catalogue codes to statuses). stop() closes the listening sockets;
// run() returns once the requests in flight have been answered. A request's run stops at its
// deadline (the model's --request-timeout, shortened by a Gearbox-Timeout header: 504
// RUN_DEADLINE_EXCEEDED); cancel_runs() stops every run (503 RUN_CANCELLED).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "serve/metrics.h"
#include "serve/model_runner.h"

namespace httplib {
class Server;
}

namespace gearbox::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;          // 0: any free port (port() tells which)
  int metrics_port = 8002;  // 0: any free port; -1: no metrics listener
  int http_threads = 32;    // connections served at once
  size_t max_request_bytes = 64u << 20;
  std::string auth_token;  // empty: no authentication
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
  void install_routes();
  ModelRunner* find_model(const std::string& name, const std::string& version, Status* error) const;

  ServerOptions options_;
  std::vector<std::unique_ptr<ModelRunner>> models_;
  Metrics* metrics_;
  std::unique_ptr<httplib::Server> http_, metrics_http_;
  int port_ = -1, metrics_port_ = -1;
  std::atomic<bool> stopping_{false};
};

}  // namespace gearbox::serve

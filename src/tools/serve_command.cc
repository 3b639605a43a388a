// `gearbox serve --model NAME=PATH ...`: the KServe v2 REST inference server (src/serve/).
// Loads the models, binds the ports, prints where it listens, and serves until SIGTERM/SIGINT,
// then stops accepting, drains the requests in flight and exits 0; runs still going after
// --grace-period seconds are cancelled (base/run_options.h), so a stuck model cannot keep the
// server from exiting.
#include <malloc.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "base/logging.h"
#include "serve/server.h"
#include "tools/commands.h"
#include "tools/engine_option.h"

namespace gearbox::cli {
namespace {

struct ServeOptions {
  std::vector<std::string> models;
  std::string host = "127.0.0.1";
  int port = 8000;
  int metrics_port = 8002;
  SessionFlags session;  // --threads, --engines, --engine, --disable-pass, ...
  int workers = 1;
  int http_threads = 32;
  int max_batch = 1;
  int64_t batch_timeout_us = 1000;
  int64_t max_request_bytes = 64ll << 20;
  std::string auth_token_file;
  bool prepare = true;
  double request_timeout = 0;               // --request-timeout: every model's default, 0 none
  std::vector<std::string> model_timeouts;  // --model-timeout NAME=SECONDS
  double grace_period = 30;                 // --grace-period: SIGTERM to cancelling the runs
  int max_queue = 64;                       // --max-queue: requests waiting per model
  double header_timeout = 10;               // --header-timeout: a request's header must arrive in it
  double body_timeout = 60;                 // --body-timeout: its body, from the header's end
  double keep_alive_timeout = 2;            // --keep-alive-timeout: an idle connection stays open
};

// A number of seconds >= 0 (`positive`: > 0) from a flag's value.
Result<double> parse_seconds(const std::string& flag, const std::string& v, bool positive) {
  char* end = nullptr;
  const double seconds = v.empty() ? -1 : std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(seconds) || seconds < 0 || (positive && seconds == 0))
    return make_error(ErrorCode::USAGE, flag, " '", v, "' must be a number of seconds ", positive ? "> 0" : ">= 0");
  return seconds;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

Result<std::string> read_token(const std::string& path) {
  std::ifstream f(path);
  if (!f) return make_error(ErrorCode::FILE_NOT_FOUND, "cannot open --auth-token-file '", path, "'");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front()))) token.erase(token.begin());
  if (token.empty()) return make_error(ErrorCode::FILE_EMPTY, "--auth-token-file '", path, "' holds no token");
  return token;
}

// glibc raises its mmap threshold each time a large block is freed, after which MB-sized
// request bodies and tensors come from the per-thread arenas and their freed memory stays
// cached there: RSS crept up ~5 MiB per 10 s under a steady MobileNetV2 load
// (bench/serve_load.py's soak), and stayed flat with a fixed threshold, which keeps such
// blocks mmap'ed and returns them to the system on free. MALLOC_MMAP_THRESHOLD_ still wins.
void fix_malloc_mmap_threshold() {
  const char* env = std::getenv("MALLOC_MMAP_THRESHOLD_");
  if (env && *env) return;
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
}

int serve(const ServeOptions& o) {
  fix_malloc_mmap_threshold();
  // Block the stop signals before any thread exists, so every thread inherits the mask and
  // only the watcher below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (o.workers < 1 || o.max_batch < 1 || o.batch_timeout_us < 0 || o.max_request_bytes < 1 || o.http_threads < 1 ||
      o.max_queue < 0 || o.port < 0 || o.port > 65535 || o.metrics_port < -1 || o.metrics_port > 65535)
    return report(make_error(ErrorCode::USAGE,
                             "--workers, --max-batch, --http-threads and --max-request-bytes must be >= 1, "
                             "--max-queue >= 0, "
                             "--batch-timeout-us >= 0, ports 0..65535 (--metrics-port -1 disables metrics)"));
  serve::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.metrics_port = o.metrics_port;
  so.http_threads = o.http_threads;
  so.max_request_bytes = static_cast<size_t>(o.max_request_bytes);
  for (auto [flag, seconds] : {std::pair{"--header-timeout", o.header_timeout},
                               {"--body-timeout", o.body_timeout},
                               {"--keep-alive-timeout", o.keep_alive_timeout}})
    if (!std::isfinite(seconds) || seconds <= 0)
      return report(make_error(ErrorCode::USAGE, flag, " must be a number of seconds > 0"));
  so.header_timeout = o.header_timeout;
  so.body_timeout = o.body_timeout;
  so.keep_alive_timeout = o.keep_alive_timeout;
  if (!o.auth_token_file.empty()) {
    auto token = read_token(o.auth_token_file);
    if (!token.ok()) return report(token.status());
    so.auth_token = *token;
  }
  if (!is_loopback(o.host) && so.auth_token.empty())
    GBX_LOG_WARN("SERVE", "listening on {} without --auth-token-file: anyone who can reach it can run the models",
                 o.host);

  if (!std::isfinite(o.request_timeout) || o.request_timeout < 0 || !std::isfinite(o.grace_period) ||
      o.grace_period < 0)
    return report(make_error(ErrorCode::USAGE, "--request-timeout and --grace-period must be numbers of seconds >= 0"));
  std::map<std::string, double> model_timeouts;  // NAME -> seconds, checked against the models below
  for (const auto& spec : o.model_timeouts) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return report(make_error(ErrorCode::USAGE, "--model-timeout '", spec, "' must be NAME=SECONDS"));
    auto seconds = parse_seconds("--model-timeout " + spec.substr(0, eq), spec.substr(eq + 1), false);
    if (!seconds.ok()) return report(seconds.status());
    model_timeouts[spec.substr(0, eq)] = *seconds;
  }

  serve::Metrics metrics;
  std::vector<std::unique_ptr<serve::ModelRunner>> runners;
  for (const auto& spec : o.models) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return report(make_error(ErrorCode::USAGE, "--model '", spec, "' must be NAME=PATH"));
    std::string name = spec.substr(0, eq), path = spec.substr(eq + 1);
    if (name.find('/') != std::string::npos)
      return report(make_error(ErrorCode::USAGE, "--model name '", name, "' must not contain '/'"));
    for (const auto& r : runners)
      if (r->name() == name) return report(make_error(ErrorCode::USAGE, "--model name '", name, "' is given twice"));
    auto sess = o.session.to_session_options();
    if (!sess.ok()) return report(sess.status());
    auto session = Session::load(path, *sess);
    if (!session.ok()) return report(session.status().with_context("--model " + name + ": "));
    if (o.prepare) {
      // The first request would otherwise pay for primitive creation and weight packing.
      auto prepared = (*session)->prepare();
      if (!prepared.ok())
        GBX_LOG_WARN("SERVE", "--model {}: preparing on zero inputs failed ({}); the first request prepares instead",
                     name, prepared.status().to_string());
      else if (!*prepared)
        GBX_LOG_INFO("SERVE", "--model {}: dynamic input shapes; the first request of each shape prepares it", name);
    }
    serve::RunnerOptions ro;
    ro.workers = o.workers;
    ro.max_batch = o.max_batch;
    ro.batch_timeout_us = o.batch_timeout_us;
    ro.request_timeout = o.request_timeout;
    ro.max_queue = o.max_queue;
    if (auto it = model_timeouts.find(name); it != model_timeouts.end()) {
      ro.request_timeout = it->second;
      model_timeouts.erase(it);
    }
    const std::string version = "1";
    auto& mm = metrics.add_model(name, version, "cpu", ro.workers);
    runners.push_back(std::make_unique<serve::ModelRunner>(name, version, std::move(session).value(), ro, &mm));
  }

  if (!model_timeouts.empty())
    return report(make_error(ErrorCode::USAGE, "--model-timeout names '", model_timeouts.begin()->first,
                             "', which is not a --model NAME"));
  serve::Server server(so, std::move(runners), &metrics);
  if (Status st = server.bind(); !st.ok()) return report(st);
  std::cout << "gearbox serve: listening on http://" << o.host << ":" << server.port();
  if (server.metrics_port() >= 0)
    std::cout << ", metrics on http://" << o.host << ":" << server.metrics_port() << "/metrics";
  std::cout << std::endl;

  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    bool signalled = false, cancelled = false;
    std::chrono::steady_clock::time_point grace_end;
    timespec tick{0, 100 * 1000 * 1000};
    while (!finished) {
      int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig > 0 && !signalled) {
        signalled = true;
        grace_end = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                           std::chrono::duration<double>(o.grace_period));
        GBX_LOG_INFO("SERVE", "signal {}: no new connections; draining requests in flight (grace period {} s)", sig,
                     o.grace_period);
      }
      if (signalled && !cancelled && std::chrono::steady_clock::now() >= grace_end) {
        cancelled = true;
        GBX_LOG_WARN("SERVE", "grace period of {} s over: cancelling the runs still in flight", o.grace_period);
        server.cancel_runs();
      }
      // Repeated until run() returns: a stop() that lands before the listen loop has started
      // would otherwise be lost.
      if (signalled) server.stop();
    }
  });
  server.run();
  finished = true;
  watcher.join();
  std::cout << "gearbox serve: stopped" << std::endl;
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* sub = app.add_subcommand("serve", "Serve models over the KServe v2 REST protocol, with Prometheus metrics");
  sub->add_option("--model", o->models, "NAME=PATH of a model to serve (.onnx; repeatable)")->required();
  sub->add_option("--host", o->host, "Address to listen on (default 127.0.0.1; other addresses must be asked for)");
  sub->add_option("--port", o->port, "Inference port (default 8000; 0 picks a free one)");
  sub->add_option("--metrics-port", o->metrics_port, "Prometheus /metrics port (default 8002; 0 picks one, -1 none)");
  add_session_flags(sub, &o->session);
  sub->add_option("--workers", o->workers, "Model runs in flight at once per model (default 1)");
  sub->add_option("--http-threads", o->http_threads, "Connections served at once (default 32)");
  sub->add_option("--max-batch", o->max_batch,
                  "Dynamic batching: merge concurrent requests up to this many rows (default 1: off)");
  sub->add_option("--batch-timeout-us", o->batch_timeout_us,
                  "Dynamic batching: how long a request waits for others to join its batch (default 1000)");
  sub->add_option("--max-request-bytes", o->max_request_bytes, "Largest request body accepted (default 64 MiB)");
  sub->add_flag("--prepare,!--no-prepare", o->prepare,
                "Run each model once on zero inputs at load, so the first request does not pay for primitive "
                "creation and weight packing (default on; static input shapes only)");
  sub->add_option("--request-timeout", o->request_timeout,
                  "Seconds a request may take from its arrival, queue included, before it is answered 504 "
                  "RUN_DEADLINE_EXCEEDED (default 0: no limit; a Gearbox-Timeout header may shorten it)");
  sub->add_option("--model-timeout", o->model_timeouts, "NAME=SECONDS: --request-timeout for one model (repeatable)");
  sub->add_option("--grace-period", o->grace_period,
                  "Seconds after SIGTERM/SIGINT before the runs still in flight are cancelled (default 30)");
  sub->add_option("--max-queue", o->max_queue,
                  "Requests that may wait for a model's workers; more are answered 503 SERVE_QUEUE_FULL with "
                  "Retry-After (default 64)");
  sub->add_option("--header-timeout", o->header_timeout,
                  "Seconds a request's header may take to arrive, from its first byte (from the connection for a "
                  "connection's first request); slower clients get 408 SERVE_CLIENT_TOO_SLOW (default 10)");
  sub->add_option("--body-timeout", o->body_timeout,
                  "Seconds a request's body may take to arrive after its header (408 after; default 60)");
  sub->add_option("--keep-alive-timeout", o->keep_alive_timeout,
                  "Seconds an idle kept-alive connection stays open (default 2)");
  sub->add_option("--auth-token-file", o->auth_token_file,
                  "Require 'Authorization: Bearer <token>' with the token in this file");
  sub->callback([o, action] { *action = [o] { return serve(*o); }; });
}

}  // namespace gearbox::cli

#include "comm/trace.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gearbox::comm {

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Tracer::Tracer(std::shared_ptr<KvStore> store, int rank, int size, std::string group)
    : store_(std::move(store)), rank_(rank), size_(size), group_(std::move(group)) {
  thread_ = std::thread([this] { publish_loop(); });
}

Tracer::~Tracer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Tracer::enter(uint64_t seq, const char* op, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    entered_ = seq;
    op_ = op;
    bytes_ = bytes;
    enter_ms_ = wall_ms();
    dirty_ = true;
  }
  cv_.notify_all();
}

void Tracer::leave(uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    left_ = seq;
    dirty_ = true;
  }
  cv_.notify_all();
}

std::string Tracer::state_json() {
  nlohmann::json j = {{"entered", entered_}, {"left", left_}, {"op", op_}, {"bytes", bytes_},
                      {"enter_ms", enter_ms_}, {"heartbeat_ms", wall_ms()}};
  return j.dump();
}

void Tracer::publish_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    std::string state = state_json();
    dirty_ = false;
    lock.unlock();
    // A store that is gone (the master exited) must not end the job from here: the collective
    // itself reports the failure.
    (void)store_->set("trace." + std::to_string(rank_), state);
    lock.lock();
    cv_.wait_for(lock, kHeartbeat, [this] { return stop_ || dirty_; });
  }
}

Status Tracer::report(uint64_t seq, const char* op, size_t bytes, bool timed_out, const std::string& engine_message,
                      std::chrono::milliseconds timeout) {
  int64_t detected = wall_ms();
  // Let every live rank publish a fresh state first, and a dead one's heartbeat age pass the
  // threshold below: four heartbeats (2 s).
  std::this_thread::sleep_for(4 * kHeartbeat + std::chrono::milliseconds(100));
  int64_t now = wall_ms();
  int64_t my_enter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    my_enter = enter_ms_;
  }
  std::ostringstream os, never_joined, never_finished, dead;
  os << "collective #" << seq << " " << op << " (" << bytes << " bytes) in group '" << group_ << "' on rank " << rank_
     << " " << (timed_out ? "timed out after " + std::to_string(timeout.count() / 1000.0).substr(0, 5) + " s"
                          : "failed: a peer's connection closed")
     << " (waited " << (detected - my_enter) / 1000.0 << " s; engine: " << engine_message << ")\n";
  int n_never_joined = 0, n_never_finished = 0, n_dead = 0;
  for (int r = 0; r < size_; ++r) {
    auto got = store_->try_get("trace." + std::to_string(r));
    if (!got.ok() || !got.value()) {
      os << "  rank " << r << ": no state in the store (never started, or the store is unreachable)\n";
      never_joined << " " << r;
      ++n_never_joined;
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(**got, nullptr, false);
    if (j.is_discarded()) continue;
    uint64_t entered = j.value("entered", uint64_t(0)), left = j.value("left", uint64_t(0));
    int64_t hb_age = now - j.value("heartbeat_ms", int64_t(0));
    bool alive = hb_age < 3 * kHeartbeat.count();
    os << "  rank " << r << ": ";
    if (entered < seq) {
      os << "never joined #" << seq << " (last entered #" << entered << " " << j.value("op", std::string()) << ", "
         << (left >= entered ? "finished it" : "not finished") << ")";
      never_joined << " " << r;
      ++n_never_joined;
    } else if (entered == seq && left < seq) {
      os << "joined #" << seq << ", never finished, waiting " << (now - j.value("enter_ms", now)) / 1000.0 << " s";
      if (r != rank_) {
        never_finished << " " << r;
        ++n_never_finished;
      }
    } else if (entered == seq) {
      os << "finished #" << seq;
    } else {
      os << "went past #" << seq << " to #" << entered << " " << j.value("op", std::string())
         << " (collective order differs between ranks?)";
    }
    if (!alive) {
      os << "; heartbeat stopped " << hb_age / 1000.0 << " s ago: the process died or hangs";
      dead << " " << r;
      ++n_dead;
    }
    os << "\n";
  }
  os << "summary: #" << seq << " " << op << " group '" << group_ << "': ";
  os << (n_never_joined ? "never joined:" + never_joined.str() : "every rank joined");
  if (n_never_finished) os << "; joined but never finished:" << never_finished.str();
  if (n_dead) os << "; heartbeat stopped (dead or hung):" << dead.str();
  Status s(timed_out ? ErrorCode::COMM_TIMEOUT : ErrorCode::COMM_RANK_FAILED, os.str());
  std::cerr << "[gearbox comm] " << s.to_string() << "\n" << std::flush;
  return s;
}

}  // namespace gearbox::comm

// Tracer: what each rank of a group is doing, published in the rendezvous store, and the
// desync report built from it when a collective fails.
//
// Every collective enters with (seq, op, bytes) and leaves; a background thread publishes the
// rank's latest state (key "trace.RANK": last seq entered, last seq left, its op and bytes,
// when it entered, and a heartbeat time) whenever it changes and every 500 ms, so recording
// never waits on the store in the collective's own path. When the engine reports a timeout or a
// closed connection, the failing rank reads every member's state and names, for the collective
// it was in, the ranks that never joined it (and what they last did), that joined but never
// finished, how long each has waited, and the ranks whose heartbeat stopped (dead or hung).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "comm/store.h"

namespace gearbox::comm {

class Tracer {
 public:
  Tracer(std::shared_ptr<KvStore> store, int rank, int size, std::string group);
  ~Tracer();
  void enter(uint64_t seq, const char* op, size_t bytes);
  void leave(uint64_t seq);
  // Turns the engine's failure in collective seq into COMM_TIMEOUT (timed_out) or
  // COMM_RANK_FAILED, with the report; also prints the report on stderr at once.
  Status report(uint64_t seq, const char* op, size_t bytes, bool timed_out, const std::string& engine_message,
                std::chrono::milliseconds timeout);

  static constexpr std::chrono::milliseconds kHeartbeat{500};

 private:
  void publish_loop();
  std::string state_json();

  std::shared_ptr<KvStore> store_;
  int rank_, size_;
  std::string group_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t entered_ = 0, left_ = 0;
  std::string op_ = "none";
  size_t bytes_ = 0;
  int64_t enter_ms_ = 0;
  bool dirty_ = true, stop_ = false;
  std::thread thread_;
};

// Milliseconds since the epoch (the clock every host agrees on within NTP's error).
int64_t wall_ms();

}  // namespace gearbox::comm

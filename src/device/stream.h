// Streams and events: asynchronous, in-order execution on a device.
//
// A Stream is a worker thread with a FIFO queue: work enqueued on one stream runs in order,
// work on different streams runs concurrently. enqueue() returns an Event that reports the
// job's Status when it finishes. The CPU runs jobs on the stream's own thread; a CUDA stream
// will map onto cudaStream_t with the same interface.
//
//   Stream stream;
//   Event e = stream.enqueue([&] { return session.run(...).status(); });
//   ...
//   GBX_RETURN_IF_ERROR(e.wait());
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "base/status.h"

namespace gearbox::device {

class Event {
 public:
  Event() = default;  // an event with no work: done, OK
  // Blocks until the job has run; returns its Status (INTERNAL if it threw).
  Status wait() const;
  // True once the job has run; never blocks.
  bool done() const;

 private:
  friend class Stream;
  struct State {
    mutable std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status status;
  };
  std::shared_ptr<State> state_;
};

class Stream {
 public:
  Stream();
  // Runs every queued job, then stops the worker.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Event enqueue(std::function<Status()> job);
  // Blocks until every job enqueued so far has run.
  void synchronize();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<Status()>, std::shared_ptr<Event::State>>> queue_;
  size_t pending_ = 0;  // queued + running
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace gearbox::device

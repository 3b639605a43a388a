#include "device/stream.h"

#include <exception>
#include <string>

namespace gearbox::device {

Status Event::wait() const {
  if (!state_) return Status::OK();
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->status;
}

bool Event::done() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

Stream::Stream() : worker_([this] { run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

Event Stream::enqueue(std::function<Status()> job) {
  Event e;
  e.state_ = std::make_shared<Event::State>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(job), e.state_);
    ++pending_;
  }
  cv_.notify_all();
  return e;
}

void Stream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_ == 0; });
}

void Stream::run() {
  for (;;) {
    std::pair<std::function<Status()>, std::shared_ptr<Event::State>> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    Status s;
    try {
      s = item.first();
    } catch (const std::exception& e) {
      s = Status(ErrorCode::INTERNAL, std::string("exception in a stream job: ") + e.what());
    } catch (...) {
      s = Status(ErrorCode::INTERNAL, "unknown exception in a stream job");
    }
    item.first = nullptr;  // release what the job captured before the event reports done
    {
      std::lock_guard<std::mutex> lock(item.second->mu);
      item.second->status = std::move(s);
      item.second->done = true;
    }
    item.second->cv.notify_all();
    {
      std::lock_guard<std::mutex> lock(mu_);
      --pending_;
    }
    cv_.notify_all();
  }
}

}  // namespace gearbox::device

// Streams and events: in-order execution per stream, concurrency across streams, statuses
// and exceptions reported through events, and destruction draining the queue.
#include "device/stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <vector>

namespace gearbox::device {
namespace {

TEST(Stream, RunsJobsInOrder) {
  std::vector<int> order;  // touched only by the stream's worker until synchronize()
  Stream s;
  std::vector<Event> events;
  for (int i = 0; i < 100; ++i)
    events.push_back(s.enqueue([&order, i] {
      order.push_back(i);
      return Status::OK();
    }));
  s.synchronize();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  for (auto& e : events) {
    EXPECT_TRUE(e.done());
    EXPECT_TRUE(e.wait().ok());
  }
}

// Each stream's job waits for the other's: this finishes only if the two streams really run
// at the same time (a single shared worker would deadlock; the futures' timeout turns that
// into a failure instead of a hang).
TEST(Stream, DifferentStreamsRunConcurrently) {
  Stream a, b;
  std::promise<void> a_started, b_started;
  auto a_seen = b_started.get_future().share(), b_seen = a_started.get_future().share();
  auto job = [](std::promise<void>* mine, std::shared_future<void> other) {
    mine->set_value();
    return other.wait_for(std::chrono::seconds(20)) == std::future_status::ready
               ? Status::OK()
               : Status(ErrorCode::INTERNAL, "the other stream never ran");
  };
  Event ea = a.enqueue([&] { return job(&a_started, a_seen); });
  Event eb = b.enqueue([&] { return job(&b_started, b_seen); });
  EXPECT_TRUE(ea.wait().ok()) << ea.wait().to_string();
  EXPECT_TRUE(eb.wait().ok()) << eb.wait().to_string();
}

TEST(Stream, EventsCarryStatusAndExceptions) {
  Stream s;
  Event bad = s.enqueue([] { return make_error(ErrorCode::INPUT_MISSING, "x"); });
  Event thrown = s.enqueue([]() -> Status { throw std::runtime_error("boom"); });
  Event good = s.enqueue([] { return Status::OK(); });
  EXPECT_EQ(bad.wait().code(), ErrorCode::INPUT_MISSING);
  EXPECT_EQ(thrown.wait().code(), ErrorCode::INTERNAL);
  EXPECT_NE(thrown.wait().message().find("boom"), std::string::npos);
  EXPECT_TRUE(good.wait().ok());  // the stream survives a throwing job
  EXPECT_TRUE(Event().done());
  EXPECT_TRUE(Event().wait().ok());
}

TEST(Stream, QueryDoesNotBlockAndDestructionDrains) {
  std::atomic<int> ran{0};
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  Event first;
  {
    Stream s;
    first = s.enqueue([&] {
      opened.wait();
      ++ran;
      return Status::OK();
    });
    for (int i = 0; i < 10; ++i) s.enqueue([&] {
      ++ran;
      return Status::OK();
    });
    EXPECT_FALSE(first.done());  // held at the gate
    gate.set_value();
  }  // ~Stream runs all queued jobs before returning
  EXPECT_EQ(ran.load(), 11);
  EXPECT_TRUE(first.done());
}

}  // namespace
}  // namespace gearbox::device

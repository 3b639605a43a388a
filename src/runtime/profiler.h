// Profiler: what the executor records per node when a run is profiled.
//
// Attach one to a run (Session::run_values(inputs, &profiler)); the executor then records,
// for every node it runs (subgraph nodes included), begin and end time, thread, the kernel's
// engine, input and output shapes, bytes read and written, FLOPs (runtime/op_cost.h) and the
// bytes the run's buffer pool holds after the node. With no profiler attached the executor
// pays one pointer test per node.
//
// Thread-safe: concurrent runs may share a profiler; each record carries its thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/tensor.h"

namespace gearbox {

struct OpRecord {
  std::string node;
  std::string op_type;  // qualified: "Conv", "com.gearbox.FusedConv"
  std::string engine;
  int run = 0;    // which profiled run (Profiler::begin_run)
  int depth = 0;  // 0 for the main graph, 1+ inside If/Loop/Scan bodies
  uint32_t thread = 0;
  int64_t begin_ns = 0, end_ns = 0;  // since the profiler was created
  std::vector<Dims> input_dims, output_dims;
  uint64_t bytes_read = 0, bytes_written = 0;
  double flops = 0;
  size_t pool_bytes_in_use = 0;  // held by live tensors after the node (0: no pool)
};

struct RunRecord {
  int run = 0;
  uint32_t thread = 0;
  int64_t begin_ns = 0, end_ns = 0;
};

class Profiler {
 public:
  Profiler() : origin_(std::chrono::steady_clock::now()) {}

  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count();
  }
  // A small, stable id for the calling thread (0 for the first thread seen).
  uint32_t thread_id();

  // Brackets one run; returns its index for the records.
  int begin_run();
  void end_run(int run, int64_t begin_ns);

  void add(OpRecord r);
  std::vector<OpRecord> ops() const;
  std::vector<RunRecord> runs() const;

 private:
  const std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<OpRecord> ops_;
  std::vector<RunRecord> runs_;
  std::vector<std::thread::id> threads_;
  int next_run_ = 0;
};

}  // namespace gearbox

// Stop latency of RunOptions (base/run_options.h): a Loop of 10^12 trips (M an input, like
// tests/runtime/run_options_test.cc) run with a deadline, and cancelled from another thread;
// prints, per try and as min/median/max, how long after the deadline (or after cancel()) the run
// returned. No test asserts these figures (docs/performance.md has them).
//
//   build/bench/gearbox_bench_cancel_latency [TRIES] [DEADLINE_SECONDS]
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "graph/onnx_importer.h"
#include "runtime/session.h"

using namespace gearbox;
using Clock = std::chrono::steady_clock;

namespace {

// y = Loop M times: x = x * 0.5 + 1, with M int64 and x float [2, 3] inputs.
std::string loop_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("loop");
  auto io = [](onnx::ValueInfoProto* vi, const char* name, int type, bool matrix) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    if (matrix) {
      shape->add_dim()->set_dim_value(2);
      shape->add_dim()->set_dim_value(3);
    }
  };
  io(g->add_input(), "M", onnx::TensorProto::INT64, false);
  io(g->add_input(), "x", onnx::TensorProto::FLOAT, true);
  io(g->add_output(), "y", onnx::TensorProto::FLOAT, true);
  auto* loop = g->add_node();
  loop->set_op_type("Loop");
  loop->set_name("loop");
  for (const char* in : {"M", "", "x"}) loop->add_input(in);
  loop->add_output("y");
  auto* attr = loop->add_attribute();
  attr->set_name("body");
  attr->set_type(onnx::AttributeProto::GRAPH);
  auto* body = attr->mutable_g();
  body->set_name("body");
  io(body->add_input(), "i", onnx::TensorProto::INT64, false);
  io(body->add_input(), "cond", onnx::TensorProto::BOOL, false);
  io(body->add_input(), "x_in", onnx::TensorProto::FLOAT, true);
  io(body->add_output(), "cond_out", onnx::TensorProto::BOOL, false);
  io(body->add_output(), "x_out", onnx::TensorProto::FLOAT, true);
  for (auto [name, v] : {std::pair{"half", 0.5f}, std::pair{"one", 1.0f}}) {
    auto* t = body->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(v);
  }
  auto node = [&](const char* op, std::vector<const char*> ins, const char* out) {
    auto* n = body->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const char* i : ins) n->add_input(i);
    n->add_output(out);
  };
  node("Identity", {"cond"}, "cond_out");
  node("Mul", {"x_in", "half"}, "a");
  node("Add", {"a", "one"}, "x_out");
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

void report(const char* what, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  std::printf("%s: min %.3f ms, median %.3f ms, max %.3f ms over %zu tries:", what, ms.front(), ms[ms.size() / 2],
              ms.back(), ms.size());
  for (double v : ms) std::printf(" %.3f", v);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const int tries = argc > 1 ? std::atoi(argv[1]) : 10;
  const double deadline_s = argc > 2 ? std::atof(argv[2]) : 0.3;
  if (tries < 1 || !(deadline_s > 0)) {
    std::fprintf(stderr, "usage: %s [TRIES >= 1] [DEADLINE_SECONDS > 0]\n", argv[0]);
    return 2;
  }
  auto model = import_onnx_bytes(loop_model(), "");
  if (!model.ok()) return std::fprintf(stderr, "%s\n", model.status().to_string().c_str()), 1;
  auto session = Session::create(std::move(model).value());
  if (!session.ok()) return std::fprintf(stderr, "%s\n", session.status().to_string().c_str()), 1;
  std::map<std::string, Tensor> feeds{{"M", Tensor::scalar<int64_t>(1'000'000'000'000)},
                                      {"x", Tensor(DType::F32, {2, 3})}};
  std::vector<double> after_deadline, after_cancel;
  for (int i = 0; i < tries; ++i) {
    RunOptions o;
    o.deadline = RunOptions::after(deadline_s);
    auto r = (*session)->run(feeds, o);
    const Clock::time_point end = Clock::now();
    if (r.status().code() != ErrorCode::RUN_DEADLINE_EXCEEDED)
      return std::fprintf(stderr, "expected RUN_DEADLINE_EXCEEDED, got %s\n", r.status().to_string().c_str()), 1;
    after_deadline.push_back(std::chrono::duration<double, std::milli>(end - *o.deadline).count());

    RunOptions c;
    Clock::time_point cancelled_at;
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::duration<double>(deadline_s));
      cancelled_at = Clock::now();
      c.terminate.cancel();
    });
    auto rc = (*session)->run(feeds, c);
    const Clock::time_point end_c = Clock::now();
    t.join();
    if (rc.status().code() != ErrorCode::RUN_CANCELLED)
      return std::fprintf(stderr, "expected RUN_CANCELLED, got %s\n", rc.status().to_string().c_str()), 1;
    after_cancel.push_back(std::chrono::duration<double, std::milli>(end_c - cancelled_at).count());
  }
  report("return after deadline", after_deadline);
  report("return after cancel()", after_cancel);
  return 0;
}

// Graph mode and export (include/gearbox/nn_graph.hpp): a network traced into the IR runs, as
// an exported .onnx, as an exported .gbm and as a GraphFunction, to the eager network's outputs
// (the reference: eager mode is itself checked against torch in torch_parity_test.cc) within
// float reassociation tolerance; onnx.checker accepts the .onnx; what cannot be traced is
// refused with a code.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "frontend/autodiff/tape.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn.hpp"
#include "gearbox/nn_graph.hpp"
#include "runtime/session.h"
#include "torch_refs.h"

namespace gbx::nn {
namespace {

using testing::error_code;
using testing::expect_close;

std::filesystem::path temp_dir() {
  return std::filesystem::temp_directory_path() / ("gbx_graph_mode_" + std::to_string(getpid()));
}

std::string temp_path(const std::string& name) {
  std::filesystem::create_directories(temp_dir());
  return (temp_dir() / name).string();
}

// Removes this process's folder at the end (ctest runs each test in a process of its own).
class RemoveTempFolder : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir(), ec);
  }
};
const auto* const kRemoveTempFolder = ::testing::AddGlobalTestEnvironment(new RemoveTempFolder);

std::shared_ptr<Sequential> mlp() {
  return std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<Linear>(64, 32), std::make_shared<ReLU>(), std::make_shared<Linear>(32, 10)});
}

// The digits CNN without normalization: [N, 1, 8, 8] -> conv-relu-pool x 2 -> linear.
std::shared_ptr<Sequential> plain_cnn() {
  return std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<Conv2d>(1, 8, std::vector<int64_t>{3}, Conv2dOptions{.padding = {1}}), std::make_shared<ReLU>(),
      std::make_shared<MaxPool2d>(std::vector<int64_t>{2}),
      std::make_shared<Conv2d>(8, 16, std::vector<int64_t>{3}, Conv2dOptions{.padding = {1}}), std::make_shared<ReLU>(),
      std::make_shared<MaxPool2d>(std::vector<int64_t>{2}), std::make_shared<Flatten>(),
      std::make_shared<Linear>(16 * 2 * 2, 10)});
}

// The digits CNN of examples/train_cnn.cc: conv-BN-ReLU-pool, a residual block of two
// conv-BN, linear.
class BnCnn : public Module {
 public:
  BnCnn()
      : conv_(std::make_shared<Conv2d>(1, 16, std::vector<int64_t>{3}, Conv2dOptions{.padding = {1}, .bias = false})),
        bn_(std::make_shared<BatchNorm2d>(16)),
        conv1_(std::make_shared<Conv2d>(16, 16, std::vector<int64_t>{3}, Conv2dOptions{.padding = {1}})),
        bn1_(std::make_shared<BatchNorm2d>(16)),
        fc_(std::make_shared<Linear>(16 * 4 * 4, 10)) {
    register_module("conv", conv_);
    register_module("bn", bn_);
    register_module("conv1", conv1_);
    register_module("bn1", bn1_);
    register_module("fc", fc_);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(relu((*bn_)((*conv_)(x))), {2});
    h = relu((*bn1_)((*conv1_)(h)) + h);
    return (*fc_)(flatten(h, 1));
  }

 private:
  std::shared_ptr<Module> conv_, bn_, conv1_, bn1_, fc_;
};

// Batch statistics far from the initial 0 / 1, so that eval() normalizes with something real.
std::shared_ptr<BnCnn> bn_cnn() {
  auto net = std::make_shared<BnCnn>();
  NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) net->forward(Tensor::randn({16, 1, 8, 8}) * 2.0 + 0.5);
  net->eval();
  return net;
}

std::shared_ptr<TransformerEncoderLayer> encoder_layer() {
  auto layer = std::make_shared<TransformerEncoderLayer>(16, 4, TransformerEncoderLayerOptions{.dim_feedforward = 32});
  layer->eval();
  return layer;
}

// Runs a model file with gearbox's Session on one input.
Tensor run_file(const std::string& path, const Tensor& x) {
  auto session = gearbox::Session::load(path);
  throw_if_error(session.status());
  auto outs = session.value()->run({{"input", x.impl()->value}});
  throw_if_error(outs.status());
  EXPECT_EQ(outs.value().size(), 1u);
  return wrap(outs.value()[0]);
}

void expect_onnx_checker_accepts(const std::string& path) {
  std::string cmd = std::string(GEARBOX_PYTHON_EXE) +
                    " -c \"import onnx, sys; m = onnx.load(sys.argv[1]); onnx.checker.check_model(m, full_check=True); "
                    "assert m.opset_import[0].version == 17\" " +
                    path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Exported as .onnx and .gbm and run by Session, and run as a GraphFunction (twice: the second
// input of the same shape has other values, which a graph that froze the example would miss):
// every result equals eager within float tolerance.
void check_graph_and_export(const std::shared_ptr<Module>& net, const std::vector<int64_t>& shape,
                            const std::string& name) {
  Tensor x = Tensor::randn(shape), x2 = Tensor::randn(shape);
  Tensor want, want2;
  {
    NoGradGuard no_grad;
    want = net->forward(x);
    want2 = net->forward(x2);
  }
  const std::string onnx_path = temp_path(name + ".onnx"), gbm_path = temp_path(name + ".gbm");
  export_onnx(*net, x, onnx_path);
  export_gbm(*net, x, gbm_path);
  expect_onnx_checker_accepts(onnx_path);
  // export_gbm takes gearbox compile's path: the same bytes as the CLI compiling the .onnx.
  const std::string compiled_path = temp_path(name + "_cli.gbm");
  std::string compile = std::string(GEARBOX_CLI) + " compile " + onnx_path + " -o " + compiled_path + " -q > /dev/null";
  ASSERT_EQ(std::system(compile.c_str()), 0) << compile;
  EXPECT_TRUE(file_bytes(gbm_path) == file_bytes(compiled_path)) << name << ": export_gbm and gearbox compile differ";
  expect_close(run_file(onnx_path, x2), want2, 1e-5, 1e-5, name + " .onnx in Session");
  expect_close(run_file(gbm_path, x2), want2, 1e-5, 1e-5, name + " .gbm in Session");

  GraphFunction graph(net);
  expect_close(graph(x), want, 1e-5, 1e-5, name + " graph mode");
  expect_close(graph(x2), want2, 1e-5, 1e-5, name + " graph mode, second input");
  EXPECT_EQ(graph.traces(), 1u) << name << ": one shape, one trace";
}

TEST(GraphMode, TraceRecordsOpsParametersAndIo) {
  manual_seed(1);
  auto net = mlp();
  TracedGraph g = trace(*net, Tensor::randn({4, 64}));
  EXPECT_EQ(g.op_types(), (std::vector<std::string>{"Gemm", "Relu", "Gemm"}));
  EXPECT_EQ(g.initializer_names(), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(g.input_names(), (std::vector<std::string>{"input"}));
  EXPECT_EQ(g.output_names(), (std::vector<std::string>{"output"}));
}

TEST(GraphMode, MlpExportedAndGraphModeMatchEager) {
  manual_seed(2);
  check_graph_and_export(mlp(), {8, 64}, "mlp");
}

TEST(GraphMode, CnnExportedAndGraphModeMatchEager) {
  manual_seed(3);
  auto net = plain_cnn();
  net->eval();
  check_graph_and_export(net, {8, 1, 8, 8}, "cnn");
}

TEST(GraphMode, BatchNormCnnExportedAndGraphModeMatchEager) {
  manual_seed(4);
  check_graph_and_export(bn_cnn(), {8, 1, 8, 8}, "bn_cnn");
}

TEST(GraphMode, TransformerEncoderLayerExportedAndGraphModeMatchEager) {
  manual_seed(5);
  check_graph_and_export(encoder_layer(), {5, 3, 16}, "encoder");  // [seq, batch, d_model]
}

// gelu is gearbox's own com.gearbox.Gelu (ONNX has Gelu only from opset 20): the export keeps
// it in that domain, which onnx.checker accepts and gearbox runs.
TEST(GraphMode, GeluExportsInGearboxDomain) {
  manual_seed(7);
  TransformerEncoderLayerOptions options;
  options.dim_feedforward = 32;
  options.gelu = true;
  options.norm_first = true;
  auto layer = std::make_shared<TransformerEncoderLayer>(16, 4, options);
  layer->eval();
  Tensor x = Tensor::randn({3, 5, 16});
  std::vector<std::string> ops = trace(*layer, x).op_types();
  EXPECT_NE(std::find(ops.begin(), ops.end(), "com.gearbox.Gelu"), ops.end());
  check_graph_and_export(layer, {5, 3, 16}, "encoder_gelu");
}

TEST(GraphMode, GraphFunctionTracesOncePerShapeSignature) {
  manual_seed(6);
  auto net = mlp();
  GraphOptions options;
  options.max_signatures = 2;
  GraphFunction graph(net, options);
  for (int64_t batch : {4, 7, 4, 7, 4}) {
    Tensor x = Tensor::randn({batch, 64});
    Tensor want;
    {
      NoGradGuard no_grad;
      want = net->forward(x);
    }
    expect_close(graph(x), want, 1e-5, 1e-5, "batch " + std::to_string(batch));
  }
  EXPECT_EQ(graph.traces(), 2u);
  EXPECT_EQ(graph.cached_signatures(), 2u);
  graph(Tensor::randn({5, 64}));  // a third signature evicts the least recently used (7)
  EXPECT_EQ(graph.cached_signatures(), 2u);
  graph(Tensor::randn({4, 64}));
  EXPECT_EQ(graph.traces(), 3u);
  graph.clear();
  graph(Tensor::randn({4, 64}));
  EXPECT_EQ(graph.traces(), 4u);
}

TEST(GraphMode, FunctionsWithSeveralInputsConstantsAndOutputs) {
  Tensor c = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});  // captured: an initializer
  TensorFunction fn = [c](const std::vector<Tensor>& in) {
    Tensor s = in[0] * in[1] + c;
    return std::vector<Tensor>{s, in[0], relu(s - 2.0)};  // an input returned as it is, too
  };
  Tensor a = Tensor::from_vector(std::vector<float>{1, -2, 3, 4, 5, -6}, {2, 3});
  Tensor b = Tensor::from_vector(std::vector<float>{2, 2, 2, 1, 1, 1}, {2, 3});
  TracedGraph g = trace(fn, {a, b});
  EXPECT_EQ(g.input_names(), (std::vector<std::string>{"input_0", "input_1"}));
  EXPECT_EQ(g.output_names(), (std::vector<std::string>{"output_0", "output_1", "output_2"}));
  EXPECT_EQ(g.initializer_names().size(), 2u);  // c and the scalar 2

  GraphFunction graph(fn);
  graph({a, b});  // traced on these values; the next call's must not be frozen into the graph
  Tensor a2 = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {2, 3});
  std::vector<Tensor> outs = graph({a2, b});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].to_float_vector(), (std::vector<float>{1, 4, 7, 4, 6, 8}));
  EXPECT_EQ(outs[1].to_float_vector(), a2.to_float_vector());
  EXPECT_EQ(outs[2].to_float_vector(), (std::vector<float>{0, 2, 5, 2, 4, 6}));
}

// embedding's ids are an input of the graph: its host-side range check is left to the Gather
// kernel, and a second call with other ids gathers other rows.
TEST(GraphMode, EmbeddingIdsAreAnInput) {
  manual_seed(8);
  auto emb = std::make_shared<Embedding>(10, 4);
  GraphFunction graph(emb);
  for (const std::vector<int64_t>& ids : {std::vector<int64_t>{1, 2, 3}, std::vector<int64_t>{9, 0, 9}}) {
    Tensor t = Tensor::from_vector(ids, {3});
    EXPECT_EQ(graph(t).to_float_vector(), emb->forward(t).to_float_vector());  // a gather is exact
  }
  EXPECT_EQ(graph.traces(), 1u);
  EXPECT_EQ(error_code([&] { graph(Tensor::from_vector(std::vector<int64_t>{1, 10, 2}, {3})); }), "INVALID_ARGUMENT");
}

TEST(GraphMode, RefusesWhatCannotBeTraced) {
  Tensor x = Tensor::randn({2, 3});
  auto traced = [&](TensorFunction fn) { return error_code([&] { trace(fn, {x}); }); };
  // Host reads of values computed from the inputs.
  EXPECT_EQ(traced([](const std::vector<Tensor>& in) {
              Tensor s = sum(in[0]);
              return std::vector<Tensor>{in[0] * s.item()};
            }),
            "API_INVALID_ARGUMENT");
  EXPECT_EQ(traced([](const std::vector<Tensor>& in) {
              std::vector<float> v = relu(in[0]).to_float_vector();
              return std::vector<Tensor>{Tensor::from_vector(v, {2, 3})};
            }),
            "API_INVALID_ARGUMENT");
  EXPECT_EQ(traced([](const std::vector<Tensor>& in) {
              Tensor y = exp(in[0]);
              static_cast<float*>(y.mutable_data())[0] = 0;  // an in-place write the graph cannot see
              return std::vector<Tensor>{y};
            }),
            "API_INVALID_ARGUMENT");
  // Randomness, and modules in training mode.
  EXPECT_EQ(traced([](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{in[0] + Tensor::randn({2, 3})};
            }),
            "API_INVALID_ARGUMENT");
  Dropout drop(0.5);
  EXPECT_EQ(error_code([&] { trace(drop, x); }), "API_INVALID_ARGUMENT");
  drop.eval();
  EXPECT_EQ(error_code([&] { trace(drop, x); }), "");
  BatchNorm2d bn(2);
  Tensor img = Tensor::randn({2, 2, 3, 3});
  EXPECT_EQ(error_code([&] { trace(bn, img); }), "API_INVALID_ARGUMENT");
  EXPECT_EQ(bn.num_batches_tracked(), 0) << "a refused trace leaves the running statistics as they were";
  EXPECT_EQ(bn.running_mean().to_float_vector(), (std::vector<float>{0, 0}));
  bn.eval();
  EXPECT_EQ(error_code([&] { trace(bn, img); }), "");
  // A graph function inside a trace.
  auto inner = std::make_shared<GraphFunction>(
      TensorFunction([](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(in[0])}; }));
  EXPECT_EQ(traced([inner](const std::vector<Tensor>& in) { return (*inner)(in); }), "API_INVALID_ARGUMENT");
  // A loss's class ids may be an input: the graph checks them when it runs (GatherElements).
  Tensor targets = Tensor::from_vector(std::vector<int64_t>{0, 2}, {2});
  GraphFunction loss(
      TensorFunction([](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(in[0], in[1])}; }));
  EXPECT_NEAR(loss({x, targets})[0].item(), cross_entropy(x, targets).item(), 1e-6);
  EXPECT_EQ(error_code([&] { loss({x, Tensor::from_vector(std::vector<int64_t>{0, 3}, {2})}); }), "INVALID_ARGUMENT");
  // A step the dispatcher does not run (a collective is one), and a trace inside a trace.
  EXPECT_EQ(traced([](const std::vector<Tensor>& in) {
              return apply_function("Opaque", {in[0]}, {exp(in[0])}, [](const std::vector<Tensor>& g) { return g; });
            }),
            "OP_UNSUPPORTED");
  EXPECT_EQ(traced([](const std::vector<Tensor>& in) {
              trace([](const std::vector<Tensor>& inner) { return inner; }, in);
              return in;
            }),
            "API_INVALID_ARGUMENT");
  // Host reads of constants are fine: they are the same on every run.
  Tensor scale = Tensor::scalar(3.0);
  EXPECT_EQ(traced([scale](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * scale.item()}; }), "");
  // Eager mode after a refused trace is eager again.
  EXPECT_NO_THROW(sum(x).item());
}

}  // namespace
}  // namespace gbx::nn

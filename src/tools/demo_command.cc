// `gearbox demo`: the path from model development to deployment in one command, on data built
// into the binary (sklearn's digits, tools/digits_data.h; nothing downloaded). It trains the
// digits CNN of examples/digits_cnn.h in graph mode (each step one traced forward-and-backward
// graph, nn::GraphTrainStep) with a progress bar, exports it to ONNX and
// compiles it to .gbm (the framework layer's export, include/gearbox/nn_graph.hpp), runs the .gbm
// through a Session on every held-out digit, and prints the accuracy, whether the .gbm predicts
// what the trained network predicts, the latency of the compiled model against the same exported
// graph run with the graph passes off (and eager), and the profiler advisor's top finding.
// Seeded: the same split, initial weights and batches every run.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "digits_cnn.h"
#include "gearbox/nn_graph.hpp"
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "tools/commands.h"
#include "tools/digits_data.h"
#include "tools/profile_collect.h"
#include "tools/profile_report.h"
#include "tools/progress_display.h"

namespace gearbox::cli {
namespace {

namespace nn = gbx::nn;
using Clock = std::chrono::steady_clock;

struct DemoOptions {
  int epochs = 10;
  std::string output_dir;  // empty: a temporary folder, removed at the end
  bool json = false;
};

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The built-in digits as the examples' x.npy / y.npy hold them: pixels / 16, [N, 1, 8, 8].
std::pair<nn::Tensor, nn::Tensor> builtin_digits() {
  std::vector<float> x(kDigitsCount * kDigitsPixelsPerImage);
  std::transform(kDigitsPixels, kDigitsPixels + x.size(), x.begin(),
                 [](unsigned char p) { return static_cast<float>(p) / 16.0f; });
  std::vector<int64_t> y(kDigitsLabels, kDigitsLabels + kDigitsCount);
  const auto n = static_cast<int64_t>(kDigitsCount);
  return {nn::Tensor::from_vector(x, {n, 1, 8, 8}), nn::Tensor::from_vector(y, {n})};
}

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A held-out digit as a Session feed.
Tensor feed_of(const std::vector<float>& images, int64_t i) {
  Tensor t(DType::F32, {1, 1, 8, 8});
  std::copy_n(images.begin() + i * 64, 64, t.data<float>());
  return t;
}

// Owns the temporary output folder when the user gave none.
struct TempDir {
  std::filesystem::path path;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

int demo(const DemoOptions& o) {
  if (o.epochs < 1) return report(make_error(ErrorCode::USAGE, "--epochs must be >= 1 (got ", o.epochs, ")"));
  TempDir temp;
  std::filesystem::path dir = o.output_dir;
  std::error_code ec;
  if (dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path(ec) / "gearbox-demo-XXXXXX").string();
    if (ec || !mkdtemp(tmpl.data()))
      return report(make_error(ErrorCode::FILE_WRITE_FAILED, "cannot create a temporary folder for the demo's files"));
    dir = temp.path = tmpl;
  } else if (std::filesystem::create_directories(dir, ec); ec) {
    return report(
        make_error(ErrorCode::FILE_WRITE_FAILED, "cannot create output folder '", dir.string(), "': ", ec.message()));
  }
  const std::string onnx_path = (dir / "digits_cnn.onnx").string(), gbm_path = (dir / "digits_cnn.gbm").string();
  ConsoleProgress progress("demo", ConsoleProgress::on_terminal());
  nlohmann::json j;
  try {
    // 1. Data and training (graph mode: the same recipe as eager, Frontend/*_graph tests).
    auto [x, y] = builtin_digits();
    const digits::Split data = digits::split(x, y);
    const int64_t n_test = data.x_test.dim(0);
    nn::manual_seed(0);
    auto net = std::make_shared<digits::DigitsCnn>();
    int64_t params = 0;
    for (const nn::Tensor& p : net->parameters()) params += p.numel();
    digits::TrainOptions to;
    to.epochs = o.epochs;
    to.graph = true;
    const int64_t steps_per_epoch = data.x_train.dim(0) / to.batch;
    progress.begin("train", static_cast<uint64_t>(steps_per_epoch * to.epochs));
    const auto t_train = Clock::now();
    const std::vector<double> losses = digits::train(*net, data, to, [&](int e, int64_t s, int64_t steps, double) {
      progress.advance(static_cast<uint64_t>(e * steps + s + 1));
    });
    const double train_s = ms_since(t_train) / 1e3;
    net->eval();  // BatchNorm's running statistics; what is exported

    // 2. The trained network's own answers on the held-out digits.
    std::vector<float> eager_logits;
    {
      nn::NoGradGuard no_grad;
      eager_logits = (*net)(data.x_test).to_float_vector();
    }

    // 3. Export (the traced graph as ONNX) and compile (the same graph optimized into a .gbm:
    //    byte for byte what `gearbox compile digits_cnn.onnx` writes, GraphMode tests).
    progress.begin("export");
    const nn::Tensor example = nn::slice(data.x_test, 0, 0, 1);  // served one digit per request
    nn::TraceOptions names;
    names.input_names = {"image"};
    names.output_names = {"logits"};
    names.graph_name = "digits_cnn";
    nn::export_onnx(*net, example, onnx_path, names);
    nn::export_gbm(*net, example, gbm_path, names);

    // 4. Run the .gbm on every held-out digit.
    progress.begin("run .gbm", static_cast<uint64_t>(n_test));
    auto compiled = Session::load(gbm_path);
    if (!compiled.ok()) return report(compiled.status());
    // The baseline: the exported graph as traced, no graph pass (no Conv+BatchNorm folding, no
    // fusions, no memory plan), on the same runtime and kernels; so the difference is what the
    // compiler adds. Eager mode is shown beside it, but differs in more than the compiler (the
    // framework's per-op dispatch).
    SessionOptions off;
    off.optimizer.enabled = false;
    auto baseline = Session::load(onnx_path, off);
    if (!baseline.ok()) return report(baseline.status());
    const std::vector<float> images = data.x_test.to_float_vector();
    const std::vector<int64_t> labels = data.y_test.to_int64_vector();
    int64_t right_eager = 0, right_gbm = 0, same = 0;
    double max_diff = 0;
    for (int64_t i = 0; i < n_test; ++i) {
      auto r = (*compiled)->run({{"image", feed_of(images, i)}});
      if (!r.ok()) return report(r.status());
      const float* g = (*r)[0].data<float>();
      const float* e = eager_logits.data() + i * 10;
      for (int k = 0; k < 10; ++k) max_diff = std::max(max_diff, static_cast<double>(std::fabs(g[k] - e[k])));
      right_eager += argmax(e, 10) == labels[static_cast<size_t>(i)];
      right_gbm += argmax(g, 10) == labels[static_cast<size_t>(i)];
      same += argmax(g, 10) == argmax(e, 10);
      progress.advance(static_cast<uint64_t>(i + 1));
    }

    // 5. Latency, batch 1: compiled, baseline and eager alternated run by run, so that a busy
    //    machine slows all three alike.
    constexpr int kWarmup = 10, kRounds = 200;
    progress.begin("latency", kRounds);
    std::vector<double> t_gbm, t_base, t_eager;
    for (int i = 0; i < kWarmup + kRounds; ++i) {
      const int64_t d = i % n_test;
      std::map<std::string, Tensor> feeds{{"image", feed_of(images, d)}};
      auto t0 = Clock::now();
      auto a = (*compiled)->run(feeds);
      const double ga = ms_since(t0);
      t0 = Clock::now();
      auto b = (*baseline)->run(feeds);
      const double gb = ms_since(t0);
      if (!a.ok()) return report(a.status());
      if (!b.ok()) return report(b.status());
      const nn::Tensor one = nn::slice(data.x_test, 0, d, d + 1);
      t0 = Clock::now();
      {
        nn::NoGradGuard no_grad;
        (*net)(one);
      }
      const double ge = ms_since(t0);
      if (i < kWarmup) continue;
      t_gbm.push_back(ga);
      t_base.push_back(gb);
      t_eager.push_back(ge);
      progress.advance(static_cast<uint64_t>(i - kWarmup + 1));
    }

    // 6. The profiler's advisor on the compiled model (what `gearbox profile` prints).
    progress.begin("profile");
    Profiler profiler;
    for (int i = 0; i < 20; ++i) {
      auto r = (*compiled)->run({{"image", feed_of(images, i % n_test)}}, &profiler);
      if (!r.ok()) return report(r.status());
    }
    const std::vector<Finding> findings = advise(collect_profile(**compiled, profiler, gbm_path));
    progress.finish();

    const double acc_eager = 100.0 * static_cast<double>(right_eager) / static_cast<double>(n_test);
    const double acc_gbm = 100.0 * static_cast<double>(right_gbm) / static_cast<double>(n_test);
    const double m_gbm = median(t_gbm), m_base = median(t_base), m_eager = median(t_eager);
    const size_t nodes_onnx = (*baseline)->model().graph->nodes.size();
    const size_t nodes_gbm = (*compiled)->model().graph->nodes.size();
    if (o.json) {
      j = {{"train_digits", data.x_train.dim(0)},
           {"test_digits", n_test},
           {"parameters", params},
           {"epochs", o.epochs},
           {"steps", steps_per_epoch * o.epochs},
           {"train_seconds", train_s},
           {"train_mode", "graph"},
           {"epoch_losses", losses},
           {"eager_accuracy", acc_eager},
           {"gbm_accuracy", acc_gbm},
           {"predictions_equal", same},
           {"max_abs_logit_diff", max_diff},
           {"nodes", {{"onnx", nodes_onnx}, {"gbm", nodes_gbm}}},
           {"latency_ms", {{"gbm", m_gbm}, {"passes_off", m_base}, {"eager", m_eager}, {"rounds", kRounds}}},
           {"advisor", findings.empty() ? nlohmann::json(nullptr)
                                        : nlohmann::json{{"rule", findings[0].rule},
                                                         {"evidence", findings[0].evidence},
                                                         {"fix", findings[0].fix}}},
           {"threads", (*compiled)->threads()},
           {"files",
            o.output_dir.empty() ? nlohmann::json(nullptr) : nlohmann::json{{"onnx", onnx_path}, {"gbm", gbm_path}}}};
      std::cout << j.dump() << "\n";
    } else {
      std::cout << "gearbox demo: train a digits CNN, export it, compile it to .gbm and run it\n"
                << fmt::format("  data     sklearn's 8x8 digits (built in): {} training, {} held out (seeded split)\n",
                               data.x_train.dim(0), n_test)
                << fmt::format(
                       "  trained  {} epochs x {} steps of {} digits in {:.1f} s (graph mode, AdamW), loss "
                       "{:.3f} -> {:.3f}; {} parameters\n",
                       o.epochs, steps_per_epoch, to.batch, train_s, losses.front(), losses.back(), params)
                << fmt::format("  export   {} ({} nodes) -> compiled {} ({} nodes after the graph passes)\n",
                               o.output_dir.empty() ? "digits_cnn.onnx" : onnx_path, nodes_onnx,
                               o.output_dir.empty() ? "digits_cnn.gbm" : gbm_path, nodes_gbm)
                << fmt::format(
                       "  accuracy held-out {:.2f}% with the .gbm (one digit per run), {:.2f}% trained network\n",
                       acc_gbm, acc_eager)
                << fmt::format(
                       "  check    .gbm predictions equal to the trained network's: {} of {} (max |logit "
                       "difference| {:.2g})\n",
                       same, n_test, max_diff)
                << fmt::format(
                       "  latency  batch 1, median of {} alternated runs, {} threads: compiled .gbm {:.3f} ms; "
                       "same graph with the passes off {:.3f} ms ({:.2f}x); eager {:.3f} ms ({:.2f}x)\n",
                       kRounds, (*compiled)->threads(), m_gbm, m_base, m_base / m_gbm, m_eager, m_eager / m_gbm);
      if (findings.empty()) std::cout << "  advisor  no finding on the compiled model\n";
      else
        std::cout << "  advisor  [" << findings[0].rule << "] " << findings[0].evidence << "\n"
                  << "           fix: " << findings[0].fix << "\n";
      if (o.output_dir.empty())
        std::cout << "Next: gearbox demo --output-dir DIR keeps the .onnx and .gbm; gearbox profile MODEL "
                     "--random-inputs --output-dir prof/ (docs/framework.md, docs/cli.md)\n";
      else
        std::cout << fmt::format(
            "Next: gearbox run {} --random-inputs; gearbox profile {} --random-inputs "
            "--output-dir prof/ (docs/framework.md, docs/cli.md)\n",
            gbm_path, onnx_path);
    }
    if (same != n_test)
      return report(make_error(ErrorCode::INTERNAL,
                               "the compiled .gbm predicts another class than the trained "
                               "network for ",
                               n_test - same, " of ", n_test, " held-out digits"));
  } catch (const nn::Error& e) {
    const ErrorInfo* info = find_error_spec(e.code());
    return report(make_error(info ? static_cast<ErrorCode>(info->code) : ErrorCode::INTERNAL, e.what()));
  }
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* sub = app.add_subcommand(
      "demo", "Train a digits CNN (built-in data), export, compile to .gbm, run it: accuracy, latency, advisor");
  sub->add_option("--epochs", o->epochs, "Training epochs of 30 steps (default 10)");
  sub->add_option("--output-dir", o->output_dir,
                  "Keep digits_cnn.onnx and digits_cnn.gbm here (default: a temporary folder, removed)");
  sub->add_flag("--json", o->json, "Print one JSON object with the results on stdout");
  sub->callback([o, action] { *action = [o] { return demo(*o); }; });
}

}  // namespace gearbox::cli

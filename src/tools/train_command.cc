// `gearbox train MODEL.onnx --data DIR ... -o TUNED.onnx`: fine-tunes an imported ONNX model's
// float initializers (issue 22 item 7, like ONNX Runtime's on-device training) with the framework
// layer: the model runs eagerly through nn's dispatcher with the tape recording
// (frontend/onnx_training/imported_model.h), nn's losses and optimizers do the rest, and the
// tuned initializers are written back into the original ModelProto.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "base/npy.h"
#include "frontend/onnx_training/imported_model.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_amp.hpp"
#include "tools/commands.h"
#include "tools/progress_display.h"

namespace gearbox::cli {
namespace {

namespace nn = gbx::nn;
namespace fs = std::filesystem;

struct TrainOptions {
  std::string model;
  std::string data;
  std::string loss;
  std::string output_name;
  std::string optimizer;
  double lr = 0;
  int64_t batch = 0;
  int64_t epochs = 1;
  uint64_t seed = 0;
  bool no_shuffle = false;
  double momentum = 0;
  std::optional<double> weight_decay;
  std::string precision_mode = "fp32";
  std::string tuned;
  bool json = false;
};

// --precision-mode: the autocast level and reduced dtype (gearbox/nn_amp.hpp). CANN's names as
// compile takes them where they mean the same for training -- allow_mix_precision_X is O1 (white
// ops reduced, gray ones following their inputs, black ones and the loss float32), force_X is O3
// -- and MindSpore's levels spelled O1_bf16 ... O3_fp16; fp32 / force_fp32 / O0 train in float32.
struct AmpMode {
  nn::AmpLevel level = nn::AmpLevel::O0;
  nn::DType dtype = nn::DType::BFloat16;
};

std::optional<AmpMode> parse_amp_mode(const std::string& mode) {
  if (mode == "fp32" || mode == "force_fp32" || mode == "O0") return AmpMode{};
  for (const auto& [suffix, dtype] : {std::pair{"bf16", nn::DType::BFloat16}, std::pair{"fp16", nn::DType::Float16}}) {
    const std::string sfx = suffix;
    if (mode == "allow_mix_precision_" + sfx) return AmpMode{nn::AmpLevel::O1, dtype};
    if (mode == "force_" + sfx) return AmpMode{nn::AmpLevel::O3, dtype};
    for (nn::AmpLevel level : {nn::AmpLevel::O1, nn::AmpLevel::O2, nn::AmpLevel::O3})
      if (mode == std::string(nn::amp_level_name(level)) + "_" + sfx) return AmpMode{level, dtype};
  }
  return std::nullopt;
}

// nn::Error (the frontend's exception) as the Status every command reports.
Status to_status(const nn::Error& e) {
  const ErrorInfo* info = find_error(e.code());
  std::string msg = e.what();
  if (const size_t colon = msg.find(": "); colon != std::string::npos && msg.rfind("GBX-E", 0) == 0)
    msg = msg.substr(colon + 2);
  return Status(info ? static_cast<ErrorCode>(info->code) : ErrorCode::INTERNAL, msg);
}

// The samples: one array per model input and the labels, all with the same first dim.
struct Dataset {
  std::vector<std::pair<std::string, Tensor>> inputs;
  Tensor labels;
  int64_t samples = 0;
};

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + (d[i] < 0 ? std::string("?") : std::to_string(d[i]));
  return s + "]";
}

Result<Dataset> load_dataset(const nn::onnx_training::ImportedModel& m, const TrainOptions& o, bool* int_labels) {
  std::error_code ec;
  if (!fs::is_directory(o.data, ec))
    return make_error(ErrorCode::FILE_NOT_FOUND, "--data ", o.data,
                      " is not a folder. Give a folder with one .npy per ",
                      "model input (named after it, samples on the first axis) and labels.npy");
  Dataset ds;
  std::string first_name;
  auto check_count = [&](const std::string& what, const Tensor& t) -> Status {
    if (t.rank() == 0)
      return make_error(ErrorCode::INPUT_SHAPE_MISMATCH, what, " is a scalar; samples go on the first axis");
    if (first_name.empty()) {
      first_name = what;
      ds.samples = t.dim(0);
    } else if (t.dim(0) != ds.samples) {
      return make_error(ErrorCode::INPUT_SHAPE_MISMATCH, what, " has ", t.dim(0), " samples (first axis of ",
                        describe(t), ") but ", first_name, " has ", ds.samples,
                        ": every array in --data holds the same samples in the same order");
    }
    return Status::OK();
  };
  for (const auto& in : m.inputs()) {
    const std::string path = (fs::path(o.data) / (in.name + ".npy")).string();
    if (!fs::exists(path, ec))
      return make_error(ErrorCode::INPUT_MISSING, "model input '", in.name, "' (", in.dtype, dims_text(in.dims),
                        ") has no file ", path, " in --data: write one .npy per model input, named after it");
    auto t = read_npy(path);
    if (!t.ok()) return t.status();
    if (dtype_name(t->dtype()) != in.dtype)
      return make_error(ErrorCode::INPUT_DTYPE_MISMATCH, path, " is ", dtype_name(t->dtype()), " but model input '",
                        in.name, "' is ", in.dtype, ": save it as ", in.dtype, " (numpy: a.astype(...))");
    if (in.ranked) {
      bool fits = t->rank() == in.dims.size();
      for (size_t i = 1; fits && i < in.dims.size(); ++i) fits = in.dims[i] < 0 || in.dims[i] == t->dim(i);
      if (!fits)
        return make_error(ErrorCode::INPUT_SHAPE_MISMATCH, path, " is ", describe(*t), " but model input '", in.name,
                          "' is ", in.dtype, dims_text(in.dims),
                          ": each sample (the array without its first axis) must have the input's shape after "
                          "its batch dim");
    }
    if (Status s = check_count(path, *t); !s.ok()) return s;
    ds.inputs.emplace_back(in.name, std::move(*t));
  }
  const std::string lpath = (fs::path(o.data) / "labels.npy").string();
  if (!fs::exists(lpath, ec))
    return make_error(ErrorCode::INPUT_MISSING, "--data ", o.data, " has no labels.npy (",
                      o.loss == "cross_entropy" ? "int64 class ids [N]" : "float32 targets [N, ...]", ")");
  auto labels = read_npy(lpath);
  if (!labels.ok()) return labels.status();
  *int_labels = o.loss == "cross_entropy";
  if (*int_labels) {
    if (labels->dtype() == DType::I32) {  // numpy's default int on some platforms: widened
      Tensor wide(DType::I64, labels->dims());
      for (int64_t i = 0; i < wide.numel(); ++i) wide.data<int64_t>()[i] = labels->data<int32_t>()[i];
      *labels = std::move(wide);
    }
    if (labels->dtype() != DType::I64)
      return make_error(ErrorCode::INPUT_DTYPE_MISMATCH, lpath, " is ", describe(*labels),
                        "; --loss cross_entropy takes int64 class ids [N] (numpy: labels.astype(np.int64))");
    if (labels->rank() != 1)
      return make_error(ErrorCode::INPUT_SHAPE_MISMATCH, lpath, " is ", describe(*labels),
                        "; --loss cross_entropy takes one class id per sample, shape [N]");
  } else if (labels->dtype() != DType::F32) {
    return make_error(ErrorCode::INPUT_DTYPE_MISMATCH, lpath, " is ", describe(*labels),
                      "; --loss mse takes float32 targets of the output's shape (numpy: .astype(np.float32))");
  }
  if (Status s = check_count(lpath, *labels); !s.ok()) return s;
  ds.labels = std::move(*labels);
  if (ds.samples == 0) return make_error(ErrorCode::INPUT_SHAPE_MISMATCH, "--data ", o.data, " holds no samples");
  return ds;
}

// Rows `idx` of t (any dtype but strings), as an nn tensor.
nn::Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& idx) {
  Dims dims = t.dims();
  dims[0] = static_cast<int64_t>(idx.size());
  Tensor out(t.dtype(), dims);
  const size_t row = t.numel() == 0 ? 0 : t.nbytes() / static_cast<size_t>(t.dim(0));
  auto* dst = static_cast<char*>(out.mutable_raw());
  const auto* src = static_cast<const char*>(t.raw());
  for (size_t i = 0; i < idx.size(); ++i) std::memcpy(dst + i * row, src + static_cast<size_t>(idx[i]) * row, row);
  return nn::wrap(std::move(out));
}

// The shuffle: a Fisher-Yates pass per epoch driven by splitmix64 from --seed, written out here
// (std::shuffle's order is the standard library's choice) so a test can draw the same order:
// for i = n-1 down to 1: j = next() % (i + 1); swap(p[i], p[j]).
class Shuffler {
 public:
  explicit Shuffler(uint64_t seed) : state_(seed) {}
  void shuffle(std::vector<int64_t>& p) {
    for (size_t i = p.size(); i-- > 1;) std::swap(p[i], p[static_cast<size_t>(next() % (i + 1))]);
  }

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

// Per step: a bar redrawn in place on a terminal, a JSON line otherwise (both on stderr).
class StepReport {
 public:
  StepReport(int64_t epochs, int64_t steps_per_epoch)
      : epochs_(epochs), per_epoch_(steps_per_epoch), terminal_(ConsoleProgress::on_terminal()) {}
  ~StepReport() { finish(); }
  // Ends the bar's line, so what follows starts on its own.
  void finish() {
    if (terminal_ && drawn_) std::fputs("\n", stderr);
    drawn_ = false;
  }
  void step(int64_t epoch, int64_t step_in_epoch, int64_t step, double loss, double samples_per_s, double eta_s) {
    if (!terminal_) {
      nlohmann::json j{{"epoch", epoch},
                       {"step", step},
                       {"steps", epochs_ * per_epoch_},
                       {"loss", loss},
                       {"samples_per_s", samples_per_s},
                       {"eta_s", eta_s}};
      std::fputs((j.dump() + "\n").c_str(), stderr);
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    const bool last = step == epochs_ * per_epoch_;
    if (drawn_ && !last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    drawn_ = true;
    const double f = static_cast<double>(step) / static_cast<double>(epochs_ * per_epoch_);
    std::string bar(24, '.');
    std::fill_n(bar.begin(), static_cast<int>(f * 24), '#');
    std::fputs(fmt::format("\r\033[Ktrain: epoch {}/{} step {}/{} [{}] loss {:.6g}  {:.0f} samples/s  ETA {:.1f} s",
                           epoch, epochs_, step_in_epoch, per_epoch_, bar, loss, samples_per_s, eta_s)
                   .c_str(),
               stderr);
    std::fflush(stderr);
  }

 private:
  int64_t epochs_, per_epoch_;
  bool terminal_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_;
};

std::unique_ptr<nn::Optimizer> make_optimizer(const TrainOptions& o, std::vector<nn::Tensor> params) {
  if (o.optimizer == "sgd")
    return std::make_unique<nn::SGD>(
        std::move(params),
        nn::SGDOptions{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay.value_or(0)});
  if (o.optimizer == "adam")
    return std::make_unique<nn::Adam>(std::move(params),
                                      nn::AdamOptions{.lr = o.lr, .weight_decay = o.weight_decay.value_or(0)});
  return std::make_unique<nn::AdamW>(std::move(params),
                                     nn::AdamOptions{.lr = o.lr, .weight_decay = o.weight_decay.value_or(1e-2)});
}

int train(const TrainOptions& o) {
  const std::optional<AmpMode> amp = parse_amp_mode(o.precision_mode);
  if (!amp)
    return report(make_error(ErrorCode::USAGE, "--precision-mode ", o.precision_mode,
                             ": expected fp32, allow_mix_precision_bf16|fp16, force_bf16|fp16, or a level "
                             "O1|O2|O3 with _bf16 or _fp16 (docs/framework.md, \"Mixed precision\")"));
  if (!(o.lr > 0)) return report(make_error(ErrorCode::USAGE, "--lr must be > 0, not ", o.lr));
  if (o.momentum != 0 && o.optimizer != "sgd")
    return report(make_error(ErrorCode::USAGE, "--momentum is SGD's; ", o.optimizer,
                             " has its betas (torch's defaults 0.9, 0.999)"));
  if (o.batch <= 0 || o.epochs <= 0)
    return report(
        make_error(ErrorCode::USAGE, "--batch and --epochs must be > 0 (got ", o.batch, " and ", o.epochs, ")"));
  try {
    auto model = nn::onnx_training::ImportedModel::load(o.model, o.output_name);
    bool int_labels = false;
    auto ds = load_dataset(model, o, &int_labels);
    if (!ds.ok()) return report(ds.status());
    const int64_t n = ds->samples;
    if (int_labels) {
      for (int64_t i = 0; i < n; ++i)
        if (ds->labels.data<int64_t>()[i] < 0)
          return report(make_error(ErrorCode::INVALID_ARGUMENT, "labels.npy: sample ", i, " has class id ",
                                   ds->labels.data<int64_t>()[i], "; class ids are 0 .. classes-1"));
    }
    std::unique_ptr<nn::Optimizer> opt = make_optimizer(o, model.parameter_tensors());
    // The last batch of an epoch keeps the remainder (torch's DataLoader default, drop_last=False).
    const int64_t per_epoch = (n + o.batch - 1) / o.batch;
    StepReport shown(o.epochs, per_epoch);
    nn::LossScaler scaler;  // dynamic; only used under a reduced precision
    Shuffler shuffler(o.seed);
    std::vector<int64_t> order(static_cast<size_t>(n));
    int64_t step = 0;
    double final_loss = 0;
    std::vector<double> epoch_losses;
    const auto start = std::chrono::steady_clock::now();
    for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
      std::iota(order.begin(), order.end(), 0);
      if (!o.no_shuffle) shuffler.shuffle(order);
      double epoch_sum = 0;
      for (int64_t b = 0; b < per_epoch; ++b) {
        std::vector<int64_t> idx(order.begin() + b * o.batch, order.begin() + std::min(n, (b + 1) * o.batch));
        std::map<std::string, nn::Tensor> feeds;
        for (const auto& [name, t] : ds->inputs) feeds[name] = gather_rows(t, idx);
        nn::Tensor target = gather_rows(ds->labels, idx);
        // The forward pass and the loss under the precision mode; the loss itself is float32
        // (below O3), as are the master weights the optimizer updates.
        nn::Autocast autocast(amp->level, amp->dtype);
        nn::Tensor out = model.forward(feeds);
        nn::Tensor loss;
        if (int_labels) {
          if (out.rank() != 2 || out.dim(0) != target.dim(0))
            return report(make_error(ErrorCode::SHAPE_MISMATCH, "--loss cross_entropy needs logits [batch, classes]; ",
                                     "output '", model.output_name(), "' is ", out.describe(), " for a batch of ",
                                     idx.size(), ". Pick another output with --output, or use --loss mse"));
          const auto ids = target.to_int64_vector();
          for (size_t i = 0; i < ids.size(); ++i)
            if (ids[i] >= out.dim(1))
              return report(make_error(ErrorCode::INVALID_ARGUMENT, "labels.npy: sample ", idx[i], " has class id ",
                                       ids[i], " but output '", model.output_name(), "' has ", out.dim(1), " classes"));
          loss = nn::cross_entropy(out, target);
        } else {
          if (out.shape() != target.shape())
            return report(make_error(ErrorCode::INPUT_SHAPE_MISMATCH, "labels.npy: a batch of targets is ",
                                     target.describe(), " but output '", model.output_name(), "' is ", out.describe(),
                                     "; --loss mse needs targets of the output's shape per sample"));
          loss = nn::mse_loss(out, target);
        }
        opt->zero_grad();
        if (amp->level == nn::AmpLevel::O0) {
          loss.backward();
          opt->step();
        } else {
          scaler.scale(loss).backward();
          scaler.step(*opt);
        }
        ++step;
        final_loss = loss.item();
        epoch_sum += final_loss * static_cast<double>(idx.size());
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double done = static_cast<double>((epoch - 1) * n + b * o.batch + static_cast<int64_t>(idx.size()));
        const double rate = s > 0 ? done / s : 0;
        const double eta = rate > 0 ? (static_cast<double>(o.epochs * n) - done) / rate : 0;
        shown.step(epoch, b + 1, step, final_loss, rate, eta);
      }
      epoch_losses.push_back(epoch_sum / static_cast<double>(n));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    shown.finish();
    nn::onnx_training::write_tuned_onnx(o.model, o.tuned, model.parameters());

    const double samples_per_s = seconds > 0 ? static_cast<double>(o.epochs * n) / seconds : 0;
    nlohmann::json params = nlohmann::json::array(), frozen = nlohmann::json::array();
    int64_t numel = 0;
    for (const auto& [name, t] : model.parameters()) {
      params.push_back(name);
      numel += t.numel();
    }
    for (const auto& [name, why] : model.frozen()) frozen.push_back({{"name", name}, {"why", why}});
    if (o.json) {
      nlohmann::json j{{"model", o.model},
                       {"output", model.output_name()},
                       {"tuned", o.tuned},
                       {"loss", o.loss},
                       {"optimizer", o.optimizer},
                       {"lr", o.lr},
                       {"batch", o.batch},
                       {"epochs", o.epochs},
                       {"samples", n},
                       {"steps", step},
                       {"drop_remainder", false},
                       {"shuffle", !o.no_shuffle},
                       {"seed", o.seed},
                       {"final_loss", final_loss},
                       {"epoch_losses", epoch_losses},
                       {"seconds", seconds},
                       {"samples_per_s", samples_per_s},
                       {"parameters", params},
                       {"parameter_count", numel},
                       {"frozen", frozen},
                       {"precision_mode", o.precision_mode},
                       {"skipped_steps", scaler.skipped_steps()},
                       {"loss_scale", amp->level == nn::AmpLevel::O0 ? 1.0 : scaler.scale_value()}};
      std::cout << j.dump() << "\n";
    } else {
      std::cout << fmt::format(
          "trained {} initializers ({} values) of {} on output '{}': {} epochs, {} steps, "
          "final loss {:.6g}, {:.0f} samples/s\n",
          params.size(), numel, o.model, model.output_name(), o.epochs, step, final_loss, samples_per_s);
      for (const auto& [name, why] : model.frozen()) std::cout << "  not trained: " << name << " (" << why << ")\n";
      std::cout << "wrote " << o.tuned << "\n";
    }
    return 0;
  } catch (const nn::Error& e) {
    return report(to_status(e));
  } catch (const std::exception& e) {  // a builder's unchecked assumption: an error, not a crash
    return report(make_error(ErrorCode::INTERNAL, "gearbox train: ", e.what()));
  }
}

}  // namespace

void add_train_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<TrainOptions>();
  auto* sub =
      app.add_subcommand("train", "Fine-tune an ONNX model's float initializers on .npy data (docs/framework.md)");
  sub->add_option("model", o->model, "The .onnx model")->required();
  sub->add_option("--data", o->data, "Folder with one NAME.npy per model input (samples on axis 0) and labels.npy")
      ->required();
  sub->add_option("--loss", o->loss, "cross_entropy (labels: int64 class ids [N]) or mse (float32 targets)")
      ->required()
      ->check(CLI::IsMember({"cross_entropy", "mse"}));
  sub->add_option("--output", o->output_name, "The model output the loss is taken on (default: the first)");
  sub->add_option("--optimizer", o->optimizer, "sgd, adam or adamw (torch.optim's formulas)")
      ->required()
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  sub->add_option("--lr", o->lr, "Learning rate (> 0)")->required();
  sub->add_option("--batch", o->batch, "Samples per step; the last batch of an epoch keeps the remainder")->required();
  sub->add_option("--epochs", o->epochs, "Passes over the data (default 1)");
  sub->add_option("--seed", o->seed, "Seed of the per-epoch shuffle (default 0)");
  sub->add_flag("--no-shuffle", o->no_shuffle, "Take the samples in file order every epoch");
  sub->add_option("--momentum", o->momentum, "SGD momentum (default 0)");
  sub->add_option("--weight-decay", o->weight_decay, "Weight decay (default 0; adamw 0.01)");
  sub->add_option("--precision-mode", o->precision_mode,
                  "fp32 (default); mixed precision with a dynamic loss scaler: allow_mix_precision_bf16|fp16 "
                  "(O1), force_bf16|fp16 (O3), or O1|O2|O3 with _bf16 or _fp16");
  sub->add_option("-o,--tuned", o->tuned, "The tuned .onnx to write (the same graph, trained initializers)")
      ->required();
  sub->add_flag("--json", o->json, "Print one JSON object on stdout at the end");
  sub->callback([o, action] { *action = [o] { return train(*o); }; });
}

}  // namespace gearbox::cli

// nn::save_checkpoint / load_checkpoint (src/frontend/checkpoint): training resumed from a
// checkpoint follows the uninterrupted run bit for bit, for every optimizer; damaged files are
// CHECKPOINT_INVALID and models that do not fit are CHECKPOINT_MISMATCH naming the entry; the
// files are safetensors that Python reads by hand (and Python-written ones load). Multi-rank
// resumption is in tests/comm/data_parallel/checkpoint_resume_test.cc.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "gearbox/nn.hpp"

namespace nn = gbx::nn;

namespace {

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("gbx_ckpt_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// Removes this process's folder at the end (ctest runs each test in a process of its own).
class RemoveTempFolder : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("gbx_ckpt_" + std::to_string(getpid())), ec);
  }
};
const auto* const kRemoveTempFolder = ::testing::AddGlobalTestEnvironment(new RemoveTempFolder);

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// (Removed first: ext4 flushes a file truncated by O_TRUNC to disk, milliseconds per call.)
void write_bytes(const std::string& path, const std::string& bytes) {
  std::filesystem::remove(path);
  std::ofstream(path, std::ios::binary) << bytes;
}

// A small CNN with every kind of state: conv and linear parameters, BatchNorm's buffers.
std::shared_ptr<nn::Sequential> make_cnn() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 3, std::vector<int64_t>{3}, nn::Conv2dOptions{.padding = {1}}),
      std::make_shared<nn::BatchNorm2d>(3), std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(3 * 4 * 4, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3)});
}

std::shared_ptr<nn::Sequential> make_mlp(int64_t hidden = 6) {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(5, hidden), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(hidden, 3)});
}

// Batch `step` of a fixed data set (no generator: the model seeds must not move the data).
std::pair<nn::Tensor, nn::Tensor> cnn_batch(int step) {
  std::vector<float> x(4 * 16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + step));
  std::vector<int64_t> y{step % 3, (step + 1) % 3, 2, 0};
  return {nn::Tensor::from_vector(x, {4, 1, 4, 4}), nn::Tensor::from_vector(y, {4})};
}

struct OptimizerCase {
  std::string name;
  std::function<std::unique_ptr<nn::Optimizer>(std::vector<nn::Tensor>)> make;
};

std::vector<OptimizerCase> optimizer_cases() {
  return {
      {"SGDMomentum",
       [](std::vector<nn::Tensor> p) {
         return std::make_unique<nn::SGD>(p, nn::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3});
       }},
      {"SGDNesterov",
       [](std::vector<nn::Tensor> p) {
         return std::make_unique<nn::SGD>(p, nn::SGDOptions{.lr = 0.05, .momentum = 0.8, .nesterov = true});
       }},
      {"Adam",
       [](std::vector<nn::Tensor> p) {
         return std::make_unique<nn::Adam>(p, nn::AdamOptions{.lr = 0.01, .weight_decay = 1e-3});
       }},
      {"AdamW",
       [](std::vector<nn::Tensor> p) {
         return std::make_unique<nn::AdamW>(p, nn::AdamOptions{.lr = 0.01, .weight_decay = 1e-2});
       }},
      {"RMSpropCenteredMomentum",
       [](std::vector<nn::Tensor> p) {
         return std::make_unique<nn::RMSprop>(p, nn::RMSpropOptions{.lr = 0.01, .momentum = 0.5, .centered = true});
       }},
      {"Adagrad",
       [](std::vector<nn::Tensor> p) {
         return std::make_unique<nn::Adagrad>(
             p, nn::AdagradOptions{.lr = 0.05, .lr_decay = 0.01, .initial_accumulator_value = 0.1});
       }},
      // Two parameter groups (the first two parameters, the rest) with their own hyperparameters.
      {"SGDTwoGroups",
       [](std::vector<nn::Tensor> p) {
         return std::make_unique<nn::SGD>(
             std::vector<nn::SGDParamGroup>{{.params = {p.begin(), p.begin() + 2}, .lr = 0.02, .weight_decay = 1e-2},
                                            {.params = {p.begin() + 2, p.end()}, .nesterov = true}},
             nn::SGDOptions{.lr = 0.05, .momentum = 0.9});
       }},
      {"AdamWTwoGroupsAmsgrad",
       [](std::vector<nn::Tensor> p) {
         return std::make_unique<nn::AdamW>(
             std::vector<nn::AdamParamGroup>{{.params = {p.begin(), p.begin() + 2}, .amsgrad = true},
                                             {.params = {p.begin() + 2, p.end()}, .lr = 0.003, .weight_decay = 0.0}},
             nn::AdamOptions{.lr = 0.01, .weight_decay = 1e-2});
       }},
  };
}

std::map<std::string, std::vector<float>> values_of(const nn::Module& m) {
  std::map<std::string, std::vector<float>> out;
  for (auto& [name, t] : m.state_dict())
    out[name] = t.dtype() == nn::DType::Float32 ? t.to_float_vector()
                                                : std::vector<float>(1, static_cast<float>(t.to_double_vector()[0]));
  return out;
}

// Steps [from, to) of the training run: one optimizer step and one scheduler step each.
void train(nn::Module& net, nn::Optimizer& opt, nn::LRScheduler& sched, int from, int to) {
  for (int s = from; s < to; ++s) {
    auto [x, y] = cnn_batch(s);
    nn::Tensor loss = nn::cross_entropy(net(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    sched.step();
  }
}

class ResumeEquivalence : public ::testing::TestWithParam<size_t> {};

TEST_P(ResumeEquivalence, ResumedRunIsBitIdenticalToTheStraightRun) {
  const OptimizerCase c = optimizer_cases()[GetParam()];
  constexpr int kSteps = 8;
  // Straight run.
  nn::manual_seed(1);
  auto straight = make_cnn();
  auto straight_opt = c.make(straight->parameters());
  nn::StepLR straight_sched(*straight_opt, 3, 0.5);
  train(*straight, *straight_opt, straight_sched, 0, kSteps);

  // Half, checkpoint, and the other half in fresh objects built from another seed (and, for the
  // hyperparameters, another learning rate that the checkpoint must replace).
  const std::string path = temp_path(c.name + ".safetensors");
  {
    nn::manual_seed(1);
    auto first = make_cnn();
    auto opt = c.make(first->parameters());
    nn::StepLR sched(*opt, 3, 0.5);
    train(*first, *opt, sched, 0, kSteps / 2);
    nn::save_checkpoint(path, *first, opt.get(), {{"step", std::to_string(kSteps / 2)}}, &sched);
  }
  nn::manual_seed(99);
  auto resumed = make_cnn();
  auto opt = c.make(resumed->parameters());
  opt->set_lr(123.0);
  nn::StepLR sched(*opt, 3, 0.5);
  ASSERT_NE(values_of(*resumed), values_of(*straight));
  std::map<std::string, std::string> meta = nn::load_checkpoint(path, *resumed, opt.get(), true, &sched);
  EXPECT_EQ(meta.at("step"), "4");
  EXPECT_EQ(meta.at("gearbox.optimizer"), opt->kind());
  EXPECT_EQ(sched.last_epoch(), kSteps / 2);
  train(*resumed, *opt, sched, kSteps / 2, kSteps);

  for (size_t g = 0; g < opt->param_group_count(); ++g) EXPECT_EQ(opt->group_lr(g), straight_opt->group_lr(g));
  auto got = values_of(*resumed), want = values_of(*straight);
  ASSERT_EQ(got.size(), want.size());
  for (auto& [name, v] : want) {
    ASSERT_EQ(got[name].size(), v.size()) << name;
    EXPECT_EQ(0, std::memcmp(got[name].data(), v.data(), v.size() * sizeof(float))) << c.name << ": " << name;
  }
  // And the optimizer state itself.
  auto s1 = opt->state_dict(), s2 = straight_opt->state_dict();
  ASSERT_EQ(s1.size(), s2.size());
  for (auto& [name, t] : s2) {
    ASSERT_TRUE(s1.count(name)) << name;
    EXPECT_EQ(s1[name].to_double_vector(), t.to_double_vector()) << c.name << ": " << name;
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ResumeEquivalence, ::testing::Range<size_t>(0, optimizer_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) { return optimizer_cases()[i.param].name; });

// A checkpoint written before parameter groups: the optimizer's one group without
// "param_groups.0.params" (nor Adam's "amsgrad"), the scheduler's scalar "base_lr". It loads into
// the same single-group objects, and the run continues exactly as the one that wrote it.
TEST(CheckpointFile, SingleGroupCheckpointFromBeforeGroupsLoads) {
  for (const OptimizerCase& c : optimizer_cases()) {
    if (c.name.find("Groups") != std::string::npos) continue;
    nn::manual_seed(1);
    auto straight = make_cnn();
    auto straight_opt = c.make(straight->parameters());
    nn::StepLR straight_sched(*straight_opt, 3, 0.5);
    train(*straight, *straight_opt, straight_sched, 0, 4);
    const std::string path = temp_path(c.name + "_old.safetensors");
    nn::save_checkpoint(path, *straight, straight_opt.get(), {}, &straight_sched);
    nn::SafetensorsFile file = nn::load_safetensors(path);
    ASSERT_EQ(file.tensors.erase("optimizer.param_groups.0.params"), 1u) << c.name;
    file.tensors.erase("optimizer.param_groups.0.amsgrad");
    const double base_lr = file.tensors.at("scheduler.base_lrs").to_double_vector().at(0);
    file.tensors.erase("scheduler.base_lrs");
    file.tensors["scheduler.base_lr"] = nn::Tensor::scalar(base_lr, nn::DType::Float64);
    nn::save_safetensors(path, file.tensors, file.metadata);

    nn::manual_seed(99);
    auto resumed = make_cnn();
    auto opt = c.make(resumed->parameters());
    opt->set_lr(123.0);
    nn::StepLR sched(*opt, 3, 0.5);
    nn::load_checkpoint(path, *resumed, opt.get(), true, &sched);
    train(*straight, *straight_opt, straight_sched, 4, 8);
    train(*resumed, *opt, sched, 4, 8);
    EXPECT_EQ(opt->lr(), straight_opt->lr()) << c.name;
    EXPECT_EQ(values_of(*resumed), values_of(*straight)) << c.name;
    std::filesystem::remove(path);
  }
}

// Runs f and returns the nn::Error code it threw ("" if none; "other" for any other exception).
std::string error_code_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const nn::Error& e) {
    if (message) *message = e.what();
    return e.code();
  } catch (...) {
    return "other";
  }
  return "";
}

// A file of the given header JSON and data bytes, with the length prefix computed.
std::string safetensors_bytes(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json + data;
}

std::string load_code(const std::string& bytes, std::string* message = nullptr) {
  const std::string path = temp_path("bad.safetensors");
  write_bytes(path, bytes);
  return error_code_of([&] { nn::load_safetensors(path); }, message);
}

std::string repeated(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(CheckpointFile, HandWrittenFilesAreValidatedPrecisely) {
  const std::string eight(8, '\x01');
  // The well-formed baseline loads.
  EXPECT_EQ(load_code(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight)), "");
  EXPECT_EQ(load_code(safetensors_bytes(
                R"({"__metadata__":{"k":"v"},"a":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})", eight)),
            "");
  // Empty tensors and rank 64 are fine.
  EXPECT_EQ(
      load_code(safetensors_bytes(
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"I64","shape":[5,0],"data_offsets":[8,8]}})",
          eight)),
      "");
  EXPECT_EQ(load_code(safetensors_bytes(
                R"({"a":{"dtype":"F32","shape":[2)" + repeated(",1", 63) + R"(],"data_offsets":[0,8]}})", eight)),
            "");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"offsets past the end", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})"},
      {"begin after end", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"},
      {"gap", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"},
      {"not covering", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})"},
      {"unknown dtype", R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})"},
      {"dtype nn cannot hold", R"({"a":{"dtype":"I16","shape":[4],"data_offsets":[0,8]}})"},
      {"dtype not a string", R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})"},
      {"shape vs bytes", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})"},
      {"negative dim", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})"},
      {"fractional dim", R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})"},
      {"overflowing shape", R"({"a":{"dtype":"F64","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}})"},
      {"nested shape", R"({"a":{"dtype":"F32","shape":[[[[2]]]],"data_offsets":[0,8]}})"},
      {"huge dim of an empty tensor",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[4611686018427387904,0],"data_offsets":[8,8]}})"},
      {"rank 65", R"({"a":{"dtype":"F32","shape":[2)" + repeated(",1", 64) + R"(],"data_offsets":[0,8]}})"},
      {"missing key", R"({"a":{"dtype":"F32","shape":[2]}})"},
      {"extra key", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})"},
      {"offsets of three", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})"},
      {"entry not an object", R"({"a":[1,2]})"},
      {"header an array", R"([1,2])"},
      {"header not JSON", R"({"a":{"dtype":"F32",)"},
      {"metadata not strings", R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"},
  };
  for (auto& [what, json] : bad) {
    std::string message;
    EXPECT_EQ(load_code(safetensors_bytes(json, eight), &message), "CHECKPOINT_INVALID") << what;
    EXPECT_NE(message.find("GBX-E13001"), std::string::npos) << what << ": " << message;
  }
  // Header lengths that do not fit the file.
  std::string huge = safetensors_bytes("{}", "");
  for (uint64_t n : {uint64_t{3}, uint64_t{1} << 40, ~uint64_t{0}, uint64_t{1} << 63}) {
    std::memcpy(huge.data(), &n, 8);
    EXPECT_EQ(load_code(huge), "CHECKPOINT_INVALID") << n;
  }
  EXPECT_EQ(load_code("1234"), "CHECKPOINT_INVALID");
  EXPECT_EQ(load_code(""), "CHECKPOINT_INVALID");
  EXPECT_EQ(error_code_of([] { nn::load_safetensors(temp_path("no_such_file")); }), "FILE_NOT_FOUND");
}

class CheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    nn::manual_seed(3);
    net_ = make_mlp();
    opt_ = std::make_unique<nn::Adam>(net_->parameters(), nn::AdamOptions{});
    auto x = nn::Tensor::uniform({4, 5}, -1, 1);
    nn::Tensor loss = nn::mse_loss(net_->forward(x), nn::Tensor::zeros({4, 3}));
    loss.backward();
    opt_->step();
    path_ = temp_path("good.safetensors");
    nn::save_checkpoint(path_, *net_, opt_.get(), {{"epoch", "1"}});
    good_ = read_bytes(path_);
  }
  std::shared_ptr<nn::Sequential> net_;
  std::unique_ptr<nn::Optimizer> opt_;
  std::string path_, good_;
};

// Every truncation and every single-byte change of the header is either still a well-formed file
// (a flipped letter in a name, a digit in a value) or CHECKPOINT_INVALID, and loading it into the
// model is then CHECKPOINT_MISMATCH or fine: nothing else, nothing crashes.
TEST_F(CheckpointErrors, DamagedFilesAreInvalidNeverACrash) {
  uint64_t header = 0;
  std::memcpy(&header, good_.data(), 8);
  const std::string bad = temp_path("damaged.safetensors");
  for (size_t cut : {size_t{0}, size_t{3}, size_t{8}, size_t{9}, size_t{8 + header / 2}, size_t{8 + header - 1},
                     size_t{8 + header}, size_t{8 + header + 5}, good_.size() - 1}) {
    write_bytes(bad, good_.substr(0, cut));
    auto net = make_mlp();
    EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(bad, *net); }), "CHECKPOINT_INVALID") << "cut at " << cut;
  }
  std::mt19937 rng(5);
  int invalid = 0;
  for (size_t i = 0; i < 8 + header; ++i) {
    std::string damaged = good_;
    damaged[i] = static_cast<char>(damaged[i] ^ (1 + rng() % 255));
    write_bytes(bad, damaged);
    auto net = make_mlp();
    nn::Adam opt(net->parameters(), nn::AdamOptions{});
    const std::string code = error_code_of([&] { nn::load_checkpoint(bad, *net, &opt); });
    EXPECT_TRUE(code == "CHECKPOINT_INVALID" || code == "CHECKPOINT_MISMATCH" || code == "")
        << "byte " << i << ": " << code;
    invalid += code == "CHECKPOINT_INVALID";
  }
  EXPECT_GT(invalid, static_cast<int>(header) / 2);  // most header bytes matter
}

TEST_F(CheckpointErrors, ModelsThatDoNotFitAreMismatchNamingTheEntry) {
  std::string message;
  // An extra layer.
  auto deeper = std::make_shared<nn::Sequential>(
      std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(5, 6), std::make_shared<nn::ReLU>(),
                                               std::make_shared<nn::Linear>(6, 3), std::make_shared<nn::Linear>(3, 3)});
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(path_, *deeper); }, &message), "CHECKPOINT_MISMATCH");
  EXPECT_NE(message.find("'3."), std::string::npos) << message;
  // A missing layer.
  auto shallower = std::make_shared<nn::Sequential>(
      std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(5, 6), std::make_shared<nn::ReLU>()});
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(path_, *shallower); }, &message), "CHECKPOINT_MISMATCH");
  EXPECT_NE(message.find("'2.bias'"), std::string::npos) << message;
  // Another width: a shape difference, also when not strict.
  auto wider = make_mlp(7);
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(path_, *wider, nullptr, false); }, &message),
            "CHECKPOINT_MISMATCH");
  EXPECT_NE(message.find("'0.bias'"), std::string::npos) << message;
  EXPECT_NE(message.find("float32[6]"), std::string::npos) << message;
  // strict = false loads the common entries.
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(path_, *deeper, nullptr, false); }), "");
  EXPECT_EQ(deeper->state_dict().at("2.weight").to_float_vector(), net_->state_dict().at("2.weight").to_float_vector());
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(path_, *shallower, nullptr, false); }), "");
  // Another optimizer kind, or one over other parameters.
  auto net = make_mlp();
  nn::SGD sgd(net->parameters(), nn::SGDOptions{});
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(path_, *net, &sgd); }, &message), "CHECKPOINT_MISMATCH");
  EXPECT_NE(message.find("Adam"), std::string::npos) << message;
  nn::Adam fewer(std::vector<nn::Tensor>{net->parameters()[0]}, nn::AdamOptions{});
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(path_, *net, &fewer); }, &message), "CHECKPOINT_MISMATCH");
  EXPECT_NE(message.find("param_groups.0.params"), std::string::npos) << message;  // its group holds 4, not 1
  // The same with the group's indices gone (a file from before parameter groups): the state of
  // parameter 1 is one this optimizer does not have.
  nn::SafetensorsFile file = nn::load_safetensors(path_);
  file.tensors.erase("optimizer.param_groups.0.params");
  const std::string old_path = temp_path("before_groups.safetensors");
  nn::save_safetensors(old_path, file.tensors, file.metadata);
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(old_path, *net, &fewer); }, &message), "CHECKPOINT_MISMATCH");
  EXPECT_NE(message.find("state.1."), std::string::npos) << message;
  // A module-only file into a model with an optimizer: strict refuses, not strict loads the module.
  const std::string module_only = temp_path("module_only.safetensors");
  nn::save_checkpoint(module_only, *net_);
  nn::Adam adam(net->parameters(), nn::AdamOptions{});
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(module_only, *net, &adam); }), "CHECKPOINT_MISMATCH");
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(module_only, *net, &adam, false); }), "");
  EXPECT_EQ(net->state_dict().at("0.weight").to_float_vector(), net_->state_dict().at("0.weight").to_float_vector());
  // Reserved metadata keys.
  EXPECT_EQ(error_code_of([&] {
              nn::save_checkpoint(module_only, *net_, nullptr, {{"gearbox.x", "1"}});
            }),
            "INVALID_ARGUMENT");
}

TEST_F(CheckpointErrors, AFailedLoadChangesNothing) {
  nn::manual_seed(8);
  auto net = make_mlp();
  nn::Adam opt(std::vector<nn::Tensor>{net->parameters()[0]}, nn::AdamOptions{.lr = 0.5});
  const auto before = values_of(*net);
  EXPECT_EQ(error_code_of([&] { nn::load_checkpoint(path_, *net, &opt); }), "CHECKPOINT_MISMATCH");
  EXPECT_EQ(values_of(*net), before);
  EXPECT_EQ(opt.lr(), 0.5);
  EXPECT_TRUE(opt.state_dict().count("state.0.exp_avg") == 0);
}

TEST(CheckpointOptimizerState, HostileStateIsRejected) {
  nn::manual_seed(2);
  auto net = make_mlp();
  nn::RMSprop opt(net->parameters(), nn::RMSpropOptions{.centered = true});
  auto x = nn::Tensor::uniform({2, 5}, -1, 1);
  nn::mse_loss(net->forward(x), nn::Tensor::zeros({2, 3})).backward();
  opt.step();
  auto state = opt.state_dict();
  // Buffers that the options would not create: step() would index a missing one.
  auto no_grad_avg = state;
  no_grad_avg.erase("state.0.grad_avg");
  EXPECT_EQ(error_code_of([&] { opt.load_state_dict(no_grad_avg); }), "CHECKPOINT_INVALID");
  // A negative learning rate.
  auto negative = state;
  negative["param_groups.0.lr"] = nn::Tensor::scalar(-1, nn::DType::Float64);
  EXPECT_EQ(error_code_of([&] { opt.load_state_dict(negative); }), "CHECKPOINT_INVALID");
  // A buffer of another shape.
  auto reshaped = state;
  reshaped["state.0.square_avg"] = nn::Tensor::zeros({3});
  EXPECT_EQ(error_code_of([&] { opt.load_state_dict(reshaped); }), "CHECKPOINT_MISMATCH");
  EXPECT_EQ(error_code_of([&] { opt.load_state_dict(state); }), "");
}

// Kill -9 during save: the file at the path is always either the previous checkpoint or the
// complete new one (never a prefix), because the write goes through a temporary file and rename.
TEST(CheckpointFile, KilledWriterLeavesTheOldOrTheNewCheckpoint) {
  const std::string path = temp_path("killed.safetensors");
  nn::manual_seed(4);
  auto net = std::make_shared<nn::Sequential>(
      std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(256, 1024)});  // ~1 MB
  nn::save_checkpoint(path, *net, nullptr, {{"version", "old"}});
  std::mt19937 rng(11);
  int saw_new = 0;
  for (int attempt = 0; attempt < 6; ++attempt) {
    const pid_t child = fork();
    if (child == 0) {
      for (int i = 0;; ++i) nn::save_checkpoint(path, *net, nullptr, {{"version", "new" + std::to_string(i)}});
    }
    usleep(2000 + rng() % 20000);
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    auto loaded = make_mlp();
    std::map<std::string, std::string> meta;
    auto target = std::make_shared<nn::Sequential>(
        std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(256, 1024)});
    ASSERT_EQ(error_code_of([&] { meta = nn::load_checkpoint(path, *target); }), "") << "attempt " << attempt;
    saw_new += meta.at("version") != "old";
    EXPECT_EQ(values_of(*target), values_of(*net));
  }
  RecordProperty("runs_that_saw_a_new_file", saw_new);
  // Leftover temporary files of killed writers are the only other thing in the folder.
}

// torch <-> gearbox through the file, with Python reading and writing safetensors by hand
// (safetensors_interop.py): torch's MLP state dict loads into nn's MLP (same names, same forward
// output), and the checkpoint gearbox writes after one SGD-momentum step holds torch's parameters
// and momentum buffers after the same step.
TEST(CheckpointTorch, TorchStateDictLoadsAndGearboxCheckpointReadsInPython) {
  const std::string dir = std::filesystem::path(temp_path("torch")).string();
  std::filesystem::create_directories(dir);
  const std::string script =
      std::string(GEARBOX_PYTHON_EXE) + " " + GEARBOX_FRONTEND_TEST_SRC_DIR + "/safetensors_interop.py";
  ASSERT_EQ(std::system((script + " write " + dir).c_str()), 0);
  auto net = make_mlp();
  std::map<std::string, std::string> meta = nn::load_checkpoint(dir + "/torch_mlp.safetensors", *net);
  EXPECT_EQ(meta.at("source").rfind("torch", 0), 0u);
  nn::Tensor x = nn::load_npy(dir + "/x.npy"), t = nn::load_npy(dir + "/t.npy"), y = nn::load_npy(dir + "/y.npy");
  std::vector<float> got = net->forward(x).to_float_vector(), want = y.to_float_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;

  nn::SGD opt(net->parameters(), nn::SGDOptions{.lr = 0.1, .momentum = 0.9});
  nn::Tensor loss = nn::cross_entropy(net->forward(x), t);
  opt.zero_grad();
  loss.backward();
  opt.step();
  nn::save_checkpoint(dir + "/gearbox.safetensors", *net, &opt, {{"note", "from torch"}});
  EXPECT_EQ(std::system((script + " verify " + dir).c_str()), 0);
}

}  // namespace

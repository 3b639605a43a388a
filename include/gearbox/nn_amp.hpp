// gearbox's framework layer, automatic mixed precision: MindSpore's amp levels with PyTorch's
// autocast semantics, and loss scaling.
//
//   #include <gearbox/nn_amp.hpp>
//   nn::LossScaler scaler;                                   // dynamic: 2^16, x2 / x0.5
//   for (...) {
//     nn::Tensor loss;
//     {
//       nn::Autocast amp(nn::AmpLevel::O2, nn::DType::BFloat16);
//       loss = nn::cross_entropy(net.forward(x), y);
//     }
//     opt.zero_grad();
//     scaler.scale(loss).backward();
//     scaler.step(opt);                                     // skipped when a gradient overflowed
//   }
//
// While an Autocast is alive on a thread, every op that thread runs takes its float inputs
// (float32, bfloat16, float16; never float64 or integers) in the dtype the level gives the op.
// The op's class comes from the op-descriptor table, the same white/black/gray lists the graph
// engine's --precision-mode uses (docs/precision.md):
//   O0  nothing changes (float32).
//   O1  white ops (Conv, ConvTranspose, MatMul, Gemm: Linear, attention, the RNN cells' products)
//       run in the reduced dtype; black ops (normalizations, Softmax/LogSoftmax, reductions,
//       exp/log/pow, the losses) in float32; gray ops in their inputs' dtype, float32 when
//       they mix dtypes (torch's promotion).
//   O2  every op but the black ones in the reduced dtype; black ones in float32.
//   O3  every op in the reduced dtype.
// Parameters stay float32 (the master weights): an op casts them at each use, and the cast's
// gradient brings their gradient back in float32, so optimizers update float32 weights. An op
// with no kernel for the reduced dtype runs in float32 (said once on the log). Gradients run in
// the dtypes of their forward ops, whatever Autocast is alive during backward().
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "gearbox/nn.hpp"

namespace gbx::nn {

enum class AmpLevel { O0, O1, O2, O3 };
const char* amp_level_name(AmpLevel level);  // "O0" ...
// "O0".."O3" (MindSpore's spelling; "o2" too): INVALID_ARGUMENT naming the four otherwise.
AmpLevel parse_amp_level(std::string_view name);

// Mixed precision for the ops this thread runs while it lives (nests: the innermost wins).
// INVALID_ARGUMENT unless dtype is BFloat16 or Float16.
class Autocast {
 public:
  explicit Autocast(AmpLevel level, DType dtype = DType::BFloat16);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  AmpLevel previous_level_;
  DType previous_dtype_;
};
// The level and reduced dtype ops run under now (O0 and BFloat16 with no Autocast alive).
AmpLevel autocast_level();
DType autocast_dtype();

struct LossScalerOptions {
  double init_scale = 65536.0;     // 2^16
  double growth_factor = 2.0;      // after growth_interval finite steps in a row
  double backoff_factor = 0.5;     // after a step with an inf or NaN gradient
  int64_t growth_interval = 2000;  // finite steps before the scale grows
  bool dynamic = true;             // false: a static scaler (the scale stays init_scale)
};

// Loss scaling: the loss is multiplied by the scale before backward(), so that small gradients
// of reduced-precision ops do not flush to zero, and the gradients are divided by it before the
// optimizer uses them. A step whose gradients hold an inf or NaN is skipped (the parameters and
// the optimizer's state stay as they were) and counted; a dynamic scaler then multiplies the
// scale by backoff_factor, and by growth_factor after growth_interval finite steps in a row
// (torch.cuda.amp.GradScaler's rule; MindSpore's DynamicLossScaleManager). A power-of-two scale
// changes no gradient's value: training without overflow is what it is unscaled.
// INVALID_ARGUMENT for a non-finite or non-positive scale or factor, backoff_factor >= 1,
// growth_factor < 1, or growth_interval < 1.
class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});
  // The loss (converted to float32) times the scale: call backward() on this.
  Tensor scale(const Tensor& loss) const;
  // Divides the gradients of the optimizer's parameters by the scale and notes whether any is
  // inf or NaN. Once per step: a second call before step() does nothing (so clip_grad_norm can
  // run on the true gradients between unscale() and step()).
  void unscale(Optimizer& optimizer);
  // unscale() unless done, then optimizer.step() when every gradient is finite; then updates the
  // scale. Returns whether the optimizer stepped.
  bool step(Optimizer& optimizer);

  double scale_value() const { return scale_; }
  int64_t steps() const { return steps_; }                    // calls to step()
  int64_t skipped_steps() const { return skipped_steps_; }    // steps skipped for an overflow
  int64_t growth_tracker() const { return growth_tracker_; }  // finite steps since the last change
  const LossScalerOptions& options() const { return options_; }

  // "scale" (float64), "growth_tracker", "steps", "skipped_steps" (int64) scalars: what
  // save_checkpoint stores under "scaler.". load_state_dict: CHECKPOINT_MISMATCH for a missing
  // or extra key or a wrong shape or dtype, CHECKPOINT_INVALID for a scale that is not finite and
  // positive or a negative count; nothing changes when it throws.
  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t steps_ = 0;
  int64_t skipped_steps_ = 0;
  bool unscaled_ = false;        // unscale() ran for the coming step
  bool found_overflow_ = false;  // what it found
};

}  // namespace gbx::nn

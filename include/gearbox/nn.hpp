// gearbox's framework layer (layer 4): tensors with reverse-mode autodiff, modules and
// optimizers, in C++, on the same kernels the graph executor runs.
//
//   #include <gearbox/nn.hpp>
//   namespace nn = gbx::nn;
//   nn::manual_seed(0);
//   nn::Sequential net({std::make_shared<nn::Linear>(64, 32), std::make_shared<nn::ReLU>(),
//                       std::make_shared<nn::Linear>(32, 10)});
//   nn::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
//   nn::Tensor loss = nn::cross_entropy(net.forward(x), targets);
//   opt.zero_grad();
//   loss.backward();
//   opt.step();
//
// Eager mode: every op runs at once (on cpu.simd / cpu.dnnl where they have the kernel, on
// cpu.ref otherwise) and, when an input requires a gradient, records a tape node that
// backward() walks in reverse. See docs/framework.md. Graph mode (a function traced into the
// graph engine's IR and run from a Session per input shape) and export to ONNX and .gbm are in
// gearbox/nn_graph.hpp; mixed precision (autocast levels O0-O3, loss scaling) in gearbox/nn_amp.hpp.
//
// Errors: unlike gearbox.hpp, this API throws gbx::nn::Error (like PyTorch's C++ frontend),
// because ops compose into expressions; the error carries gearbox's catalogue code
// (`gearbox explain CODE` prints its cause and fix) and a message with the concrete values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gbx::nn {

// BFloat16 and Float16 are the reduced-precision dtypes of mixed-precision training
// (gearbox/nn_amp.hpp): storage formats whose ops compute in float32 and round once on store.
enum class DType { Float32, Float64, Int64, BFloat16, Float16 };
const char* dtype_name(DType t);

// A failed op or call: `code` is the catalogue name ("SHAPE_MISMATCH"), what() the one-line
// "GBX-E3003 SHAPE_MISMATCH: ..." form.
class Error : public std::runtime_error {
 public:
  Error(std::string code, const std::string& what) : std::runtime_error(what), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

struct TensorImpl;  // src/frontend/tensor_impl.h

// A tensor: dtype, shape, storage (shared: copies of a Tensor are the same tensor), and its
// autodiff state (requires_grad, the accumulated grad(), the tape node that produced it).
class Tensor {
 public:
  Tensor() = default;  // undefined
  bool defined() const { return impl_ != nullptr; }

  // Copies the values in; `shape` empty means 1-d of values.size().
  static Tensor from_vector(const std::vector<float>& values, std::vector<int64_t> shape = {});
  static Tensor from_vector(const std::vector<double>& values, std::vector<int64_t> shape = {});
  static Tensor from_vector(const std::vector<int64_t>& values, std::vector<int64_t> shape = {});
  static Tensor scalar(double v, DType dtype = DType::Float32);
  static Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::Float32);
  static Tensor full(std::vector<int64_t> shape, double v, DType dtype = DType::Float32);
  // Uniform in [low, high) / standard normal, from the generator manual_seed() seeds.
  static Tensor uniform(std::vector<int64_t> shape, double low, double high, DType dtype = DType::Float32);
  static Tensor randn(std::vector<int64_t> shape, DType dtype = DType::Float32);

  DType dtype() const;
  const std::vector<int64_t>& shape() const;
  int64_t dim(size_t i) const;
  size_t rank() const;
  int64_t numel() const;
  std::string describe() const;  // "float32[2,3]"

  // The elements, converted to T (row-major).
  std::vector<float> to_float_vector() const;
  std::vector<double> to_double_vector() const;
  std::vector<int64_t> to_int64_vector() const;
  // The value of a one-element tensor.
  double item() const;
  // Raw storage, for loaders and optimizers; writing is an in-place update that every
  // holder of this tensor (a tape node of a graph not yet walked) sees.
  const void* data() const;
  void* mutable_data();

  // Autodiff.
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on = true);  // only on leaves (tensors no op produced)
  bool is_leaf() const;
  Tensor grad() const;  // undefined until a backward() reaches this leaf
  void zero_grad();     // drops the accumulated gradient
  // Reverse-mode gradient of this tensor: a one-element tensor, or any shape with `grad_output`
  // of its shape. Accumulates into the grad() of every leaf that requires it.
  void backward(const Tensor& grad_output = Tensor()) const;
  // The same storage, no autodiff history, requires_grad false.
  Tensor detach() const;
  // The values converted to `dtype` (ONNX Cast: float to bfloat16/float16 rounds to nearest
  // even); its gradient is the output's converted back. This tensor when it already has it.
  Tensor to(DType dtype) const;
  Tensor clone() const;  // a deep copy, no history

  // Operators (broadcasting like numpy).
  Tensor operator-() const;

  // Internal: the frontend's own code reaches the implementation through these.
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, double b);
Tensor operator*(double a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);

// .npy files (float32, float64, int64 arrays), e.g. a data set exported from numpy.
Tensor load_npy(const std::string& path);
void save_npy(const std::string& path, const Tensor& t);

// While one lives on this thread, ops record nothing (evaluation, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};
bool grad_enabled();

// Seeds the generator behind Tensor::uniform/randn and the layers' initializers.
void manual_seed(uint64_t seed);

// torch.nn.init: explicit initializers, in place on a float tensor (a parameter, under no
// tape), drawing from the manual_seed generator. Fans as torch computes them for a weight
// [out, in, k...]: fan_in = in * prod(k), fan_out = out * prod(k). INVALID_ARGUMENT for a
// tensor with fewer than 2 dims where a fan is needed, or an unknown nonlinearity.
namespace init {
enum class FanMode { FanIn, FanOut };
// torch.nn.init.calculate_gain: linear, conv*, sigmoid 1; tanh 5/3; relu sqrt(2); leaky_relu
// sqrt(2 / (1 + param^2)); selu 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);
// {fan_in, fan_out}.
std::pair<int64_t, int64_t> fans(const Tensor& weight);
void uniform_(Tensor& t, double low = 0.0, double high = 1.0);
void normal_(Tensor& t, double mean = 0.0, double std = 1.0);
void constant_(Tensor& t, double value);
void zeros_(Tensor& t);
void ones_(Tensor& t);
// U(±gain sqrt(6 / (fan_in + fan_out))) and N(0, gain sqrt(2 / (fan_in + fan_out))).
void xavier_uniform_(Tensor& t, double gain = 1.0);
void xavier_normal_(Tensor& t, double gain = 1.0);
// U(±gain sqrt(3 / fan)) and N(0, gain / sqrt(fan)), gain = calculate_gain(nonlinearity, a),
// fan by `mode` (torch's defaults: a = 0, fan_in, leaky_relu).
void kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                      const std::string& nonlinearity = "leaky_relu");
void kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                     const std::string& nonlinearity = "leaky_relu");
}  // namespace init

// ---- ops (each with a gradient) -------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);  // the exact (erf) form, torch's default
Tensor softmax(const Tensor& x, int64_t axis);
Tensor log_softmax(const Tensor& x, int64_t axis);
// a [.., M, K] @ b [.., K, N], batch dims broadcast (rank >= 2).
Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., in] @ weight [out, in]^T + bias [out] (bias may be undefined): torch's F.linear.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// Empty axes: all of them.
Tensor sum(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Tensor reshape(const Tensor& x, std::vector<int64_t> shape);   // one -1 allowed
Tensor transpose(const Tensor& x, std::vector<int64_t> perm);  // empty perm: reverse the axes
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
// x[start:end] along `axis` (step 1; negative indices count from the end, like Python).
Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end);
// `parts` equal pieces of x along `axis` (its size must divide; torch.chunk when it does). One
// op for all pieces: its gradient is one Concat, where `parts` slices would each pad a
// gradient of x's full size (per-step slices of a sequence would cost O(steps^2)).
std::vector<Tensor> split(const Tensor& x, int64_t axis, int64_t parts);
// Keeps axes [0, start_axis) and merges the rest into one (torch.flatten(x, start_axis)).
Tensor flatten(const Tensor& x, int64_t start_axis = 1);
// Training: zeroes each element with probability p (mask drawn from the manual_seed()
// generator) and scales the kept ones by 1/(1-p); not training: x itself. p in [0, 1).
Tensor dropout(const Tensor& x, double p, bool training);
// Losses, reduction 'mean' (torch's defaults).
struct CrossEntropyOptions {
  int64_t ignore_index = -100;   // rows with this target count for nothing (nor in the mean)
  double label_smoothing = 0.0;  // in [0, 1]: the target mixed with the uniform distribution
};
// Mean cross-entropy of logits [N, C] against int64 class ids [N] (torch's F.cross_entropy).
// (Two overloads, not a default argument: a loss passed as a function, e.g. to
// PipelineParallel, is then written [](auto& y, auto& t) { return nn::cross_entropy(y, t); }.)
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options);
// -mean of log_probs[i, target_i] over the rows not ignored (torch's F.nll_loss).
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index = -100);
// Mean squared error (torch's F.mse_loss).
Tensor mse_loss(const Tensor& input, const Tensor& target);
// Mean absolute error (torch's F.l1_loss; the gradient at a zero difference is 0, as torch's).
Tensor l1_loss(const Tensor& input, const Tensor& target);
// torch's F.binary_cross_entropy_with_logits, in its overflow-safe form; pos_weight (undefined:
// 1) weighs the positive term and broadcasts against the last axis.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const Tensor& pos_weight = Tensor());

// ---- CNN ops (each with a gradient) ----------------------------------------------------
// (height, width) arguments take one value (both axes) or two.
// torch's F.conv2d: x [N, C_in, H, W], weight [C_out, C_in/groups, kH, kW], bias [C_out] or
// undefined; symmetric zero padding.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), std::vector<int64_t> stride = {1},
              std::vector<int64_t> padding = {0}, std::vector<int64_t> dilation = {1}, int64_t groups = 1);
// torch's F.conv1d: x [N, C_in, L], weight [C_out, C_in/groups, k], bias [C_out] or undefined.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// torch's F.conv_transpose2d: x [N, C_in, H, W], weight [C_in, C_out/groups, kH, kW], bias
// [C_out] or undefined; output_padding (< stride or < dilation) adds rows at the end.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
                        std::vector<int64_t> output_padding = {0}, int64_t groups = 1,
                        std::vector<int64_t> dilation = {1});
// torch's F.max_pool2d / F.avg_pool2d (ceil_mode false); empty stride: the kernel size.
// padding at most half the kernel.
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0});
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0}, bool count_include_pad = true);
// torch's F.adaptive_avg_pool2d: output [N, C, out_h, out_w] ({1} is global average pooling).
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);
// torch's F.batch_norm over x [N, C, ...]: with `training` (or without running statistics)
// normalizes with the batch's mean and population variance and, in training, updates the
// running buffers in place (running = (1 - momentum) running + momentum batch, the variance
// unbiased, as torch does); otherwise normalizes with the running statistics. weight/bias
// [C] may be undefined (1 and 0).
Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), bool training = false, double momentum = 0.1, double eps = 1e-5);
// torch's F.group_norm: x [N, C, ...] normalized over each group of C / num_groups channels
// (and all spatial positions), then weight/bias [C] (undefined: 1 and 0) per channel.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);
// torch's F.layer_norm over the trailing `normalized_shape` dims; weight/bias of that shape or
// undefined.
Tensor layer_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// torch's F.embedding: rows of weight [num_embeddings, dim] for int64 ids of any shape.
Tensor embedding(const Tensor& indices, const Tensor& weight);

// ---- modules --------------------------------------------------------------------------
// A network piece with named parameters (trainable tensors), buffers (state that is not
// trained) and submodules; names nest with '.' like torch's ("0.weight").
class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // Parameters and buffers by name (the tensors themselves, not copies).
  std::map<std::string, Tensor> state_dict() const;
  // Copies the values in; every name must exist with the same shape (INVALID_ARGUMENT /
  // SHAPE_MISMATCH otherwise).
  void load_state_dict(const std::map<std::string, Tensor>& state);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();

 protected:
  // Returns the tensor (the same one the module holds: copies share it).
  Tensor register_parameter(std::string name, Tensor t);
  Tensor register_buffer(std::string name, Tensor t);
  void register_module(std::string name, std::shared_ptr<Module> m);

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>* out, bool params) const;

  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// y = x W^T + b; PyTorch's default init: W ~ Kaiming-uniform(a = sqrt(5)) = U(±1/sqrt(in)),
// b ~ U(±1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias

 private:
  Tensor weight_, bias_;  // the same tensors as the registered parameters
};

// torch.nn.Conv2d: weight [out, in/groups, kH, kW] and bias [out], both initialized like
// torch (Kaiming-uniform a = sqrt(5): U(±1/sqrt(fan_in)), fan_in = in/groups * kH * kW).
struct Conv2dOptions {
  std::vector<int64_t> stride{1};
  std::vector<int64_t> padding{0};
  std::vector<int64_t> dilation{1};
  int64_t groups = 1;
  bool bias = true;
};
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, Conv2dOptions options = {});
  Tensor forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Conv2dOptions opt_;
  Tensor weight_, bias_;
};

// torch.nn.Conv1d: weight [out, in/groups, k] and bias [out], initialized like torch
// (U(±1/sqrt(fan_in)), fan_in = in/groups * k).
struct Conv1dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv1dOptions options = {});
  Tensor forward(const Tensor& x) override;

 private:
  Conv1dOptions opt_;
  Tensor weight_, bias_;
};

// torch.nn.ConvTranspose2d: weight [in, out/groups, kH, kW] and bias [out], initialized like
// torch (U(±1/sqrt(fan_in)) with torch's fan_in of this weight: out/groups * kH * kW).
struct ConvTranspose2dOptions {
  std::vector<int64_t> stride{1};
  std::vector<int64_t> padding{0};
  std::vector<int64_t> output_padding{0};
  int64_t groups = 1;
  bool bias = true;
  std::vector<int64_t> dilation{1};
};
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
                  ConvTranspose2dOptions options = {});
  Tensor forward(const Tensor& x) override;

 private:
  ConvTranspose2dOptions opt_;
  Tensor weight_, bias_;
};

// torch.nn.GroupNorm: weight 1 and bias 0 [num_channels] (affine), no running statistics.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override { return group_norm(x, groups_, weight_, bias_, eps_); }

 private:
  int64_t groups_;
  double eps_;
  Tensor weight_, bias_;
};

// torch's batch normalization layers: weight 1, bias 0 (parameters), buffers running_mean 0,
// running_var 1 and num_batches_tracked (int64, counted in train()); batch statistics in
// train(), running ones in eval().
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  int64_t num_batches_tracked() const;

 protected:
  // `name` and `shapes` ("[N, C, H, W]") for messages; `ranks`: the input ranks the layer takes.
  BatchNorm(const char* name, std::vector<size_t> ranks, const char* shapes, int64_t num_features, double eps,
            double momentum);

 private:
  const char *name_, *shapes_;
  std::vector<size_t> ranks_;
  double eps_, momentum_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};
// torch.nn.BatchNorm1d: [N, C] or [N, C, L].
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1)
      : BatchNorm("BatchNorm1d", {2, 3}, "[N, C] or [N, C, L]", num_features, eps, momentum) {}
};
// torch.nn.BatchNorm2d: [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1)
      : BatchNorm("BatchNorm2d", {4}, "[N, C, H, W]", num_features, eps, momentum) {}
};

// torch.nn.LayerNorm over the trailing `normalized_shape` dims: weight 1, bias 0.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5);
  Tensor forward(const Tensor& x) override { return layer_norm(x, shape_, weight_, bias_, eps_); }

 private:
  std::vector<int64_t> shape_;
  double eps_;
  Tensor weight_, bias_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                     std::vector<int64_t> padding = {0})
      : k_(std::move(kernel_size)), s_(std::move(stride)), p_(std::move(padding)) {}
  Tensor forward(const Tensor& x) override { return max_pool2d(x, k_, s_, p_); }

 private:
  std::vector<int64_t> k_, s_, p_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                     std::vector<int64_t> padding = {0}, bool count_include_pad = true)
      : k_(std::move(kernel_size)), s_(std::move(stride)), p_(std::move(padding)), include_pad_(count_include_pad) {}
  Tensor forward(const Tensor& x) override { return avg_pool2d(x, k_, s_, p_, include_pad_); }

 private:
  std::vector<int64_t> k_, s_, p_;
  bool include_pad_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::vector<int64_t> output_size) : out_(std::move(output_size)) {}
  Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, out_); }

 private:
  std::vector<int64_t> out_;
};

// torch.nn.Embedding: weight [num_embeddings, dim] ~ N(0, 1); forward takes int64 ids.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& ids) override { return embedding(ids, weight_); }
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;
};

// torch.nn.MultiheadAttention (scaled dot-product attention over num_heads heads of
// embed_dim / num_heads features): parameters in_proj_weight [3E, E] (Xavier-uniform),
// in_proj_bias [3E] (zeros), out_proj.weight [E, E] and out_proj.bias [E] (zeros), named as
// torch names them so a torch state dict loads. Inputs [batch, seq, E] with batch_first, else
// [seq, batch, E] (torch's default). attn_mask, if defined, is added to the scores: a float
// [L, S] mask (0 to keep, -inf or a large negative to mask). Keys of different lengths from the
// queries (cross-attention) are fine; key_padding_mask and bool masks are not supported.
struct MultiheadAttentionOptions {
  double dropout = 0.0;  // on the attention weights, in train()
  bool bias = true;
  bool batch_first = false;
};
struct AttentionResult {
  Tensor output;   // like query
  Tensor weights;  // [batch, L, S], averaged over the heads; undefined unless need_weights
};
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});
  AttentionResult attend(const Tensor& query, const Tensor& key, const Tensor& value,
                         const Tensor& attn_mask = Tensor(), bool need_weights = true);
  Tensor forward(const Tensor& x) override { return attend(x, x, x, Tensor(), false).output; }  // self-attention

 private:
  int64_t embed_dim_, num_heads_;
  MultiheadAttentionOptions opt_;
  Tensor in_proj_weight_, in_proj_bias_;
  std::shared_ptr<Linear> out_proj_;
};

// torch.nn.TransformerEncoderLayer: self-attention and a feed-forward block (linear1,
// activation, linear2), each with dropout, a residual connection and a LayerNorm, after
// (post-norm, torch's default) or before (norm_first) the block. Submodules self_attn, linear1,
// linear2, norm1, norm2 as torch names them.
struct TransformerEncoderLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  bool gelu = false;  // the activation: relu (torch's default) or gelu
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
};
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions options = {});
  // src_mask: as MultiheadAttention's attn_mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask);
  Tensor feed_forward_block(const Tensor& x);

  TransformerEncoderLayerOptions opt_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
};

// torch.nn.LSTM and torch.nn.GRU. Inputs [seq, batch, input_size] ([batch, seq, input_size]
// with batch_first), or unbatched [seq, input_size]; initial states [D * num_layers, batch,
// hidden_size] ([D * num_layers, hidden_size] unbatched; D = 2 if bidirectional, else 1),
// zeros when undefined. Parameters per layer k and direction as torch names them, so a torch
// state dict loads: weight_ih_l{k} [G * hidden, in] (in: input_size for layer 0, D * hidden
// after), weight_hh_l{k} [G * hidden, hidden], bias_ih_l{k} and bias_hh_l{k} [G * hidden]
// (without bias: none), the reverse direction's with the suffix "_reverse"; the gates stacked
// in torch's order (LSTM, G = 4: i, f, g, o; GRU, G = 3: r, z, n). All initialized U(±1/sqrt(hidden))
// from the manual_seed() generator, as torch does. proj_size is not offered.
struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;  // on each layer's output but the last one's, in train() only
  bool bidirectional = false;
};
struct RNNResult {
  Tensor output;  // [seq, batch, D * hidden] (batch_first: [batch, seq, ...]; unbatched: [seq, ...])
  Tensor h_n;     // the last hidden state of every layer and direction, like the initial state
  Tensor c_n;     // LSTM: the last cell state, likewise; GRU: undefined
};
class RNNBase : public Module {
 public:
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  const RNNOptions& options() const { return opt_; }
  Tensor forward(const Tensor& x) override { return recur(x, Tensor(), Tensor()).output; }

 protected:
  enum class Cell { LSTM, GRU };
  RNNBase(Cell cell, int64_t input_size, int64_t hidden_size, RNNOptions options);
  RNNResult recur(const Tensor& input, const Tensor& h0, const Tensor& c0);

 private:
  struct Weights {
    Tensor w_ih, w_hh, b_ih, b_hh;  // b_* undefined without bias
  };
  const char* name() const { return cell_ == Cell::LSTM ? "LSTM" : "GRU"; }
  void check_state(const Tensor& state, const char* what, const std::vector<int64_t>& expected) const;

  Cell cell_;
  int64_t input_size_, hidden_size_;
  RNNOptions opt_;
  std::vector<Weights> weights_;  // layer-major: [k * D + direction]
};
class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, RNNOptions options = {})
      : RNNBase(Cell::LSTM, input_size, hidden_size, options) {}
  // h0 and c0 both or neither (torch's hx tuple).
  RNNResult forward_with_state(const Tensor& input, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor()) {
    return recur(input, h0, c0);
  }
};
class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, RNNOptions options = {})
      : RNNBase(Cell::GRU, input_size, hidden_size, options) {}
  RNNResult forward_with_state(const Tensor& input, const Tensor& h0 = Tensor()) { return recur(input, h0, Tensor()); }
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
};

// torch.nn.Flatten (start_dim 1).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_axis = 1) : start_axis_(start_axis) {}
  Tensor forward(const Tensor& x) override { return flatten(x, start_axis_); }

 private:
  int64_t start_axis_;
};

// torch.nn.Dropout: drops with probability p in train(), identity in eval().
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5) : p_(p) {}
  Tensor forward(const Tensor& x) override { return dropout(x, p_, is_training()); }

 private:
  double p_;
};

// Runs its modules in order; they are named "0", "1", ... like torch.nn.Sequential.
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return modules_.size(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// ---- optimizers (torch.optim's formulas, step for step) -------------------------------
// Parameter groups (torch's param_groups): an optimizer built from a list of groups steps each
// group's parameters with that group's hyperparameters. What a group leaves unset (nullopt)
// comes from the optimizer's defaults, as torch fills a group's dict from its keyword arguments:
//   // torch: SGD([{'params': body, 'lr': 0.1}, {'params': head, 'weight_decay': 0}],
//   //            lr=0.01, momentum=0.9, weight_decay=1e-4)
//   nn::SGD opt({{.params = body, .lr = 0.1}, {.params = head, .weight_decay = 0.0}},
//               {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4});
// params() is the groups' parameters in order (torch's numbering: "state.<i>" in a state dict).
// A group without parameters, a parameter in two groups (or twice in one) and hyperparameters
// the optimizer rejects are INVALID_ARGUMENT naming the group. The constructors from a plain
// parameter list make one group (which may be empty: ZeroRedundancyOptimizer's ranks that own
// nothing).
class Optimizer {
 public:
  // One group.
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad();
  const std::vector<Tensor>& params() const { return params_; }
  size_t param_group_count() const { return group_begin_.size(); }
  // Group g's parameters: params()[param_group_begin(g), param_group_end(g)).
  size_t param_group_begin(size_t g) const;
  size_t param_group_end(size_t g) const;
  // Group 0's learning rate (the one rate of a single-group optimizer), and a setter for every
  // group's.
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;
  // Group g's learning rate, what the schedulers scale group by group (as torch's do). The
  // defaults serve an optimizer of one group: its lr().
  virtual double group_lr(size_t g) const;
  virtual void set_group_lr(size_t g, double lr);
  // Bytes of the per-element state this optimizer holds now (momentum buffers, Adam's moments,
  // ...; allocated lazily by most at a parameter's first step), not counting scalar counters:
  // what sharding the optimizer (ZeroRedundancyOptimizer) divides among the ranks.
  virtual size_t state_bytes() const { return 0; }
  // "SGD", "Adam", "AdamW", "RMSprop", "Adagrad": what a checkpoint records, so that state is
  // never loaded into an optimizer of another kind.
  virtual std::string kind() const = 0;
  // torch's optimizer.state_dict(), flattened into named tensors (copies): per parameter index i
  // (into params()) that has state, "state.<i>.<buffer>" (momentum_buffer, exp_avg, exp_avg_sq,
  // max_exp_avg_sq, square_avg, grad_avg, sum: float32 of the parameter's shape; step: int64
  // scalar), and per group g its hyperparameters as float64 scalars "param_groups.<g>.<name>"
  // (lr, momentum, ...; flags 0 or 1) and "param_groups.<g>.params", the int64 indices of its
  // parameters. The base class has none to give: INVALID_ARGUMENT.
  virtual std::map<std::string, Tensor> state_dict() const;
  // Restores what state_dict() gave, every group's hyperparameters (lr) included, as torch does.
  // Every key must be one this optimizer writes and fit its parameter (CHECKPOINT_MISMATCH naming
  // the key), the groups must be this optimizer's (their number and parameters: CHECKPOINT_MISMATCH);
  // invalid hyperparameter values are CHECKPOINT_INVALID. Nothing changes when it throws. A state
  // dict from before parameter groups (one group, no "param_groups.0.params") loads into an
  // optimizer of one group.
  virtual void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  // The groups' parameters, concatenated into params_; `who` (the kind) names them in errors.
  Optimizer(const std::string& who, std::vector<std::vector<Tensor>> groups);
  [[noreturn]] void throw_no_group(size_t g) const;
  std::vector<Tensor> params_;
  std::vector<size_t> group_begin_;  // where each group starts in params_
};

// What every optimizer below shares: one Options per parameter group.
template <typename Options>
class GroupedOptimizer : public Optimizer {
 public:
  double lr() const override { return opt_.front().lr; }
  void set_lr(double lr) override {
    for (Options& o : opt_) o.lr = lr;
  }
  double group_lr(size_t g) const override { return options(g).lr; }
  void set_group_lr(size_t g, double lr) override {
    if (g >= opt_.size()) throw_no_group(g);
    opt_[g].lr = lr;
  }
  // Group g's hyperparameters, the defaults filled in.
  const Options& options(size_t g = 0) const {
    if (g >= opt_.size()) throw_no_group(g);
    return opt_[g];
  }

 protected:
  GroupedOptimizer(std::vector<Tensor> params, const Options& options) : Optimizer(std::move(params)), opt_{options} {}
  GroupedOptimizer(const std::string& who, std::vector<std::vector<Tensor>> groups)
      : Optimizer(who, std::move(groups)) {}
  std::vector<Options> opt_;  // per group
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};
// A parameter group of SGD: its parameters and what it sets differently from the defaults.
struct SGDParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr{}, momentum{}, dampening{}, weight_decay{};
  std::optional<bool> nesterov{};
};

class SGD : public GroupedOptimizer<SGDOptions> {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  explicit SGD(std::vector<SGDParamGroup> groups, SGDOptions defaults = {});
  void step() override;
  size_t state_bytes() const override;
  std::string kind() const override { return "SGD"; }
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 private:
  std::vector<std::vector<float>> momentum_;  // per parameter; empty until its first step
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2 added to the gradient; AdamW: decoupled
  bool amsgrad = false;     // divide by the largest second moment so far (torch's amsgrad)
};
struct AdamParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr{}, beta1{}, beta2{}, eps{}, weight_decay{};
  std::optional<bool> amsgrad{};
};

class Adam : public GroupedOptimizer<AdamOptions> {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay = false);
  explicit Adam(std::vector<AdamParamGroup> groups, AdamOptions defaults = {}, bool decoupled_weight_decay = false);
  void step() override;
  size_t state_bytes() const override;
  std::string kind() const override { return decoupled_ ? "AdamW" : "Adam"; }
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 private:
  bool decoupled_;
  int64_t step_ = 0;
  std::vector<std::vector<float>> exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
};

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;  // smoothing of the squared-gradient average
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;  // divide by the gradient's estimated variance instead of its second moment
};
struct RMSpropParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr{}, alpha{}, eps{}, weight_decay{}, momentum{};
  std::optional<bool> centered{};
};

// torch.optim.RMSprop.
class RMSprop : public GroupedOptimizer<RMSpropOptions> {
 public:
  RMSprop(std::vector<Tensor> params, RMSpropOptions options);
  explicit RMSprop(std::vector<RMSpropParamGroup> groups, RMSpropOptions defaults = {});
  void step() override;
  size_t state_bytes() const override;
  std::string kind() const override { return "RMSprop"; }
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 private:
  std::vector<std::vector<float>> square_avg_, grad_avg_, momentum_buffer_;
};

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
};
struct AdagradParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr{}, lr_decay{}, weight_decay{}, initial_accumulator_value{}, eps{};
};

// torch.optim.Adagrad.
class Adagrad : public GroupedOptimizer<AdagradOptions> {
 public:
  Adagrad(std::vector<Tensor> params, AdagradOptions options);
  explicit Adagrad(std::vector<AdagradParamGroup> groups, AdagradOptions defaults = {});
  void step() override;
  size_t state_bytes() const override;
  std::string kind() const override { return "Adagrad"; }
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 private:
  void init_sums();
  std::vector<std::vector<float>> sum_;
  std::vector<int64_t> steps_;
};

// ---- learning-rate schedulers (torch.optim.lr_scheduler's chainable forms, step for step) --
// Each changes its optimizer's learning rates per step() (once per epoch, as in torch) with
// torch's own recursive formula, every parameter group's from its own current and base rate, so
// the rates equal torch's in double precision. Construction applies epoch 0, as torch's
// constructors do (LinearLR starts at lr * start_factor).
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  void step();
  // Group 0's rate / every group's (torch's get_last_lr()).
  double last_lr() const { return optimizer_.lr(); }
  std::vector<double> last_lrs() const;
  int64_t last_epoch() const { return last_epoch_; }
  // torch's scheduler.state_dict(), the counters that make the next step() continue the schedule:
  // int64 scalars "last_epoch", "step_count" and the float64 [groups] "base_lrs". Load it into a
  // scheduler of the same kind and settings, over the optimizer whose state was loaded too (the
  // current rates are the optimizer's). CHECKPOINT_MISMATCH on a missing or unexpected key or
  // another number of groups. (Files from before parameter groups hold a scalar "base_lr"
  // instead: it loads over an optimizer of one group.)
  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // A group's rate for epoch last_epoch_ from its current one and its base (torch's get_lr).
  virtual double next_lr(double current, double base_lr) const = 0;
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;  // per group
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
};

// torch.optim.lr_scheduler.StepLR: lr * gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 private:
  double next_lr(double current, double base_lr) const override;
  int64_t step_size_;
  double gamma_;
};

// torch.optim.lr_scheduler.CosineAnnealingLR: from the base rate down to eta_min over t_max
// epochs along a half cosine (and back up after, as torch's does).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0);

 private:
  double next_lr(double current, double base_lr) const override;
  int64_t t_max_;
  double eta_min_;
};

// torch.optim.lr_scheduler.LinearLR, the linear warm-up: the rate goes from base * start_factor
// to base * end_factor over total_iters epochs, then stays.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 private:
  double next_lr(double current, double base_lr) const override;
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// torch.nn.utils.clip_grad_norm_: scales every grad() by max_norm / (norm + 1e-6) when the 2-norm
// of all of them together exceeds max_norm; returns that norm. Under DistributedDataParallel
// call it after synchronize_gradients(): every rank then holds the averaged gradients, so the
// norm is the global one (the same on every rank).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// Adam with decoupled weight decay (torch.optim.AdamW; its default weight_decay is 1e-2).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, true) {}
  explicit AdamW(std::vector<AdamParamGroup> groups, AdamOptions defaults = AdamOptions{.weight_decay = 1e-2})
      : Adam(std::move(groups), defaults, true) {}
};

// ---- checkpoints (docs/framework.md, "Checkpoints") --------------------------------------
// One safetensors file (the format of Hugging Face's safetensors package: an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, a
// "__metadata__" string map, then the raw little-endian data) holding the module's state_dict()
// under its own names, the optimizer's under "optimizer." and the scheduler's under
// "scheduler.", and in the metadata the caller's strings plus "gearbox.format_version" and
// "gearbox.optimizer" (its kind()). Values are full, unsharded tensors: under data parallelism
// rank 0 writes one and any number of ranks load it.
//
// The file is replaced atomically (temporary file, fsync, rename): a crash while writing leaves
// the previous checkpoint. FILE_WRITE_FAILED when it cannot be written; INVALID_ARGUMENT for
// metadata keys starting with "gearbox.".
// A mixed-precision run's LossScaler (gearbox/nn_amp.hpp) goes under "scaler.".
class LossScaler;
void save_checkpoint(const std::string& path, const Module& module, const Optimizer* optimizer = nullptr,
                     const std::map<std::string, std::string>& metadata = {}, const LRScheduler* scheduler = nullptr,
                     const LossScaler* scaler = nullptr);
// Loads a checkpoint into a freshly built module (and optimizer, scheduler, when given) and
// returns its metadata. CHECKPOINT_INVALID: not a complete, well-formed safetensors file (or an
// unreadable one: FILE_NOT_FOUND). CHECKPOINT_MISMATCH, naming the entry: a key the module (or
// optimizer) lacks or has but the file does not, a different shape or dtype, another optimizer
// kind. strict = false skips keys present on one side only (never a shape or dtype difference).
// Everything is checked before anything is written: a failed load leaves the objects as they were.
std::map<std::string, std::string> load_checkpoint(const std::string& path, Module& module,
                                                   Optimizer* optimizer = nullptr, bool strict = true,
                                                   LRScheduler* scheduler = nullptr, LossScaler* scaler = nullptr);

// The format itself: any named tensors (float32, float64, int64, bfloat16, float16) and string metadata, e.g. a
// state dict exchanged with Python (the layout the safetensors package documents). Errors as
// save_checkpoint / load_checkpoint.
struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace gbx::nn

// Recording eager ops on the tape (see tape.h) and walking it backwards (Tensor::backward).
#include "frontend/autodiff/tape.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "frontend/amp/autocast.h"
#include "frontend/autodiff/gradient_registry.h"
#include "frontend/graph/trace_hook.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn {

namespace {
thread_local bool g_grad_enabled = true;
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

namespace {

// Links `outputs` to `node`, which records `inputs`: the outputs now require a gradient.
void record(std::shared_ptr<TapeNode> node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  node->inputs = inputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    node->outputs.push_back(wrap(outputs[i].impl()->value));
    outputs[i].impl()->requires_grad = true;
    outputs[i].impl()->grad_fn = node;
    outputs[i].impl()->output_index = i;
  }
}

}  // namespace

namespace {

std::vector<Tensor> apply_as_given(const OpSpec& op, const std::vector<Tensor>& inputs, gearbox::AttributeMap attrs,
                                   size_t num_outputs) {
  std::vector<gearbox::Tensor> values;
  values.reserve(inputs.size());
  bool needs_grad = false;
  for (const Tensor& t : inputs) {
    values.push_back(t.defined() ? t.impl()->value : gearbox::Tensor());
    needs_grad = needs_grad || (t.defined() && t.impl()->requires_grad);
  }
  std::vector<gearbox::Tensor> outs = dispatch(op, values, attrs, num_outputs);
  std::vector<Tensor> result;
  result.reserve(outs.size());
  for (auto& o : outs) result.push_back(wrap(std::move(o)));
  if (!needs_grad || !g_grad_enabled) return result;
  auto node = std::make_shared<TapeNode>();
  node->op = op;
  node->attrs = std::move(attrs);
  record(std::move(node), inputs, result);
  return result;
}

bool is_no_kernel_error(const Error& e) { return e.code() == "OP_UNSUPPORTED" || e.code() == "DTYPE_UNSUPPORTED"; }

}  // namespace

std::vector<Tensor> apply(const OpSpec& op, const std::vector<Tensor>& inputs, gearbox::AttributeMap attrs,
                          size_t num_outputs) {
  // Autocast (gearbox/nn_amp.hpp): the op's float inputs in the dtype its level gives it, with
  // the casts on the tape; an op without a kernel for the reduced dtype runs in float32.
  const std::optional<DType> target = amp::autocast_target(op, inputs);
  if (!target) return apply_as_given(op, inputs, std::move(attrs), num_outputs);
  if (*target == DType::Float32)
    return apply_as_given(op, amp::cast_float_inputs(inputs, *target), std::move(attrs), num_outputs);
  try {
    return apply_as_given(op, amp::cast_float_inputs(inputs, *target), attrs, num_outputs);
  } catch (const Error& e) {
    if (!is_no_kernel_error(e)) throw;
    amp::note_no_reduced_kernel(op, *target);
  }
  return apply_as_given(op, amp::cast_float_inputs(inputs, DType::Float32), std::move(attrs), num_outputs);
}

std::vector<Tensor> apply_function(const std::string& name, const std::vector<Tensor>& inputs,
                                   std::vector<Tensor> outputs, FunctionBackward backward) {
  // Its outputs were computed outside the dispatcher: a trace would see them as constants.
  if (active_trace_hook())
    throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED, "'", name,
                                     "' (a step the dispatcher does not run, e.g. a collective) cannot be traced into "
                                     "a graph; run it eagerly"));
  bool needs_grad = false;
  for (const Tensor& t : inputs) needs_grad = needs_grad || (t.defined() && t.impl()->requires_grad);
  if (!needs_grad || !g_grad_enabled) return outputs;
  auto node = std::make_shared<TapeNode>();
  node->op = OpSpec{name, "gearbox.function"};
  node->function_backward = std::move(backward);
  // Fresh tensors: an output may be an input itself (an identity forward), whose own grad_fn
  // must stay as it is.
  for (Tensor& o : outputs) o = wrap(value_of(o, "a function's output"));
  record(std::move(node), inputs, outputs);
  return outputs;
}

namespace {

// Nodes reachable from `root`, producers after their consumers (reverse topological order).
std::vector<TapeNode*> reverse_topological(TapeNode* root) {
  std::vector<TapeNode*> post;
  std::unordered_set<TapeNode*> seen;
  // Iterative DFS (deep networks would overflow a recursive one).
  std::vector<std::pair<TapeNode*, size_t>> stack{{root, 0}};
  seen.insert(root);
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      const Tensor& in = node->inputs[next++];
      if (in.defined() && in.impl()->grad_fn && seen.insert(in.impl()->grad_fn.get()).second)
        stack.emplace_back(in.impl()->grad_fn.get(), 0);
      continue;
    }
    post.push_back(node);
    stack.pop_back();
  }
  return {post.rbegin(), post.rend()};
}

Tensor accumulate(const Tensor& sum, const Tensor& g) { return sum.defined() ? add(sum, g) : g; }

void run_post_accumulate_grad_hooks(TensorImpl& leaf) {
  // A copy: a hook may remove hooks.
  auto hooks = leaf.post_accumulate_grad_hooks;
  for (auto& [id, hook] : hooks) hook();
}

// Hooked leaves of one backward pass: uses left among the nodes still to walk, and whether a
// gradient reached the leaf, so each hook runs once, after the leaf's last contribution.
struct HookedLeaf {
  int uses_left = 0;
  bool reached = false;
};

}  // namespace

uint64_t add_post_accumulate_grad_hook(const Tensor& leaf, std::function<void()> hook) {
  static std::atomic<uint64_t> next_id{1};
  const gearbox::Tensor& v = value_of(leaf, "add_post_accumulate_grad_hook");
  if (!leaf.is_leaf())
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "add_post_accumulate_grad_hook on ",
                                     gearbox::describe(v), ", which an op produced: hooks go on leaves"));
  uint64_t id = next_id++;
  leaf.impl()->post_accumulate_grad_hooks.emplace_back(id, std::move(hook));
  return id;
}

void remove_post_accumulate_grad_hook(const Tensor& leaf, uint64_t id) {
  if (!leaf.defined()) return;
  auto& hooks = leaf.impl()->post_accumulate_grad_hooks;
  std::erase_if(hooks, [id](const auto& h) { return h.first == id; });
}

void Tensor::backward(const Tensor& grad_output) const {
  const gearbox::Tensor& v = value_of(*this, "backward() on an undefined tensor");
  if (!impl_->requires_grad)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "backward() on ", gearbox::describe(v),
                                     ", which does not require a gradient (no input of the ops that made it "
                                     "requires one, or it was made under NoGradGuard)"));
  Tensor seed = grad_output;
  if (!seed.defined()) {
    if (v.numel() != 1)
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "backward() without a grad_output on ",
                                       gearbox::describe(v), ": only a one-element tensor has an implicit one"));
    seed = Tensor::full(shape(), 1.0, dtype());
  } else if (seed.shape() != shape()) {
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "backward(): grad_output is ", seed.describe(),
                                     " but the tensor is ", gearbox::describe(v)));
  }
  NoGradGuard no_grad;                 // the backward ops themselves are not recorded
  amp::AutocastSuspended no_autocast;  // and run in their forward ops' dtypes
  if (!impl_->grad_fn) {               // a leaf: its own gradient is the seed
    impl_->grad = accumulate(impl_->grad.defined() ? wrap(impl_->grad) : Tensor(), seed).impl()->value;
    if (!impl_->post_accumulate_grad_hooks.empty()) run_post_accumulate_grad_hooks(*impl_);
    return;
  }
  // Gradients of each node's outputs, summed over their consumers.
  std::unordered_map<TapeNode*, std::vector<Tensor>> grads;
  TapeNode* root = impl_->grad_fn.get();
  grads[root].resize(root->outputs.size());
  grads[root][impl_->output_index] = seed;
  const std::vector<TapeNode*> order = reverse_topological(root);
  std::unordered_map<TensorImpl*, HookedLeaf> hooked;
  for (TapeNode* node : order)
    for (const Tensor& in : node->inputs)
      if (in.defined() && !in.impl()->grad_fn && !in.impl()->post_accumulate_grad_hooks.empty())
        ++hooked[in.impl().get()].uses_left;
  // After a node's gradients went out (or it had none): a hooked leaf whose last use that was
  // has its final gradient of this pass.
  auto node_done = [&hooked](TapeNode* node) {
    if (hooked.empty()) return;
    for (const Tensor& in : node->inputs) {
      if (!in.defined()) continue;
      auto h = hooked.find(in.impl().get());
      if (h == hooked.end() || --h->second.uses_left > 0) continue;
      if (h->second.reached) run_post_accumulate_grad_hooks(*in.impl());
    }
  };
  for (TapeNode* node : order) {
    auto it = grads.find(node);
    if (it == grads.end()) {
      node_done(node);
      continue;
    }
    std::vector<Tensor> out_grads = std::move(it->second);
    grads.erase(it);
    std::vector<Tensor> in_grads;
    if (node->function_backward) {
      in_grads = node->function_backward(out_grads);
    } else {
      const GradientBuilder* builder = GradientRegistry::global().find(node->op.domain, node->op.op_type);
      if (!builder)
        throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED, "op ", node->op.op_type,
                                         " has no gradient builder (autodiff/gradients/)"));
      in_grads = (*builder)(*node, out_grads);
    }
    for (size_t i = 0; i < node->inputs.size() && i < in_grads.size(); ++i) {
      const Tensor& in = node->inputs[i];
      if (!in.defined() || !in.impl()->requires_grad || !in_grads[i].defined()) continue;
      if (in_grads[i].shape() != in.shape())
        throw_status(gearbox::make_error(gearbox::ErrorCode::INTERNAL, "gradient of ", node->op.op_type, " input ", i,
                                         " is ", in_grads[i].describe(), " but the input is ", in.describe()));
      if (TapeNode* producer = in.impl()->grad_fn.get()) {
        auto& slot = grads[producer];
        slot.resize(producer->outputs.size());
        slot[in.impl()->output_index] = accumulate(slot[in.impl()->output_index], in_grads[i]);
      } else {
        Tensor sum = accumulate(in.impl()->grad.defined() ? wrap(in.impl()->grad) : Tensor(), in_grads[i]);
        // A private buffer: the builder's result may share storage with a forward tensor
        // (Tensor::clone, which a tracer sees as the same value).
        in.impl()->grad = sum.impl()->value.owns_buffer_alone() ? sum.impl()->value : sum.clone().impl()->value;
        if (auto h = hooked.find(in.impl().get()); h != hooked.end()) h->second.reached = true;
      }
    }
    node_done(node);
  }
}

}  // namespace gbx::nn

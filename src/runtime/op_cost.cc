// FLOP and byte counts per node execution. See op_cost.h for the conventions; the FLOP
// count of each op type is its op descriptor's cost function (kernels/op_descriptor.cc).
#include "runtime/op_cost.h"

#include "kernels/op_descriptor.h"

namespace gearbox {
namespace {

uint64_t value_bytes(const RuntimeValue& v) {
  if (v.is_tensor()) return v.tensor().nbytes();
  uint64_t n = 0;
  if (v.is_sequence())
    for (const Tensor& t : v.sequence().tensors) n += t.nbytes();
  return n;
}

}  // namespace

OpCost op_cost(const KernelContext& ctx, const std::vector<RuntimeValue>& outs) {
  OpCost c;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) c.bytes_read += value_bytes(ctx.input_value(i));
  for (const RuntimeValue& v : outs) c.bytes_written += value_bytes(v);
  const OpDescriptor& d = op_descriptor(ctx.op().domain, ctx.op().op_type);
  if (d.bytes) {
    // The op's own count is the total; what it wrote is still the outputs' size.
    const double total = d.bytes(ctx, outs);
    if (total >= 0)
      c.bytes_read = total > static_cast<double>(c.bytes_written) ? static_cast<uint64_t>(total) - c.bytes_written : 0;
  }
  if (outs.empty() || !outs[0].is_tensor()) return c;
  c.flops = op_descriptor(ctx.op().domain, ctx.op().op_type).flops(ctx, outs);
  return c;
}

}  // namespace gearbox

// The graph passes. Each rewrites one graph in place and returns how many times its pattern
// matched (nodes folded, removed or fused); the optimizer (graph/optimizer.h) names them,
// runs them in its default order and reports on them. See docs/graph_engine.md.
#pragma once

#include "base/status.h"
#include "graph/ir.h"
#include "graph/passes/pass_util.h"

namespace gearbox::passes {

using PassFn = Result<int> (*)(Graph&, const PassContext&);

// cleanup_passes.cc
Result<int> eliminate_dead_nodes(Graph& g, const PassContext& ctx);
Result<int> remove_noop_ops(Graph& g, const PassContext& ctx);  // Identity, inference Dropout, no-op Cast
Result<int> eliminate_common_subexpressions(Graph& g, const PassContext& ctx);
// float16_widening.cc: a float16 model computes in float32 inside, its I/O unchanged
Result<int> widen_float16(Graph& g, const PassContext& ctx);
// constant_folding.cc
Result<int> fold_static_shapes(Graph& g, const PassContext& ctx);  // Shape/Size of static shapes
Result<int> fold_constants(Graph& g, const PassContext& ctx);
// transpose_reshape.cc
Result<int> cancel_transpose_reshape(Graph& g, const PassContext& ctx);
// transpose_sinking.cc (runs after layout_nhwc, whose boundary Transposes it merges)
Result<int> sink_transposes(Graph& g, const PassContext& ctx);
// conv_bn_fold.cc
Result<int> fold_conv_batchnorm(Graph& g, const PassContext& ctx);
Result<int> decompose_batchnorm(Graph& g, const PassContext& ctx);
// pad_fold.cc
Result<int> fold_pads(Graph& g, const PassContext& ctx);
// fusions into com.gearbox operators (kernels: src/kernels/cpu/ref/fused_*.cc)
Result<int> fuse_gelu(Graph& g, const PassContext& ctx);             // gelu_fusion.cc
Result<int> fuse_layer_norm(Graph& g, const PassContext& ctx);       // layer_norm_fusion.cc
Result<int> fuse_skip_layer_norm(Graph& g, const PassContext& ctx);  // layer_norm_fusion.cc
Result<int> fuse_attention(Graph& g, const PassContext& ctx);        // attention_fusion.cc
Result<int> fuse_matmul(Graph& g, const PassContext& ctx);           // matmul_fusion.cc
Result<int> fuse_conv(Graph& g, const PassContext& ctx);             // conv_fusion.cc
// layout_nhwc.cc: regions of convolutions and pools -> channels-last com.gearbox.Nhwc* ops
Result<int> layout_nhwc(Graph& g, const PassContext& ctx);
// layout_blocked.cc: regions of channels-last convolutions -> blocked com.gearbox.Nchw16cConv
Result<int> layout_blocked(Graph& g, const PassContext& ctx);

}  // namespace gearbox::passes

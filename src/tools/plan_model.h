// The transformer an ONNX model is, for `gearbox plan MODEL.onnx`: the planner costs a GPT-style
// language model from its dimensions (comm/plan/network.h), so a model file is read for those
// dimensions rather than planned node by node.
//
// What is read, from the imported graph with onnx's shape inference (static shapes needed):
//   vocab, hidden    the token embedding: a Gather of a rank-2 float initializer [V, h] by an
//                    integer graph input (the largest such table: positions are a smaller one)
//   seq, batch       that input's shape [batch, seq]
//   layers, heads    the attention softmaxes: Softmax over scores whose last two dims are [seq,
//                    seq], one per block; heads from their shape ([b, H, s, s] or [b H, s, s])
//   ffn_hidden       the width of the MLP's first matrix product: the most common output width
//                    of an [h, F] weight (MatMul, or Gemm with either transB) other than h, 3h
//                    and V
//   tied_embeddings  the logits' [h, V] weight is the table (through a Transpose, or as a copy
//                    with equal values, as torch.onnx.export writes a tied weight)
//   dtype            the table's: fp32, or bf16 for a 2-byte float
// A model that lacks one of these is PLAN_SPEC_INVALID, naming what is missing and pointing at the
// JSON description (docs/parallel.md).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "comm/plan/network.h"
#include "graph/ir.h"

namespace gearbox::cli {

// `global_batch` > 0 overrides the input's batch dimension (sequences per optimizer step).
Result<comm::plan::TransformerSpec> transformer_from_model(const Model& model, int64_t global_batch);

// A built-in name, a JSON description or an ONNX model (a path ending in .onnx).
Result<comm::plan::TransformerSpec> load_plan_network(const std::string& name_or_path, int64_t global_batch);

}  // namespace gearbox::cli

// ai.onnx opsets 1 to 6 (issue 25 item 1): the forms that changed meaning at opset 7 are
// rewritten at import into their opset-7-and-later equivalents, so an old model (the ONNX model
// zoo's opset-3 to -6 exports from Caffe2 and early PyTorch) runs on today's kernels and passes:
//   - element-wise Add/Sub/Mul/Div/Pow, And/Or/Xor, Equal/Greater/Less with `broadcast` and
//     `axis`: B's dims align with A's from `axis` (an Unsqueeze appends the trailing 1s numpy
//     broadcasting needs); without `broadcast` both shapes are equal, which numpy rules keep;
//   - Gemm's `broadcast` of C (numpy's unidirectional broadcast covers it);
//   - BatchNormalization's `is_test`, `spatial` and `consumed_inputs` (test mode, spatial:
//     opset 9's operator; training mode and per-activation statistics are OP_UNSUPPORTED);
//   - Reshape-1's `shape` attribute (an input from opset 5);
//   - Pad-1's `paddings` (opset 2's `pads`);
//   - `consumed_inputs` (opset 1's in-place hint) is dropped there and ignored by the kernels elsewhere.
// Each rewritten node takes the opset of the form it now has.
#pragma once

#include "base/status.h"
#include "graph/ir.h"

namespace gearbox {

// Rewrites the legacy nodes of g and its subgraphs in place; returns how many were rewritten.
Result<int> upgrade_legacy_ops(Graph& g);

}  // namespace gearbox

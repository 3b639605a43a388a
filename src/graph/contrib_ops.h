// ONNX Runtime's contrib operators (issue 25 item 3): the com.microsoft ops that exporters and
// ONNX Runtime's transformer optimizer write, and the two it registers in the ONNX domain at
// opset 1 (LayerNormalization before opset 17, SimplifiedLayerNormalization), are rewritten at
// import (so is ai.onnx Gelu-20, which ONNX adopted from them) into ai.onnx and com.gearbox
// nodes with the same results. Each then runs on the kernels and fusions those ops already have
// (LayerNormalization-17 and com.gearbox.Gelu on cpu.simd, MatMul on cpu.dnnl,
// SkipLayerNormalization through the fusion pass), not on a second, slower copy of the same
// arithmetic. docs/conformance.md lists the ops and their forms; ONNX Runtime 1.30 is their
// oracle (tests/conformance/oracle/).
//
// A form a rewrite does not cover (e.g. FusedMatMul's transBatchA) is OP_UNSUPPORTED naming the
// node, the op and the attribute; an op with no rewrite is left for the kernel registry, which
// reports it the same way.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "graph/ir.h"

namespace gearbox {

// Rewrites the contrib nodes of g and its subgraphs in place, keeping node order topological.
// Returns how many nodes were rewritten.
Result<int> lower_contrib_ops(Graph& g);

// The ops rewritten at import, as "domain.Op" (com.microsoft.FusedMatMul, ...; the ONNX-domain
// ones as "ai.onnx.Op (when)"): for gearbox doctor --ops.
std::vector<std::string> contrib_rewritten_ops();

}  // namespace gearbox

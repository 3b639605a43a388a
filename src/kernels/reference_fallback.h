// The hand-over of a fast engine's kernel to the cpu.ref kernel of the same node, for the
// configurations the fast kernel does not handle (a kernel that returns an error is not
// retried on another engine, so the fast kernels fall back themselves). Shared by cpu.dnnl and
// cpu.simd; each engine counts its own fall-backs for its tests.
#pragma once

#include "kernels/kernel.h"

namespace gearbox {

// Runs the cpu.ref kernel for ctx's op, opset and input-0 dtype on ctx; OP_UNSUPPORTED when
// there is none.
Status run_reference_fallback(KernelContext& ctx);

}  // namespace gearbox

// Versions of tensor buffers that are written in place: what caches of data derived from a
// tensor (cpu.simd's packed GEMM panels, cpu.dnnl's reordered weights and convolution state)
// add to their keys, so that a weight updated in place (an optimizer step,
// Session::update_weight) is never read through stale derived data.
//
// The one exception to "never write into a shared buffer" (base/tensor.h) is such an update;
// the writer calls mark_modified(t) after it, and every cache keyed on buffer_version(t) misses
// and derives again. The version belongs to the buffer (its address), so every tensor sharing
// it sees it. Addresses that were never marked have version 0 and cost no entry. A cache that
// keys on an address also keeps a shallow copy of the source tensor (as cpu.simd's and
// cpu.dnnl's do), so the address cannot be reused by another buffer while its entry exists.
#pragma once

#include <cstdint>

#include "base/tensor.h"

namespace gearbox {

// How often the buffer under t was marked modified (0: never).
uint64_t buffer_version(const Tensor& t);
// Declares that t's buffer was written in place (call after the write).
void mark_modified(const Tensor& t);

}  // namespace gearbox

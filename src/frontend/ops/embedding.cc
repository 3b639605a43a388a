// Embedding lookup: rows of the weight gathered by int64 ids (ONNX Gather on axis 0).
#include "frontend/graph/trace_hook.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  if (!indices.defined() || indices.dtype() != DType::Int64 || !weight.defined() || weight.rank() != 2)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "embedding: indices ", indices.describe(),
                                     " and weight ", weight.describe(),
                                     ": needs int64 indices and a weight [num_embeddings, dim]"));
  const int64_t rows = weight.dim(0);
  // Traced, the ids are the graph's input: the Gather kernel checks them at every run (an
  // INVALID_ARGUMENT as here), where reading them now would be refused.
  if (!active_trace_hook())
    for (int64_t i : indices.to_int64_vector())
      if (i < 0 || i >= rows)
        throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "embedding: index ", i,
                                         " is outside the ", rows, " rows [0, ", rows - 1, "]"));
  return apply1({"Gather"}, {weight, indices}, {{"axis", gearbox::attr_int(0)}});
}

}  // namespace gbx::nn

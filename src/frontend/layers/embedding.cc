// nn::Embedding, initialized like torch.nn.Embedding (N(0, 1)).
#include "frontend/tensor_impl.h"

namespace gbx::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim) {
  if (num_embeddings <= 0 || embedding_dim <= 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "Embedding(", num_embeddings, ", ",
                                     embedding_dim, "): sizes must be positive"));
  weight_ = register_parameter("weight", Tensor::randn({num_embeddings, embedding_dim}));
}

}  // namespace gbx::nn

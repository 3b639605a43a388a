// nn::DistributedSampler (torch.utils.data.DistributedSampler's sharding rule). Its shuffle,
// seeded_permutation, and index_rows, which turns its indices into a batch, are in
// src/frontend/data/data_loader.cc, shared with nn::DataLoader.
#include <numeric>

#include "frontend/tensor_impl.h"  // throw_status
#include "gearbox/nn_data.hpp"
#include "gearbox/nn_distributed.hpp"

namespace gbx::nn {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, SamplerOptions options)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), opt_(options) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas || dataset_size < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "DistributedSampler: rank ", rank, " of ",
                                     num_replicas, " replicas over ", dataset_size,
                                     " samples (need 0 <= rank < num_replicas, dataset_size >= 0)"));
  // torch's sizes: dropping keeps floor(size / N) per rank, padding takes ceil(size / N).
  num_samples_ = opt_.drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
  if (!opt_.drop_last && dataset_size == 0) num_samples_ = 0;
}

std::vector<int64_t> DistributedSampler::indices() const {
  // Every rank draws the same permutation (nn_data.hpp: the same on every build and library).
  std::vector<int64_t> all;
  if (opt_.shuffle) {
    all = seeded_permutation(dataset_size_, opt_.seed + epoch_);
  } else {
    all.resize(static_cast<size_t>(dataset_size_));
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  const int64_t total = total_size();
  if (total > dataset_size_) {
    // Pad with the permutation's first indices (again and again if it is shorter than the gap).
    for (int64_t i = dataset_size_; i < total; ++i) all.push_back(all[static_cast<size_t>(i % dataset_size_)]);
  } else {
    all.resize(static_cast<size_t>(total));
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(all[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace gbx::nn

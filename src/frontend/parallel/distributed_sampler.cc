// nn::DistributedSampler (torch.utils.data.DistributedSampler's sharding rule) and index_rows,
// which turns a sampler's indices into a batch.
#include <cstring>
#include <random>

#include "frontend/tensor_impl.h"
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
  std::vector<int64_t> all(static_cast<size_t>(dataset_size_));
  for (int64_t i = 0; i < dataset_size_; ++i) all[static_cast<size_t>(i)] = i;
  if (opt_.shuffle && dataset_size_ > 1) {
    // Fisher-Yates with mt19937_64, drawing j by rejection (not std::uniform_int_distribution or
    // std::shuffle, whose algorithms the standard leaves to the library): every rank, every build
    // and every standard library draw the same permutation.
    std::mt19937_64 gen(opt_.seed + epoch_);
    for (uint64_t i = static_cast<uint64_t>(dataset_size_) - 1; i > 0; --i) {
      const uint64_t range = i + 1, limit = UINT64_MAX - UINT64_MAX % range;
      uint64_t r;
      do r = gen();
      while (r >= limit);
      std::swap(all[i], all[r % range]);
    }
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

Tensor index_rows(const Tensor& x, const std::vector<int64_t>& indices) {
  const gearbox::Tensor& v = value_of(x, "index_rows");
  if (v.rank() < 1)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "index_rows on ", gearbox::describe(v),
                                     ": needs at least one axis"));
  gearbox::Dims dims = v.dims();
  const int64_t rows = dims[0];
  const size_t row_bytes = rows == 0 ? 0 : v.nbytes() / static_cast<size_t>(rows);
  dims[0] = static_cast<int64_t>(indices.size());
  gearbox::Tensor out(v.dtype(), dims);
  char* dst = static_cast<char*>(out.mutable_raw());
  const char* src = static_cast<const char*>(v.raw());
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    if (i < 0 || i >= rows)
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "index_rows: index ", i,
                                       " out of range for ", gearbox::describe(v)));
    std::memcpy(dst + k * row_bytes, src + static_cast<size_t>(i) * row_bytes, row_bytes);
  }
  return wrap(std::move(out));
}

}  // namespace gbx::nn

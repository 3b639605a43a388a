// Data sets and loaders: arrays whose first axis is the sample axis, cut into batches in a
// seeded, reproducible order, optionally assembled ahead by worker threads.
//
//   auto train = nn::TensorDataset::from_npy({"digits/x_train.npy", "digits/y_train.npy"});
//   nn::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 0, .workers = 2});
//   for (int epoch = 0; epoch < 10; ++epoch) {
//     for (const std::vector<nn::Tensor>& batch : loader) {  // one epoch; the next loop the next
//       nn::Tensor loss = nn::cross_entropy(net.forward(batch[0]), batch[1]);
//       ...
//     }
//   }
//
// The order of epoch e is a function of (seed, e) only: the same in every run, with any number
// of workers, and the same permutation nn::DistributedSampler draws for one replica.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gearbox/nn.hpp"

namespace gbx::nn {

// 0..n-1 shuffled by Fisher-Yates over std::mt19937_64(seed), each draw by rejection sampling
// (not std::shuffle or std::uniform_int_distribution, whose algorithms the standard leaves to
// the library): the same permutation on every platform, build and standard library.
// DistributedSampler and DataLoader shuffle with it, epoch e from seed + e.
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

// Rows `indices` of x (along axis 0), as a new tensor without autodiff history: the batch of a
// data set. Copies each row's bytes (any dtype); INVALID_ARGUMENT for a rank-0 x or an index out
// of range.
Tensor index_rows(const Tensor& x, const std::vector<int64_t>& indices);

// N tensors that share their first dimension, the sample axis: sample i is row i of each (an
// input and its label, say). The tensors are shared, not copied; do not write into them while
// a DataLoader's workers read them.
class TensorDataset {
 public:
  // INVALID_ARGUMENT for no tensors, an undefined or a rank-0 tensor; SHAPE_MISMATCH when the
  // first dimensions differ.
  explicit TensorDataset(std::vector<Tensor> tensors);
  // One tensor per .npy file (nn::load_npy), in the order given; the errors above name the files.
  static TensorDataset from_npy(const std::vector<std::string>& paths);

  int64_t size() const { return size_; }  // the number of samples
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // Rows `indices` of every tensor (index_rows), one tensor each, in this data set's order.
  std::vector<Tensor> gather(const std::vector<int64_t>& indices) const;

 private:
  TensorDataset(std::vector<Tensor> tensors, const std::vector<std::string>& names);
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

struct DataLoaderOptions {
  int64_t batch_size = 1;       // >= 1
  bool shuffle = false;         // false: samples in order 0..size-1 every epoch
  uint64_t seed = 0;            // epoch e's order is seeded_permutation(size, seed + e)
  bool drop_remainder = false;  // drop the last batch when it has fewer than batch_size rows
  int workers = 0;              // >= 0; 0: next() assembles each batch on the calling thread
  int prefetch = 2;             // >= 1: batches each worker keeps ready ahead
};

// Batches of a TensorDataset, one epoch per pass. Each batch is one tensor per data-set tensor
// (rows gathered in the epoch's order; the batch dimension first). With workers > 0, that many
// threads assemble batches ahead (worker w takes batches w, w + workers, ...; at most `prefetch`
// ready per worker), and next() hands them out in the same order with the same content as
// workers = 0. One consumer thread at a time. Movable; a moved-from loader may only be destroyed
// or assigned to.
//
//   while (auto batch = loader.next()) { ... (*batch)[0] ... }   // one epoch, then the next loop
//   for (const std::vector<nn::Tensor>& batch : loader) { ... }  // the same, as a range
//
// Epochs advance by themselves: each pass (a begin(), or a next() with no pass in progress)
// draws the epoch after the previous pass's, starting at 0. set_epoch(e) makes the next pass
// draw epoch e (torch's DistributedSampler.set_epoch). A pass ends when next() returns nullopt;
// begin() or set_epoch() in the middle of a pass abandons it (its workers are stopped and
// joined), and so does destruction.
//
// Bad options (batch_size < 1, workers < 0, prefetch < 1) are INVALID_ARGUMENT.
class DataLoader {
 public:
  DataLoader(TensorDataset dataset, DataLoaderOptions options = {});
  ~DataLoader();
  DataLoader(DataLoader&&) noexcept;
  DataLoader& operator=(DataLoader&&) noexcept;
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  const TensorDataset& dataset() const;
  const DataLoaderOptions& options() const;
  // ceil(size / batch_size), or floor(size / batch_size) with drop_remainder.
  int64_t batches_per_epoch() const;
  // The epoch the next pass draws (INVALID_ARGUMENT if negative); abandons a pass in progress.
  void set_epoch(int64_t epoch);
  // The epoch of the pass in progress, or the one the next pass draws when none is.
  int64_t epoch() const;

  // The next batch of the pass in progress (starting one if none is), or nullopt at its end,
  // which ends the pass. A worker's error (out of memory) is rethrown here at its batch.
  std::optional<std::vector<Tensor>> next();

  // An input iterator over one pass: begin() starts a new pass (abandoning one in progress),
  // ++ calls next(); it equals end() once next() returned nullopt.
  class Iterator {
   public:
    using iterator_concept = std::input_iterator_tag;
    using iterator_category = std::input_iterator_tag;
    using value_type = std::vector<Tensor>;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;

    Iterator() = default;  // end()
    reference operator*() const { return *batch_; }
    pointer operator->() const { return &*batch_; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& a, const Iterator& b) { return !a.batch_ && !b.batch_; }

   private:
    friend class DataLoader;
    explicit Iterator(DataLoader* loader);
    DataLoader* loader_ = nullptr;
    std::optional<std::vector<Tensor>> batch_;
  };
  Iterator begin();
  Iterator end() { return Iterator(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gbx::nn

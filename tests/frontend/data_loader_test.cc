// nn::TensorDataset and nn::DataLoader (include/gearbox/nn_data.hpp): every sample once per
// epoch with its label beside it, an order that depends on (seed, epoch) only, worker threads
// that change nothing about the batches, drop_remainder's counts, .npy round trips, the errors,
// and passes abandoned with workers still running (no hang, no leaked thread).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "gearbox/nn.hpp"
#include "gearbox/nn_data.hpp"

namespace gbx::nn {
namespace {

// Range-for and the standard algorithms need a real input iterator.
static_assert(std::input_iterator<DataLoader::Iterator>);

// Sample i is identifiable by value: x[i, c] = 4 i + c (exact in float32), y[i] = 1000 + i.
TensorDataset numbered(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n * 4));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < 4; ++c) x[static_cast<size_t>(i * 4 + c)] = static_cast<float>(4 * i + c);
    y[static_cast<size_t>(i)] = 1000 + i;
  }
  return TensorDataset({Tensor::from_vector(x, {n, 4}), Tensor::from_vector(y, {n})});
}

// The sample ids of one batch of numbered(): checks each row is whole and its label is its own.
std::vector<int64_t> ids_of(const std::vector<Tensor>& batch) {
  EXPECT_EQ(batch.size(), 2u);
  const std::vector<float> x = batch[0].to_float_vector();
  const std::vector<int64_t> y = batch[1].to_int64_vector();
  EXPECT_EQ(batch[0].dim(0), batch[1].dim(0));
  std::vector<int64_t> ids;
  for (size_t r = 0; r < y.size(); ++r) {
    const int64_t id = static_cast<int64_t>(x[r * 4]) / 4;
    for (size_t c = 0; c < 4; ++c) EXPECT_EQ(x[r * 4 + c], static_cast<float>(4 * id + static_cast<int64_t>(c)));
    EXPECT_EQ(y[r], 1000 + id) << "the label left its row";
    ids.push_back(id);
  }
  return ids;
}

// One pass through next(): the batches' sample ids.
std::vector<std::vector<int64_t>> pass_ids(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  while (std::optional<std::vector<Tensor>> batch = loader.next()) out.push_back(ids_of(*batch));
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

std::string error_code(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return "no error";
}

std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A batch as bytes, tensor by tensor, for comparisons that no dtype conversion can blur.
std::vector<std::string> bytes_of(const std::vector<Tensor>& batch) {
  std::vector<std::string> out;
  for (const Tensor& t : batch) {
    const size_t n = static_cast<size_t>(t.numel()) * (t.dtype() == DType::Float32   ? 4
                                                       : t.dtype() == DType::Float64 ? 8
                                                       : t.dtype() == DType::Int64   ? 8
                                                                                     : 2);
    out.push_back(t.describe() + std::string(static_cast<const char*>(t.data()), n));
  }
  return out;
}

// Every sample exactly once per epoch, whole and with its own label; the last batch partial.
TEST(DataLoader, EverySampleOncePerEpochWithItsLabel) {
  DataLoader loader(numbered(23), {.batch_size = 4, .shuffle = true, .seed = 5});
  EXPECT_EQ(loader.batches_per_epoch(), 6);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<std::vector<int64_t>> batches = pass_ids(loader);
    ASSERT_EQ(batches.size(), 6u);
    for (size_t b = 0; b < 5; ++b) EXPECT_EQ(batches[b].size(), 4u);
    EXPECT_EQ(batches[5].size(), 3u);
    std::vector<int64_t> all = flat(batches);
    EXPECT_NE(all, iota(23)) << "shuffle left the order alone";
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, iota(23)) << "epoch " << epoch;
  }
}

TEST(DataLoader, WithoutShuffleEveryEpochIsInOrder) {
  DataLoader loader(numbered(10), {.batch_size = 3});
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::vector<int64_t>> batches = pass_ids(loader);
    EXPECT_EQ(batches, (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}}));
  }
}

// Like torch's DistributedSampler: the order is seeded_permutation(n, seed + epoch), the same in
// a fresh loader that set_epoch()s there, new in each epoch, and DistributedSampler's own.
TEST(DataLoader, ShuffleOrderIsAFunctionOfSeedAndEpoch) {
  const int64_t n = 50;
  DataLoader a(numbered(n), {.batch_size = 8, .shuffle = true, .seed = 11});
  const std::vector<int64_t> a0 = flat(pass_ids(a)), a1 = flat(pass_ids(a));
  EXPECT_EQ(a0, seeded_permutation(n, 11));
  EXPECT_EQ(a1, seeded_permutation(n, 12));
  EXPECT_NE(a0, a1);

  DataLoader b(numbered(n), {.batch_size = 8, .shuffle = true, .seed = 11});
  EXPECT_EQ(flat(pass_ids(b)), a0);  // the same seed: the same first epoch in another loader
  b.set_epoch(1);
  EXPECT_EQ(b.epoch(), 1);
  EXPECT_EQ(flat(pass_ids(b)), a1);
  b.set_epoch(1);  // set_epoch repeats an epoch exactly
  EXPECT_EQ(flat(pass_ids(b)), a1);
  EXPECT_EQ(b.epoch(), 2);  // and then moves on from there

  DataLoader c(numbered(n), {.batch_size = 8, .shuffle = true, .seed = 99});
  EXPECT_NE(flat(pass_ids(c)), a0);
}

// A range-for is one epoch; the next begin() is the next epoch, and next() after it the one after.
TEST(DataLoader, RangeForRunsOneEpochAndBeginStartsTheNext) {
  DataLoader loader(numbered(17), {.batch_size = 5, .shuffle = true, .seed = 3});
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    int64_t count = 0;
    for (const std::vector<Tensor>& batch : loader) {
      EXPECT_EQ(loader.epoch(), epoch);
      for (int64_t id : ids_of(batch)) seen.push_back(id);
      ++count;
    }
    EXPECT_EQ(count, 4);
    EXPECT_EQ(seen, seeded_permutation(17, 3 + static_cast<uint64_t>(epoch)));
  }
  EXPECT_EQ(flat(pass_ids(loader)), seeded_permutation(17, 5));
  // Breaking out of a range-for and starting another abandons the rest of that epoch.
  for (const std::vector<Tensor>& batch : loader) {
    EXPECT_EQ(ids_of(batch).size(), 5u);
    break;
  }
  auto it = loader.begin();
  EXPECT_EQ(loader.epoch(), 4);
  const std::vector<int64_t> epoch4 = seeded_permutation(17, 7);
  EXPECT_EQ(ids_of(*it), std::vector<int64_t>(epoch4.begin(), epoch4.begin() + 5));
  EXPECT_EQ(std::distance(it, loader.end()), 4);
}

// Workers assemble ahead but hand out exactly what the calling thread would have: the same
// batches, byte for byte, in the same order, over several epochs, for any workers and prefetch.
// The data set holds every dtype so that each row copy is checked at its element size.
TEST(DataLoader, WorkersDeliverTheSameBatchesAsTheCallingThread) {
  const int64_t n = 101;
  std::vector<double> values(static_cast<size_t>(n * 3));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i) * 0.25 - 7.0;
  const Tensor f64 = Tensor::from_vector(values, {n, 3});
  const TensorDataset data({f64.to(DType::Float32), f64, f64.to(DType::BFloat16), f64.to(DType::Float16),
                            Tensor::from_vector(iota(n), {n, 1, 1})});
  auto run = [&](int workers, int prefetch) {
    DataLoader loader(data, {.batch_size = 7, .shuffle = true, .seed = 1, .workers = workers, .prefetch = prefetch});
    std::vector<std::vector<std::string>> out;
    for (int epoch = 0; epoch < 3; ++epoch)
      while (std::optional<std::vector<Tensor>> batch = loader.next()) out.push_back(bytes_of(*batch));
    return out;
  };
  const std::vector<std::vector<std::string>> want = run(0, 2);
  ASSERT_EQ(want.size(), 3u * 15u);
  for (int workers : {1, 3})
    for (int prefetch : {1, 2, 4}) EXPECT_EQ(run(workers, prefetch), want) << workers << " workers";
  // More workers than batches: the spare ones have nothing to do.
  EXPECT_EQ(run(40, 1), want);
}

// Rows are copied as bytes: every dtype's batch row is its source row, bit for bit (bf16 and
// fp16 included, with no round trip through float).
TEST(DataLoader, GathersRowsOfEveryDTypeAsBytes) {
  const Tensor f64 = Tensor::from_vector(std::vector<double>{0.1, -2.5, 3e-3, 1e5, -0.0, 7.75}, {3, 2});
  for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int64}) {
    const Tensor src = dtype == DType::Int64
                           ? Tensor::from_vector(std::vector<int64_t>{1, -2, 3, 1LL << 60, 5, 6}, {3, 2})
                           : f64.to(dtype);
    DataLoader loader(TensorDataset({src}), {.batch_size = 3, .shuffle = true, .seed = 2});
    const std::vector<int64_t> order = seeded_permutation(3, 2);
    std::optional<std::vector<Tensor>> batch = loader.next();
    ASSERT_TRUE(batch);
    const Tensor& got = (*batch)[0];
    ASSERT_EQ(got.dtype(), dtype);
    ASSERT_EQ(got.shape(), src.shape());
    const size_t row = (bytes_of({src})[0].size() - src.describe().size()) / 3;
    const char* s = static_cast<const char*>(src.data());
    const char* g = static_cast<const char*>(got.data());
    for (size_t r = 0; r < 3; ++r)
      EXPECT_EQ(std::memcmp(g + r * row, s + static_cast<size_t>(order[r]) * row, row), 0)
          << dtype_name(dtype) << " row " << r;
  }
}

TEST(DataLoader, DropRemainderCounts) {
  auto count = [](int64_t n, int64_t batch, bool drop) {
    DataLoader loader(numbered(n), {.batch_size = batch, .drop_remainder = drop});
    const std::vector<std::vector<int64_t>> batches = pass_ids(loader);
    EXPECT_EQ(static_cast<int64_t>(batches.size()), loader.batches_per_epoch());
    for (const auto& b : batches) EXPECT_TRUE(!drop || static_cast<int64_t>(b.size()) == batch);
    return loader.batches_per_epoch();
  };
  EXPECT_EQ(count(10, 3, false), 4);
  EXPECT_EQ(count(10, 3, true), 3);
  EXPECT_EQ(count(9, 3, false), 3);
  EXPECT_EQ(count(9, 3, true), 3);
  EXPECT_EQ(count(2, 3, false), 1);
  EXPECT_EQ(count(2, 3, true), 0);
  EXPECT_EQ(count(0, 3, false), 0);
  // An epoch without batches is still an epoch: it ends at once and the next one follows.
  DataLoader empty(numbered(2), {.batch_size = 3, .drop_remainder = true, .workers = 2});
  EXPECT_TRUE(empty.begin() == empty.end());
  EXPECT_EQ(empty.epoch(), 1);
}

// Abandoning a pass while its workers are blocked on full queues (set_epoch, begin() mid-epoch,
// destruction, a move) must stop and join them: thousands of rounds, any hang fails by timeout.
TEST(DataLoader, AbandonedPassesStopTheirWorkers) {
  const TensorDataset data = numbered(64);
  DataLoader reference(data, {.batch_size = 2, .shuffle = true, .seed = 4});
  reference.set_epoch(1);
  const std::vector<std::vector<int64_t>> epoch1 = pass_ids(reference);
  for (int round = 0; round < 2000; ++round) {
    DataLoader loader(data, {.batch_size = 2, .shuffle = true, .seed = 4, .workers = 1 + round % 3, .prefetch = 1});
    if (round % 4 == 0) continue;  // destroyed before any pass
    std::optional<std::vector<Tensor>> first = loader.next();
    ASSERT_TRUE(first);
    if (round % 4 == 1) continue;  // destroyed mid-pass
    if (round % 4 == 2) {
      loader.set_epoch(1);  // abandons epoch 0
      ASSERT_EQ(ids_of(*loader.next()), epoch1[0]);
      continue;
    }
    DataLoader moved = std::move(loader);          // the workers keep going for the new owner
    ASSERT_EQ(ids_of(*moved.begin()), epoch1[0]);  // begin() abandons epoch 0 and starts epoch 1
  }
}

TEST(DataLoader, RejectsBadOptions) {
  const TensorDataset data = numbered(4);
  EXPECT_EQ(error_code([&] { (void)DataLoader(data, {.batch_size = 0}); }), "INVALID_ARGUMENT");
  EXPECT_EQ(error_code([&] { (void)DataLoader(data, {.workers = -1}); }), "INVALID_ARGUMENT");
  EXPECT_EQ(error_code([&] { (void)DataLoader(data, {.prefetch = 0}); }), "INVALID_ARGUMENT");
  EXPECT_NE(error_message([&] { (void)DataLoader(data, {.batch_size = -3}); }).find("batch_size -3"),
            std::string::npos);
  DataLoader loader(data);
  EXPECT_EQ(error_code([&] { loader.set_epoch(-1); }), "INVALID_ARGUMENT");
}

class TempFolder {
 public:
  TempFolder() : path_(std::filesystem::temp_directory_path() / ("gbx_data_loader_" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Arrays saved with save_npy (as numpy would write them) load back as the same data set.
TEST(TensorDataset, FromNpyRoundTrip) {
  TempFolder dir;
  const TensorDataset original = numbered(12);
  const Tensor extra = Tensor::from_vector(std::vector<double>(12 * 2, 0.5), {12, 2});
  save_npy(dir / "x.npy", original.tensors()[0]);
  save_npy(dir / "y.npy", original.tensors()[1]);
  save_npy(dir / "w.npy", extra);
  const TensorDataset loaded = TensorDataset::from_npy({dir / "x.npy", dir / "y.npy", dir / "w.npy"});
  EXPECT_EQ(loaded.size(), 12);
  ASSERT_EQ(loaded.tensors().size(), 3u);
  EXPECT_EQ(bytes_of(loaded.tensors()), bytes_of({original.tensors()[0], original.tensors()[1], extra}));
  DataLoader loader(TensorDataset({loaded.tensors()[0], loaded.tensors()[1]}), {.batch_size = 5, .shuffle = true});
  std::vector<int64_t> all = flat(pass_ids(loader));
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, iota(12));
}

// The errors say which tensor (file) is wrong, its shape, and what to do.
TEST(TensorDataset, RejectsMismatchedEmptyAndScalarTensors) {
  TempFolder dir;
  save_npy(dir / "images.npy", Tensor::zeros({10, 4}));
  save_npy(dir / "labels.npy", Tensor::from_vector(iota(9)));
  const std::string mismatch = error_message([&] {
    TensorDataset::from_npy({dir / "images.npy", dir / "labels.npy"});
  });
  EXPECT_NE(mismatch.find("SHAPE_MISMATCH"), std::string::npos) << mismatch;
  EXPECT_NE(mismatch.find("labels.npy, int64[9]"), std::string::npos) << mismatch;
  EXPECT_NE(mismatch.find("images.npy, float32[10,4]"), std::string::npos) << mismatch;
  EXPECT_NE(mismatch.find("first dimensions agree"), std::string::npos) << mismatch;
  EXPECT_EQ(error_code([] { (void)TensorDataset({Tensor::zeros({3}), Tensor::zeros({4, 3})}); }), "SHAPE_MISMATCH");

  EXPECT_EQ(error_code([] { (void)TensorDataset(std::vector<Tensor>{}); }), "INVALID_ARGUMENT");
  EXPECT_EQ(error_code([] { TensorDataset::from_npy({}); }), "INVALID_ARGUMENT");
  EXPECT_EQ(error_code([] { (void)TensorDataset({Tensor::zeros({3}), Tensor()}); }), "INVALID_ARGUMENT");
  const std::string scalar = error_message([] { (void)TensorDataset({Tensor::zeros({3}), Tensor::scalar(1.0)}); });
  EXPECT_NE(scalar.find("INVALID_ARGUMENT"), std::string::npos) << scalar;
  EXPECT_NE(scalar.find("tensor 1 (float32[]) is a scalar"), std::string::npos) << scalar;
  EXPECT_NE(scalar.find("reshape"), std::string::npos) << scalar;
  // A file that is not there is load_npy's error, not a crash.
  EXPECT_THROW(TensorDataset::from_npy({dir / "missing.npy"}), Error);
}

}  // namespace
}  // namespace gbx::nn

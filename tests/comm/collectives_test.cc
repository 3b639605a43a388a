// Every collective x dtype x {2,3,4} ranks on Gloo against a single-process reference
// (collective_checks.h).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "comm/gloo_communicator.h"
#include "tests/comm/collective_checks.h"
#include "tests/comm/rank_runner.h"

namespace gearbox::comm {
namespace {
using testing::run_ranks;

using namespace testing;  // NOLINT: the checks' helpers

// Rank `rank` of a `size`-rank Gloo world meeting in dir's file store.
Result<std::unique_ptr<GlooCommunicator>> connect(int rank, int size, const std::string& dir,
                                                  Algorithm algorithm = Algorithm::Auto,
                                                  std::chrono::milliseconds timeout = std::chrono::seconds(300)) {
  auto store = open_store("file:" + dir + "/store");
  if (!store) return store.status();
  GlooOptions o;
  o.rank = rank;
  o.size = size;
  o.algorithm = algorithm;
  o.timeout = timeout;
  return GlooCommunicator::create(*store, o);
}

std::string all_collectives(int rank, int size, const std::string& dir, Algorithm algo) {
  auto c = connect(rank, size, dir, algo, std::chrono::seconds(20));
  if (!c) return c.status().to_string();
  return check_all_collectives(**c);
}

void expect_all_ok(const std::vector<testing::RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ": " << results[r].message;
  }
}

class GlooCollectives : public ::testing::TestWithParam<int> {};

TEST_P(GlooCollectives, EveryOpAndDtypeMatchesTheReference) {
  int n = GetParam();
  expect_all_ok(run_ranks(
      n, "gloo", [](int r, int s, const std::string& d) { return all_collectives(r, s, d, Algorithm::Auto); }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooCollectives, ::testing::Values(2, 3, 4));

// Each selectable allreduce algorithm on 4 ranks (bcube, halving-doubling: power-of-two worlds
// are their home case) with a message large enough for several ring segments.
TEST(GlooAlgorithms, EachAlgorithmSumsLargeF32Exactly) {
  for (Algorithm a : {Algorithm::Ring, Algorithm::Bcube, Algorithm::HalvingDoubling}) {
    auto results = run_ranks(4, "algo", [a](int rank, int size, const std::string& dir) -> std::string {
      auto c = connect(rank, size, dir, a, std::chrono::seconds(20));
      if (!c) return c.status().to_string();
      const int64_t n = (3 << 20) / 4 + 5;  // 3 MB + a tail
      Tensor t(DType::F32, {n});
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = float((i % 1000) * (rank + 1));  // sums stay exact
      if (Status s = (*c)->allreduce(t); !s.ok()) return s.to_string();
      for (int64_t i = 0; i < n; ++i)
        if (t.data<float>()[i] != float((i % 1000) * 10)) return std::string("element ") + std::to_string(i) + " wrong";
      return "";
    });
    SCOPED_TRACE(algorithm_name(a));
    expect_all_ok(results);
  }
}

// Auto never picks Gloo's old-style halving-doubling: a ring allreduce after one stalled for
// ~15 s on 4 ranks (a 17 MB DDP step after a small model's steps; bench/allreduce and
// gloo_communicator.cc). The stall is slow progress, not a hang, so a collective timeout does
// not catch it and a timing assertion is not allowed: the policy is tested instead, on the
// 4-rank world where halving-doubling used to be chosen.
TEST(GlooAlgorithms, AutoNeverPicksHalvingDoubling) {
  expect_all_ok(run_ranks(4, "auto_policy", [](int rank, int size, const std::string& dir) -> std::string {
    auto c = connect(rank, size, dir);
    if (!c) return c.status().to_string();
    for (size_t bytes : {size_t(4), size_t(4096), size_t(256) << 10, size_t(17) << 20})
      for (DType t : {DType::F32, DType::I32, DType::I64, DType::F16, DType::BF16}) {
        const Algorithm a = (*c)->pick_algorithm(bytes, t);
        if (a == Algorithm::HalvingDoubling || a == Algorithm::Auto)
          return std::string("Auto picked ") + algorithm_name(a) + " for " + std::to_string(bytes) + " bytes";
      }
    return "";
  }));
}

TEST(GlooBucketed, BucketedAllreduceOfAListMatchesPerTensorSums) {
  expect_all_ok(run_ranks(3, "bucket", [](int rank, int size, const std::string& dir) -> std::string {
    auto c = connect(rank, size, dir);
    if (!c) return c.status().to_string();
    std::vector<Tensor> ts;
    for (int k = 0; k < 7; ++k) ts.push_back(make_input(rank, 100 + 37 * k, k == 3 ? DType::I64 : DType::F32, k * 11));
    auto w = (*c)->allreduce_bucketed_async(ts, ReduceOp::Sum, 1000);  // several buckets
    if (Status s = w->wait(); !s.ok()) return s.to_string();
    for (int k = 0; k < 7; ++k)
      for (int64_t i = 0; i < ts[k].numel(); ++i) {
        double want = reference(ReduceOp::Sum, size, i + k * 11, ts[k].dtype());
        if (!matches(ts[k].at_double(i), ReduceOp::Sum, size, i + k * 11, ts[k].dtype()))
          return mismatch("bucketed", ts[k].dtype(), ReduceOp::Sum, i, ts[k].at_double(i), want);
      }
    std::vector<Tensor> params{make_input(rank, 9, DType::F32), make_input(rank, 4, DType::I32)};
    if (Status s = (*c)->broadcast_all(params, 0); !s.ok()) return s.to_string();
    for (int64_t i = 0; i < 9; ++i)
      if (params[0].at_double(i) != held(0, i, DType::F32)) return "broadcast_all differs from rank 0";
    return "";
  }));
}

TEST(GlooArguments, BadArgumentsAreReportedNotCrashed) {
  expect_all_ok(run_ranks(2, "args", [](int rank, int size, const std::string& dir) -> std::string {
    auto c = connect(rank, size, dir);
    if (!c) return c.status().to_string();
    Tensor u8(DType::U8, {4});
    if ((*c)->allreduce(u8).code() != ErrorCode::COMM_INVALID_ARGUMENT) return "u8 allreduce accepted";
    Tensor odd(DType::F32, {5}), out;
    if ((*c)->reduce_scatter(odd, out).code() != ErrorCode::COMM_INVALID_ARGUMENT) return "5 elements scattered over 2";
    Tensor t(DType::F32, {4});
    if ((*c)->broadcast(t, 2).code() != ErrorCode::COMM_INVALID_ARGUMENT) return "root 2 of 2 accepted";
    // the communicator still works after rejected calls (nothing was sent)
    if (Status s = (*c)->barrier(); !s.ok()) return s.to_string();
    return "";
  }));
}

}  // namespace
}  // namespace gearbox::comm

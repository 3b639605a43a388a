// Every collective x dtype x {2,3,4} ranks on Gloo against a single-process reference computed
// here in double precision from the same inputs: exact for int32/int64, within summation-order
// (and 16-bit rounding) tolerance for float32/float16/bfloat16.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "comm/gloo_communicator.h"
#include "tests/comm/rank_runner.h"

namespace gearbox::comm {
namespace {
using testing::run_ranks;

const DType kDtypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64};
const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product};

// Rank r's element i: small values so that products over 4 ranks stay exact in int32 and finite in f16.
double input_value(int r, int64_t i, DType d) {
  int k = int((r * 7 + i * 3 + (i / 5)) % 11) - 5;  // -5..5
  if (is_float(d)) return k * 0.37 + (k == 0 ? 0.11 : 0.0);
  return k == 0 ? 1 : k / 2 + (k > 0 ? 1 : -1);  // -3..3, never 0
}

Tensor make_input(int r, int64_t n, DType d, int64_t offset = 0) {
  Tensor t(d, {n});
  for (int64_t i = 0; i < n; ++i) {
    double v = input_value(r, i + offset, d);
    switch (d) {
      case DType::F32: t.data<float>()[i] = float(v); break;
      case DType::F16: t.data<Half>()[i] = Half(float(v)); break;
      case DType::BF16: t.data<BFloat16>()[i] = BFloat16(float(v)); break;
      case DType::I32: t.data<int32_t>()[i] = int32_t(v); break;
      case DType::I64: t.data<int64_t>()[i] = int64_t(v); break;
      default: break;
    }
  }
  return t;
}

// The value as the rank holds it (after rounding to the dtype).
double held(int r, int64_t i, DType d) { return make_input(r, 1, d, i).at_double(0); }

// The reduced value; *scale gets the largest magnitude a partial result reached (the rounding
// of 16-bit partials is relative to it).
double reference(ReduceOp op, int size, int64_t i, DType d, double* scale = nullptr) {
  double acc = held(0, i, d);
  double big = std::fabs(acc);
  for (int r = 1; r < size; ++r) {
    double v = held(r, i, d);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: acc += v; break;
      case ReduceOp::Product: acc *= v; break;
      case ReduceOp::Max: acc = std::max(acc, v); break;
      case ReduceOp::Min: acc = std::min(acc, v); break;
    }
    big = std::max(big, std::fabs(acc));
  }
  if (scale) *scale = big;
  if (op == ReduceOp::Avg) acc = is_float(d) ? acc / size : double(int64_t(acc) / size);
  return acc;
}

bool matches(double got, ReduceOp op, int size, int64_t i, DType d) {
  double scale = 0;
  double want = reference(op, size, i, d, &scale);
  if (!is_float(d)) return got == want;
  // Each of the size-1 reduction steps (and Avg's division) rounds to the dtype: allow one
  // unit-roundoff of the largest partial per step.
  double u = d == DType::F32 ? 6e-8 : d == DType::F16 ? 4.9e-4 : 3.9e-3;
  return std::fabs(got - want) <= u * std::max(scale, std::fabs(want)) * size + 1e-30;
}

std::string mismatch(const char* what, DType d, ReduceOp op, int64_t i, double got, double want) {
  std::ostringstream os;
  os << what << " " << dtype_name(d) << " " << reduce_op_name(op) << " element " << i << ": got " << got << " want "
     << want;
  return os.str();
}

// The body every rank runs: all collectives on all dtypes.
std::string all_collectives(int rank, int size, const std::string& dir, Algorithm algo) {
  auto store = open_store("file:" + dir + "/store");
  if (!store) return store.status().to_string();
  GlooOptions o;
  o.rank = rank;
  o.size = size;
  o.timeout = std::chrono::seconds(20);
  o.algorithm = algo;
  auto c = GlooCommunicator::create(*store, o);
  if (!c) return c.status().to_string();
  Communicator& comm = **c;
  const int64_t n = 1003;  // not a multiple of any world size: uneven ring chunks
  for (DType d : kDtypes) {
    for (ReduceOp op : kOps) {
      Tensor t = make_input(rank, n, d);
      if (Status s = comm.allreduce(t, op); !s.ok()) return s.to_string();
      for (int64_t i = 0; i < n; ++i)
        if (!matches(t.at_double(i), op, size, i, d))
          return mismatch("allreduce", d, op, i, t.at_double(i), reference(op, size, i, d));
      // reduce to the last rank
      Tensor u = make_input(rank, n, d);
      if (Status s = comm.reduce(u, size - 1, op); !s.ok()) return s.to_string();
      if (rank == size - 1)
        for (int64_t i = 0; i < n; ++i)
          if (!matches(u.at_double(i), op, size, i, d))
            return mismatch("reduce", d, op, i, u.at_double(i), reference(op, size, i, d));
      // reduce_scatter: chunk k of the reduced whole
      const int64_t k = 13;
      Tensor whole = make_input(rank, k * size, d), part;
      if (Status s = comm.reduce_scatter(whole, part, op); !s.ok()) return s.to_string();
      for (int64_t i = 0; i < k; ++i)
        if (!matches(part.at_double(i), op, size, rank * k + i, d))
          return mismatch("reduce_scatter", d, op, i, part.at_double(i), reference(op, size, rank * k + i, d));
    }
    // allgather: out chunk r = rank r's input
    const int64_t k = 17;
    Tensor in = make_input(rank, k, d), out;
    if (Status s = comm.allgather(in, out); !s.ok()) return s.to_string();
    for (int r = 0; r < size; ++r)
      for (int64_t i = 0; i < k; ++i)
        if (out.at_double(r * k + i) != held(r, i, d)) return mismatch("allgather", d, ReduceOp::Sum, r * k + i, out.at_double(r * k + i), held(r, i, d));
    // broadcast from rank 1
    Tensor b = make_input(rank, k, d);
    if (Status s = comm.broadcast(b, 1); !s.ok()) return s.to_string();
    for (int64_t i = 0; i < k; ++i)
      if (b.at_double(i) != held(1, i, d)) return mismatch("broadcast", d, ReduceOp::Sum, i, b.at_double(i), held(1, i, d));
    // gather to rank 0
    Tensor g;
    if (Status s = comm.gather(in, g, 0); !s.ok()) return s.to_string();
    if (rank == 0)
      for (int r = 0; r < size; ++r)
        for (int64_t i = 0; i < k; ++i)
          if (g.at_double(r * k + i) != held(r, i, d)) return mismatch("gather", d, ReduceOp::Sum, r * k + i, g.at_double(r * k + i), held(r, i, d));
    // scatter from rank 0: chunk r of rank 0's input
    Tensor sin = make_input(rank, k * size, d), sout(d, {k});
    if (Status s = comm.scatter(sin, sout, 0); !s.ok()) return s.to_string();
    for (int64_t i = 0; i < k; ++i)
      if (sout.at_double(i) != held(0, rank * k + i, d)) return mismatch("scatter", d, ReduceOp::Sum, i, sout.at_double(i), held(0, rank * k + i, d));
    // alltoall: out chunk j = rank j's chunk `rank`
    Tensor ain = make_input(rank, k * size, d), aout;
    if (Status s = comm.alltoall(ain, aout); !s.ok()) return s.to_string();
    for (int j = 0; j < size; ++j)
      for (int64_t i = 0; i < k; ++i)
        if (aout.at_double(j * k + i) != held(j, rank * k + i, d))
          return mismatch("alltoall", d, ReduceOp::Sum, j * k + i, aout.at_double(j * k + i), held(j, rank * k + i, d));
    // send/recv around a ring
    Tensor msg = make_input(rank, k, d), got(d, {k});
    auto sw = comm.send_async(msg, (rank + 1) % size, 7);
    if (Status s = comm.recv(got, (rank + size - 1) % size, 7); !s.ok()) return s.to_string();
    if (Status s = sw->wait(); !s.ok()) return s.to_string();
    int from = (rank + size - 1) % size;
    for (int64_t i = 0; i < k; ++i)
      if (got.at_double(i) != held(from, i, d)) return mismatch("recv", d, ReduceOp::Sum, i, got.at_double(i), held(from, i, d));
  }
  if (Status s = comm.barrier(); !s.ok()) return s.to_string();
  return "";
}

void expect_all_ok(const std::vector<testing::RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ": " << results[r].message;
  }
}

class GlooCollectives : public ::testing::TestWithParam<int> {};

TEST_P(GlooCollectives, EveryOpAndDtypeMatchesTheReference) {
  int n = GetParam();
  expect_all_ok(run_ranks(n, "gloo", [](int r, int s, const std::string& d) { return all_collectives(r, s, d, Algorithm::Auto); }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooCollectives, ::testing::Values(2, 3, 4));

// Each selectable allreduce algorithm on 4 ranks (bcube, halving-doubling: power-of-two worlds
// are their home case) with a message large enough for several ring segments.
TEST(GlooAlgorithms, EachAlgorithmSumsLargeF32Exactly) {
  for (Algorithm a : {Algorithm::Ring, Algorithm::Bcube, Algorithm::HalvingDoubling}) {
    auto results = run_ranks(4, "algo", [a](int rank, int size, const std::string& dir) -> std::string {
      auto store = open_store("file:" + dir + "/store");
      GlooOptions o;
      o.rank = rank;
      o.size = size;
      o.algorithm = a;
      o.timeout = std::chrono::seconds(20);
      auto c = GlooCommunicator::create(*store, o);
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

TEST(GlooBucketed, BucketedAllreduceOfAListMatchesPerTensorSums) {
  expect_all_ok(run_ranks(3, "bucket", [](int rank, int size, const std::string& dir) -> std::string {
    auto store = open_store("file:" + dir + "/store");
    GlooOptions o;
    o.rank = rank;
    o.size = size;
    auto c = GlooCommunicator::create(*store, o);
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
    auto store = open_store("file:" + dir + "/store");
    GlooOptions o;
    o.rank = rank;
    o.size = size;
    auto c = GlooCommunicator::create(*store, o);
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

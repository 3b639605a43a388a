// The collective checks every backend's test runs on each rank (tests/comm/collectives_test.cc
// forks Gloo ranks; rank_main.cc runs them under gearbox launch and mpirun): every op and dtype
// against a single-process reference computed here in double precision from the same inputs,
// exact for int32/int64, within summation-order (and 16-bit rounding) tolerance for floats.
#pragma once

#include <cmath>
#include <sstream>
#include <string>

#include "comm/communicator.h"

namespace gearbox::comm::testing {

inline const DType kDtypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64};
inline const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product};

// Rank r's element i: small values so that products over 4 ranks stay exact in int32 and finite in f16.
inline double input_value(int r, int64_t i, DType d) {
  int k = int((r * 7 + i * 3 + (i / 5)) % 11) - 5;  // -5..5
  if (is_float(d)) return k * 0.37 + (k == 0 ? 0.11 : 0.0);
  return k == 0 ? 1 : k / 2 + (k > 0 ? 1 : -1);  // -3..3, never 0
}

inline Tensor make_input(int r, int64_t n, DType d, int64_t offset = 0) {
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
inline double held(int r, int64_t i, DType d) { return make_input(r, 1, d, i).at_double(0); }

// The reduced value; *scale gets the largest magnitude a partial result reached (the rounding
// of 16-bit partials is relative to it).
inline double reference(ReduceOp op, int size, int64_t i, DType d, double* scale = nullptr) {
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

inline bool matches(double got, ReduceOp op, int size, int64_t i, DType d) {
  double scale = 0;
  double want = reference(op, size, i, d, &scale);
  if (!is_float(d)) return got == want;
  // Each of the size-1 reduction steps (and Avg's division) rounds to the dtype: allow one
  // unit-roundoff of the largest partial per step.
  double u = d == DType::F32 ? 6e-8 : d == DType::F16 ? 4.9e-4 : 3.9e-3;
  return std::fabs(got - want) <= u * std::max(scale, std::fabs(want)) * size + 1e-30;
}

inline std::string mismatch(const char* what, DType d, ReduceOp op, int64_t i, double got, double want) {
  std::ostringstream os;
  os << what << " " << dtype_name(d) << " " << reduce_op_name(op) << " element " << i << ": got " << got << " want "
     << want;
  return os.str();
}

// What every rank runs: all collectives on all dtypes; "" when all matched.
inline std::string check_all_collectives(Communicator& comm) {
  const int rank = comm.rank(), size = comm.size();
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

}  // namespace gearbox::comm::testing

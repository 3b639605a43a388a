// Concat (ai.onnx 1-21) on the cpu.simd engine: every dtype but strings, as copies of
// contiguous runs (memcpy, which is already vectorized) spread over the OpenMP team when the
// tensor is large, into an output that is not zeroed first (the reference zeroes it, then
// copies element by element on one thread).
//
// With `outer` the product of the dims before the axis, each input is `outer` runs of (its
// axis dim x the dims after) elements, and the output is `outer` rows of those runs side by
// side. Work items are blocks of whole rows when there are many rows (a channels-last Concat
// over channels: a row per pixel), else pieces of the runs (an NCHW Concat at batch 1: one
// run per input). The cases the reference reports as errors (mismatched dims or dtypes, a
// bad axis) are refused by supports(), so the reference runs them and says what is wrong.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/simd/simd_util.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
namespace {

// Below this many bytes in all, one thread copies (a parallel region costs more).
constexpr int64_t kParallelBytes = int64_t{1} << 18;
// The bytes one work item copies, about.
constexpr int64_t kItemBytes = int64_t{1} << 16;

// For every row o < outer and input i, copies input i's run o (runs[i] bytes) to column
// col[i] of row o of the output (rows of row_bytes).
void copy_rows(const std::vector<const unsigned char*>& inputs, const std::vector<int64_t>& runs, int64_t outer,
               int64_t row_bytes, unsigned char* out) {
  std::vector<int64_t> col(runs.size(), 0);
  for (size_t i = 1; i < runs.size(); ++i) col[i] = col[i - 1] + runs[i - 1];
  auto copy = [&](size_t i, int64_t o, int64_t from, int64_t bytes) {
    std::memcpy(out + o * row_bytes + col[i] + from, inputs[i] + o * runs[i] + from, static_cast<size_t>(bytes));
  };
  const int64_t total = outer * row_bytes;
  const bool threaded = total >= kParallelBytes;
  if (!threaded || outer >= 16) {
    // Blocks of whole rows (in order, so the output is written sequentially).
    const int64_t rows_per_item = std::max<int64_t>(1, kItemBytes / std::max<int64_t>(1, row_bytes));
    const int64_t items = (outer + rows_per_item - 1) / rows_per_item;
    for_each_index(items, threaded, [&](int64_t it) {
      const int64_t o1 = std::min(outer, (it + 1) * rows_per_item);
      for (int64_t o = it * rows_per_item; o < o1; ++o)
        for (size_t i = 0; i < runs.size(); ++i)
          if (runs[i] > 0) copy(i, o, 0, runs[i]);
    });
    return;
  }
  // Few, long rows: pieces of each run.
  struct Piece {
    size_t part;
    int64_t row, from, bytes;
  };
  std::vector<Piece> pieces;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < runs.size(); ++i)
      for (int64_t from = 0; from < runs[i]; from += kItemBytes)
        pieces.push_back({i, o, from, std::min(kItemBytes, runs[i] - from)});
  for_each_index(static_cast<int64_t>(pieces.size()), true, [&](int64_t k) {
    const Piece& p = pieces[static_cast<size_t>(k)];
    copy(p.part, p.row, p.from, p.bytes);
  });
}

int64_t outer_of(const Dims& d, int64_t axis) {
  int64_t n = 1;
  for (int64_t i = 0; i < axis; ++i) n *= d[static_cast<size_t>(i)];
  return n;
}
int64_t inner_of(const Dims& d, int64_t axis) {
  int64_t n = 1;
  for (size_t i = static_cast<size_t>(axis) + 1; i < d.size(); ++i) n *= d[i];
  return n;
}

// Concat's axis in [0, rank), or -1 when invalid (opsets 1-3 default it to 1). Q: a
// KernelQuery or a KernelContext.
template <class Q>
int64_t concat_axis(const Q& q, int64_t rank) {
  if (!q.has_attr("axis") && q.opset() >= 4) return -1;
  int64_t a = q.attr_int("axis", 1);
  if (a < 0) a += rank;
  return a >= 0 && a < rank ? a : -1;
}

Verdict concat_supports(const KernelQuery& q) {
  if (q.num_inputs() == 0) return refuse("no inputs");
  for (size_t i = 0; i < q.num_inputs(); ++i) {
    if (Verdict v = need_tensors(q, {i}); !v.accepted()) return v;
    if (q.dtype(i) != q.dtype(0)) return refuse("inputs of different dtypes");
  }
  if (q.dtype(0) == DType::String || dtype_size(q.dtype(0)) == 0) return refuse("strings");
  std::vector<const Dims*> dims;
  for (size_t i = 0; i < q.num_inputs(); ++i) {
    dims.push_back(q.dims(i));
    if (!dims.back()) return later();
  }
  const int64_t rank = static_cast<int64_t>(dims[0]->size());
  if (rank == 0) return refuse("scalars");
  const int64_t axis = concat_axis(q, rank);
  if (axis < 0) return refuse("the axis is missing or out of range");
  for (const Dims* d : dims) {
    if (static_cast<int64_t>(d->size()) != rank) return refuse("inputs of different ranks");
    for (int64_t k = 0; k < rank; ++k)
      if (k != axis && (*d)[static_cast<size_t>(k)] != (*dims[0])[static_cast<size_t>(k)])
        return refuse("inputs differ off the axis");
  }
  return accept();
}

Status concat(KernelContext& ctx) {
  const Tensor& first = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(first.rank());
  const int64_t axis = concat_axis(ctx, rank);
  if (axis < 0) return outside_supports(ctx, "this axis");
  Dims out = first.dims();
  out[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) out[static_cast<size_t>(axis)] += ctx.input(i).dim(size_t(axis));
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(first.dtype(), out));
  const int64_t es = static_cast<int64_t>(dtype_size(first.dtype()));
  const int64_t inner = inner_of(out, axis), outer = outer_of(out, axis);
  std::vector<const unsigned char*> parts;
  std::vector<int64_t> runs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    parts.push_back(static_cast<const unsigned char*>(ctx.input(i).raw()));
    runs.push_back(ctx.input(i).dim(size_t(axis)) * inner * es);
  }
  if (y.numel() > 0)
    copy_rows(parts, runs, outer, out[static_cast<size_t>(axis)] * inner * es,
              static_cast<unsigned char*>(y.mutable_raw()));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({"",
                     "Concat",
                     1,
                     18,
                     kEngineSimd,
                     {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I16, DType::U16,
                      DType::I32, DType::U32, DType::I64, DType::U64, DType::Bool},
                     concat});
GBX_KERNEL_SUPPORT(concat, {.supports = concat_supports});

}  // namespace gearbox::simd

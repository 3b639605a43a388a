// Transpose (ai.onnx opsets 1-17) as a oneDNN reorder, cpu.dnnl engine.
//
// The input is described to oneDNN as the output's dims with the input's strides permuted
// (a strided view), the output as the plain row-major tensor, and one reorder copies
// between them: oneDNN's reorder kernels are vectorized and threaded, where the reference's
// strided copy moves one element at a time once the innermost output dim is not contiguous
// in the input. That is the layout pass's boundary, NCHW -> NHWC of a network's image input
// (C = 3: 1x3x224x224 takes the reference ~0.24 ms, a tenth of it here). Handled: float32,
// int32, int8 and uint8 (the dtypes a reorder copies bit for bit), ranks 1-6. Everything
// else (other dtypes, a perm the reference rejects, empty tensors) is refused by
// transpose_supports(), so the node runs on the next engine (the reference, which also
// reports errors).
#include <string>
#include <vector>

#include "kernels/cpu/dnnl/dnnl_util.h"
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::dnnl_engine {
namespace {

using dnnl::memory;

struct TransposePrim {
  dnnl::reorder prim;
  memory::desc src_md, dst_md;
};

bool dnnl_dtype(DType t, memory::data_type* out) {
  switch (t) {
    case DType::F32:
      *out = memory::data_type::f32;
      return true;
    case DType::I32:
      *out = memory::data_type::s32;
      return true;
    case DType::I8:
      *out = memory::data_type::s8;
      return true;
    case DType::U8:
      *out = memory::data_type::u8;
      return true;
    default:
      return false;
  }
}

// The permutation of a transpose of a rank-`rank` tensor (`attrs`: a context with the node's
// attributes); "" when this kernel handles it, else why not.
std::string transpose_perm(const KernelContext& attrs, size_t rank, std::vector<int64_t>* perm) {
  if (rank < 1 || rank > 6) return "rank " + std::to_string(rank) + " is not 1-6";
  perm->clear();
  if (attrs.has_attr("perm")) {
    // An invalid perm (wrong length, out of range, repeated) is the reference's error.
    const std::vector<int64_t> given = attrs.attr_ints("perm");
    if (given.size() != rank) return "perm has " + std::to_string(given.size()) + " entries";
    auto normalized = ref::normalize_axes(attrs, given, static_cast<int64_t>(rank));
    if (!normalized.ok()) return "perm is invalid";
    *perm = std::move(normalized).value();
  } else {
    for (size_t i = 0; i < rank; ++i) perm->push_back(static_cast<int64_t>(rank - 1 - i));
  }
  return "";
}

Verdict transpose_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0}); !v.accepted()) return v;
  memory::data_type dt;
  if (q.dtype(0) != DType::Undefined && !dnnl_dtype(q.dtype(0), &dt))
    return refuse("dtype " + std::string(dtype_name(q.dtype(0))) + " is not one a reorder copies");
  if (q.rank(0) < 0) return later();
  std::vector<RuntimeValue> none;
  const KernelContext attrs(q.op(), {}, &none, {});  // transpose_perm reads attributes only
  std::vector<int64_t> perm;
  if (std::string why = transpose_perm(attrs, static_cast<size_t>(q.rank(0)), &perm); !why.empty()) return refuse(why);
  const Dims* d = q.dims(0);
  if (!d) return later();
  return dims_numel(*d) == 0 ? refuse("the input is empty") : accept();
}

Status transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t rank = x.rank();
  memory::data_type dt;
  std::vector<int64_t> perm;
  if (!dnnl_dtype(x.dtype(), &dt) || x.numel() == 0) return outside_supports(ctx, "this dtype or an empty input");
  if (std::string why = transpose_perm(ctx, rank, &perm); !why.empty()) return outside_supports(ctx, why);
  const std::vector<int64_t> in_strides = ref::strides_of(x.dims());
  Dims out_dims(rank);
  memory::dims view_strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    out_dims[i] = x.dim(static_cast<size_t>(perm[i]));
    view_strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  const memory::dims out_strides = ref::strides_of(out_dims);
  std::string key = "transpose|" + std::to_string(static_cast<int>(dt)) + to_string(x.dims());
  for (int64_t p : perm) key += std::to_string(p) + ",";
  try {
    auto p = cached<TransposePrim>(key, [&] {
      auto tp = std::make_shared<TransposePrim>();
      tp->src_md = memory::desc(to_dims(out_dims), dt, view_strides);
      tp->dst_md = memory::desc(to_dims(out_dims), dt, out_strides);
      tp->prim = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), tp->src_md, cpu_engine(), tp->dst_md));
      return tp;
    });
    GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(x.dtype(), out_dims));
    memory src(p->src_md, cpu_engine(), const_cast<void*>(x.raw()));
    memory dst(p->dst_md, cpu_engine(), y.mutable_raw());
    dnnl::stream& s = thread_stream();
    p->prim.execute(s, src, dst);
    s.wait();
    ctx.set_output(0, std::move(y));
    return Status::OK();
  } catch (const dnnl::error& e) {
    return dnnl_refused(ctx, e);
  }
}

GBX_REGISTER_KERNEL({"", "Transpose", 1, 18, kEngineDnnl, {}, transpose});
GBX_KERNEL_SUPPORT(transpose,
                   {.inputs = {{DType::F32, DType::I32, DType::I8, DType::U8}}, .supports = transpose_supports});

}  // namespace
}  // namespace gearbox::dnnl_engine

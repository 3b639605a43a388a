// Transpose (ai.onnx opsets 1-17) as a oneDNN reorder, cpu.dnnl engine.
//
// The input is described to oneDNN as the output's dims with the input's strides permuted
// (a strided view), the output as the plain row-major tensor, and one reorder copies
// between them: oneDNN's reorder kernels are vectorized and threaded, where the reference's
// strided copy moves one element at a time once the innermost output dim is not contiguous
// in the input. That is the layout pass's boundary, NCHW -> NHWC of a network's image input
// (C = 3: 1x3x224x224 takes the reference ~0.24 ms, a tenth of it here). Handled: float32,
// int32, int8 and uint8 (the dtypes a reorder copies bit for bit), ranks 1-6. Everything
// else (other dtypes, a perm the reference rejects, empty tensors) falls back inside the
// kernel to the reference (conv.cc's convention), which also reports errors.
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
    case DType::F32: *out = memory::data_type::f32; return true;
    case DType::I32: *out = memory::data_type::s32; return true;
    case DType::I8: *out = memory::data_type::s8; return true;
    case DType::U8: *out = memory::data_type::u8; return true;
    default: return false;
  }
}

Status transpose(KernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.input_value(0).is_tensor()) return run_ref(ctx);
  const Tensor& x = ctx.input(0);
  const size_t rank = x.rank();
  memory::data_type dt;
  if (!dnnl_dtype(x.dtype(), &dt) || rank < 1 || rank > 6 || x.numel() == 0) return run_ref(ctx);
  std::vector<int64_t> perm;
  if (ctx.has_attr("perm")) {
    // An invalid perm (wrong length, out of range, repeated) is the reference's error.
    const std::vector<int64_t> given = ctx.attr_ints("perm");
    if (given.size() != rank) return run_ref(ctx);
    auto normalized = ref::normalize_axes(ctx, given, static_cast<int64_t>(rank));
    if (!normalized.ok()) return run_ref(ctx);
    perm = std::move(normalized).value();
  } else {
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  }
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
  } catch (const dnnl::error&) {
    return run_ref(ctx);
  }
}

GBX_REGISTER_KERNEL({"", "Transpose", 1, 17, kEngineDnnl, {}, transpose});

}  // namespace
}  // namespace gearbox::dnnl_engine

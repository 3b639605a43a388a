// NonMaxSuppression (opsets 10-17), reference. Greedy per (batch, class): visit boxes by
// descending score (ties by lower index, as ONNX Runtime does), keep a box when its IoU with
// every kept box is <= iou_threshold. Boxes with score <= score_threshold are dropped
// (when the threshold is given). Output: int64 [num_selected, 3] of (batch, class, box).
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

struct Box {
  double y1, x1, y2, x2;
};

double iou(const Box& a, const Box& b) {
  double ix1 = std::max(a.x1, b.x1), iy1 = std::max(a.y1, b.y1);
  double ix2 = std::min(a.x2, b.x2), iy2 = std::min(a.y2, b.y2);
  double inter = std::max(0.0, ix2 - ix1) * std::max(0.0, iy2 - iy1);
  double area_a = (a.x2 - a.x1) * (a.y2 - a.y1), area_b = (b.x2 - b.x1) * (b.y2 - b.y1);
  double uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return 0;
  return inter / uni;
}

Status nms(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4 || scores.rank() != 3 || scores.dim(0) != boxes.dim(0) ||
      scores.dim(2) != boxes.dim(1))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "boxes must be [B, N, 4] and scores [B, C, N]; got boxes ",
                     describe(boxes), ", scores ", describe(scores));
  if (!is_float(boxes.dtype()) || !is_float(scores.dtype())) return ctx.unsupported_dtype(boxes.dtype());
  int64_t max_out = 0;
  if (ctx.has_input(2)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(2));
    if (ctx.input(2).numel() > 0) max_out = static_cast<int64_t>(ctx.input(2).at_double(0));
  }
  double iou_th = 0;
  if (ctx.has_input(3) && ctx.input_value(3).is_tensor() && ctx.input(3).numel() > 0)
    iou_th = ctx.input(3).at_double(0);
  const bool has_score_th = ctx.has_input(4) && ctx.input_value(4).is_tensor() && ctx.input(4).numel() > 0;
  const double score_th = has_score_th ? ctx.input(4).at_double(0) : 0;
  if (iou_th < 0 || iou_th > 1)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "iou_threshold ", iou_th, " must be within [0, 1]");
  const int64_t center = ctx.attr_int("center_point_box", 0);
  if (center != 0 && center != 1)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "center_point_box must be 0 or 1, got ", center);

  const int64_t B = boxes.dim(0), N = boxes.dim(1), C = scores.dim(1);
  std::vector<double> bv = read_doubles(boxes), sv = read_doubles(scores);
  std::vector<int64_t> selected;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<Box> bx(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) {
      const double* p = &bv[static_cast<size_t>((b * N + i) * 4)];
      Box& o = bx[static_cast<size_t>(i)];
      if (center) {  // [x_center, y_center, width, height]
        o = {p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
      } else {  // [y1, x1, y2, x2], either corner order
        o = {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
      }
    }
    for (int64_t c = 0; c < C; ++c) {
      if (max_out <= 0) break;
      const double* sc = &sv[static_cast<size_t>((b * C + c) * N)];
      std::vector<int64_t> order;
      for (int64_t i = 0; i < N; ++i)
        if (!has_score_th || sc[i] > score_th) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t z) { return sc[a] > sc[z]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t k : kept)
          if (iou(bx[static_cast<size_t>(i)], bx[static_cast<size_t>(k)]) > iou_th) {
            keep = false;
            break;
          }
        if (!keep) continue;
        kept.push_back(i);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  Tensor out(DType::I64, {static_cast<int64_t>(selected.size() / 3), 3});
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "NonMaxSuppression", 10, 18, kEngineRef, {DType::F32, DType::F64, DType::F16}, nms});

}  // namespace
}  // namespace gearbox::ref

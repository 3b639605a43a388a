// RNN, GRU and LSTM (ai.onnx 7-21) on the cpu.simd engine, float32, with the default
// activations (Tanh; Sigmoid, Tanh; Sigmoid, Tanh, Tanh); everything else of the ops is
// handled: forward/reverse/bidirectional, biases, sequence_lens, initial states, peepholes,
// GRU's linear_before_reset either way, LSTM's input_forget, clip, layout 0 and 1. Other
// activations, dtypes and shapes the reference refuses run on cpu.ref (supports()).
//
// How it is fast where the reference is a per-element dot-product loop:
// - the input projection of the whole sequence is one product per direction,
//   XW = X W^T + (Wb + Rb), over all S x B rows (gemm.h, W packed once and cached);
// - each step is one product of the B rows of h_{t-1} with R^T (R packed once), then the
//   gates over whole rows with the dispatched vector Sigmoid/Tanh (elementwise.h);
// - the two directions of a bidirectional layer run on two threads at once (the recurrence
//   is serial within a direction; the input projection uses the whole team).
// Numbers: bench/ort_compare.py --corpus (crnn, vad_lstm, vad_gru), docs/performance.md.
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "base/run_options.h"
#include "kernels/cpu/simd/elementwise.h"
#include "kernels/cpu/simd/gemm.h"
#include "kernels/cpu/simd/simd_util.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
namespace {

enum class Cell { Rnn, Gru, Lstm };

constexpr int64_t gates_of(Cell c) { return c == Cell::Rnn ? 1 : c == Cell::Gru ? 3 : 4; }

// The activations attribute names the defaults (or is absent): those are the ones this
// kernel computes.
bool default_activations(const std::vector<std::string>& names, Cell cell) {
  static const std::vector<std::string> kRnn{"tanh"}, kGru{"sigmoid", "tanh"}, kLstm{"sigmoid", "tanh", "tanh"};
  const std::vector<std::string>& want = cell == Cell::Rnn ? kRnn : cell == Cell::Gru ? kGru : kLstm;
  if (names.empty()) return true;
  if (names.size() % want.size() != 0) return false;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string n = names[i];
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n != want[i % want.size()]) return false;
  }
  return true;
}

// What the node's attributes and dims say, checked the way the reference checks them.
struct RnnShape {
  int64_t s = 0, b = 0, in = 0, h = 0, g = 0;
  int dirs = 1;
  bool layout1 = false, reverse_only = false;
};

// "" when the dims fit the op (the reference's checks), else why not.
std::string shape_refusal(Cell cell, const std::string& direction, int64_t layout, int64_t hidden_attr, const Dims& x,
                          const Dims& w, const Dims& r, RnnShape* out) {
  RnnShape s;
  s.g = gates_of(cell);
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return "direction '" + direction + "'";
  s.dirs = direction == "bidirectional" ? 2 : 1;
  s.reverse_only = direction == "reverse";
  if (layout != 0 && layout != 1) return "layout " + std::to_string(layout);
  s.layout1 = layout == 1;
  if (x.size() != 3 || w.size() != 3 || r.size() != 3) return "X, W or R is not 3-D";
  s.s = s.layout1 ? x[1] : x[0];
  s.b = s.layout1 ? x[0] : x[1];
  s.in = x[2];
  if (w[1] % s.g != 0) return "W's rows are not a multiple of the gates";
  s.h = w[1] / s.g;
  if (hidden_attr >= 0 && hidden_attr != s.h) return "hidden_size does not match W";
  if (w != Dims{s.dirs, s.g * s.h, s.in} || r != Dims{s.dirs, s.g * s.h, s.h}) return "W or R does not fit X";
  if (s.s == 0 || s.b == 0 || s.h == 0 || s.in == 0) return "an empty sequence, batch or size";
  *out = s;
  return "";
}

Cell cell_of(std::string_view op) { return op == "RNN" ? Cell::Rnn : op == "GRU" ? Cell::Gru : Cell::Lstm; }

Verdict rnn_supports(const KernelQuery& q) {
  const Cell cell = cell_of(q.op().op_type);
  if (Verdict v = need_tensors(q, {0, 1, 2}); !v.accepted()) return v;
  {
    std::vector<RuntimeValue> none;
    KernelContext attrs(q.op(), {}, &none, {});
    if (!default_activations(attrs.attr_strings("activations"), cell))
      return refuse("activations other than the defaults");
  }
  const Dims* x = q.dims(0);
  const Dims* w = q.dims(1);
  const Dims* r = q.dims(2);
  if (!x || !w || !r) return later();
  RnnShape s;
  const std::string why = shape_refusal(cell, q.attr_string("direction", "forward"), q.attr_int("layout", 0),
                                        q.attr_int("hidden_size", -1), *x, *w, *r, &s);
  if (!why.empty()) return refuse(why);
  // The optional inputs' dims: the reference reports a misfit (with its message).
  const Dims state = s.layout1 ? Dims{s.b, s.dirs, s.h} : Dims{s.dirs, s.b, s.h};
  const std::vector<std::pair<size_t, Dims>> optional{
      {3, {s.dirs, 2 * s.g * s.h}}, {4, {s.b}}, {5, state}, {6, state}, {7, {s.dirs, 3 * s.h}}};
  for (const auto& [i, want] : optional) {
    if (!q.has_input(i) || (i >= 6 && cell != Cell::Lstm)) continue;
    if (!q.is_tensor(i)) return refuse("input " + std::to_string(i) + " is not a tensor");
    const Dims* d = q.dims(i);
    if (!d) return later();
    if (*d != want) return refuse("input " + std::to_string(i) + " is " + to_string(*d) + ", not " + to_string(want));
  }
  return accept();
}

// The per-direction vectors the steps add: the bias folded into the input projection and, for
// a GRU with linear_before_reset, the recurrent bias of the h gate (applied before the reset).
struct Biases {
  std::vector<float> x;  // [dirs][G H]
  std::vector<float> h;  // [dirs][G H], GRU linear_before_reset only
};

Biases read_biases(const KernelContext& ctx, Cell cell, const RnnShape& s, bool lbr) {
  const int64_t gh = s.g * s.h;
  Biases bi;
  bi.x.assign(static_cast<size_t>(s.dirs * gh), 0.f);
  if (cell == Cell::Gru && lbr) bi.h.assign(bi.x.size(), 0.f);
  if (!ctx.has_input(3)) return bi;
  const float* b = ctx.input(3).data<float>();
  for (int d = 0; d < s.dirs; ++d) {
    const float* wb = b + d * 2 * gh;
    const float* rb = wb + gh;
    for (int64_t k = 0; k < gh; ++k) {
      // A GRU with linear_before_reset keeps Rb_h out of the projection: r multiplies it.
      const bool rb_after_reset = cell == Cell::Gru && lbr && k >= 2 * s.h;
      bi.x[static_cast<size_t>(d * gh + k)] = wb[k] + (rb_after_reset ? 0.f : rb[k]);
      if (rb_after_reset) bi.h[static_cast<size_t>(d * gh + k)] = rb[k];
    }
  }
  return bi;
}

void clip_span(float* v, int64_t n, float clip) {
  for (int64_t i = 0; i < n; ++i) v[i] = std::min(std::max(v[i], -clip), clip);
}

// One direction's recurrence over the whole sequence.
struct Direction {
  Cell cell;
  const RnnShape* s;
  int d;
  bool reverse, input_forget, has_clip;
  float clip;
  const float* xw;     // [S B rows][G H]: the input projection, biases added
  const float* hbias;  // GRU linear_before_reset: [G H] (Rb_h in the h part), else null
  const float* peep;   // LSTM: [3 H] (i, o, f), or null
  const float* r;      // R^T of this direction packed, all gates (GRU without lbr: z and r only)
  const float* r_h;    // GRU without linear_before_reset: R_h^T packed, else null
  const std::vector<int64_t>* lens;
  float* h;  // [B][H]: the initial state in, the last state out
  float* c;  // LSTM: [B][H] likewise
  float* y;  // Y (zeros where a row has ended), or null
};

int64_t x_row(const RnnShape& s, int64_t t, int64_t b) { return s.layout1 ? b * s.s + t : t * s.b + b; }
int64_t y_offset(const RnnShape& s, int64_t t, int d, int64_t b) {
  return (s.layout1 ? (b * s.s + t) * s.dirs + d : (t * s.dirs + d) * s.b + b) * s.h;
}

// rows x n = a (rows x k, row-major) * packed B, plus an optional bias row; y's rows ldy apart.
void step_product(const float* a, int64_t rows, int64_t k, const float* packed_b, int64_t n, const float* bias,
                  float* y, int64_t ldy) {
  gemm::Problem p;
  p.a = a;
  p.a_rs = k;
  p.bp = packed_b;
  p.y = y;
  p.ldy = ldy;
  p.m = rows;
  p.n = n;
  p.k = k;
  p.beta = bias ? 1.f : 0.f;
  p.c = bias;
  p.c_cs = bias ? 1 : 0;
  gemm::multiply(p);
}

Status run_direction(const Direction& dir) {
  const RnnShape& s = *dir.s;
  const int64_t H = s.h, G = s.g, GH = G * H, B = s.b;
  std::vector<float> hr(static_cast<size_t>(B * GH)), a(static_cast<size_t>(GH)), tmp(static_cast<size_t>(H));
  std::vector<float> rh(dir.r_h ? static_cast<size_t>(B * H) : 0), hh(rh.size());
  std::vector<float> next(static_cast<size_t>(B * H));
  int64_t steps = 0;
  for (int64_t l : *dir.lens) steps = std::max(steps, l);
  for (int64_t st = 0; st < steps; ++st) {
    if (st % 64 == 0) GBX_RETURN_IF_ERROR(check_run_stop());
    // h_{t-1} R^T for every row (rows that have ended are computed and ignored).
    step_product(dir.h, B, H, dir.r, dir.r_h ? 2 * H : GH, dir.hbias, hr.data(), GH);
    auto active = [&](int64_t b) { return st < (*dir.lens)[static_cast<size_t>(b)]; };
    auto time_of = [&](int64_t b) { return dir.reverse ? (*dir.lens)[static_cast<size_t>(b)] - 1 - st : st; };
    if (dir.r_h) {
      // GRU without linear_before_reset: z and r first, then (r . h_{t-1}) R_h^T for all rows.
      for (int64_t b = 0; b < B; ++b) {
        if (!active(b)) continue;
        const float* xw = dir.xw + x_row(s, time_of(b), b) * GH;
        float* g = &hr[static_cast<size_t>(b * GH)];
        binary_span(BinaryOp::Add, xw, 1, g, 1, g, 2 * H);
        if (dir.has_clip) clip_span(g, 2 * H, dir.clip);
        unary_span(UnaryOp::Sigmoid, g, g, 2 * H);
        binary_span(BinaryOp::Mul, g + H, 1, dir.h + b * H, 1, &rh[static_cast<size_t>(b * H)], H);
      }
      step_product(rh.data(), B, H, dir.r_h, H, nullptr, hh.data(), H);
    }
    for (int64_t b = 0; b < B; ++b) {
      if (!active(b)) continue;
      const int64_t t = time_of(b);
      const float* xw = dir.xw + x_row(s, t, b) * GH;
      float* g = &hr[static_cast<size_t>(b * GH)];
      const float* hp = dir.h + b * H;
      float* hn = &next[static_cast<size_t>(b * H)];
      if (dir.cell == Cell::Rnn) {
        binary_span(BinaryOp::Add, xw, 1, g, 1, a.data(), H);
        if (dir.has_clip) clip_span(a.data(), H, dir.clip);
        unary_span(UnaryOp::Tanh, a.data(), hn, H);
      } else if (dir.cell == Cell::Gru) {
        float* z = g;  // gates z, r, h
        float* pre = a.data();
        if (dir.r_h) {  // z and r are done; h: xw_h + (r . h_{t-1}) R_h^T
          binary_span(BinaryOp::Add, xw + 2 * H, 1, &hh[static_cast<size_t>(b * H)], 1, pre, H);
        } else {  // linear_before_reset: h: xw_h + r . (h_{t-1} R_h^T + Rb_h)
          binary_span(BinaryOp::Add, xw, 1, g, 1, g, 2 * H);
          if (dir.has_clip) clip_span(g, 2 * H, dir.clip);
          unary_span(UnaryOp::Sigmoid, g, g, 2 * H);
          binary_span(BinaryOp::Mul, g + H, 1, g + 2 * H, 1, pre, H);
          binary_span(BinaryOp::Add, xw + 2 * H, 1, pre, 1, pre, H);
        }
        if (dir.has_clip) clip_span(pre, H, dir.clip);
        unary_span(UnaryOp::Tanh, pre, pre, H);
        for (int64_t j = 0; j < H; ++j) hn[j] = pre[j] + z[j] * (hp[j] - pre[j]);  // (1 - z) h~ + z h
      } else {                                                                     // LSTM, gates i, o, f, c
        float* ga = a.data();
        binary_span(BinaryOp::Add, xw, 1, g, 1, ga, GH);
        float* cp = dir.c + b * H;
        float *gi = ga, *go = ga + H, *gf = ga + 2 * H, *gc = ga + 3 * H;
        if (dir.peep) {
          for (int64_t j = 0; j < H; ++j) {
            gi[j] += dir.peep[j] * cp[j];
            gf[j] += dir.peep[2 * H + j] * cp[j];
          }
        }
        if (dir.has_clip) {
          clip_span(gi, H, dir.clip);
          clip_span(gf, 2 * H, dir.clip);  // f and c
        }
        unary_span(UnaryOp::Sigmoid, gi, gi, H);
        if (dir.input_forget) {
          for (int64_t j = 0; j < H; ++j) gf[j] = 1.f - gi[j];
        } else {
          unary_span(UnaryOp::Sigmoid, gf, gf, H);
        }
        unary_span(UnaryOp::Tanh, gc, gc, H);
        for (int64_t j = 0; j < H; ++j) cp[j] = gf[j] * cp[j] + gi[j] * gc[j];  // the new c, in place
        if (dir.peep)
          for (int64_t j = 0; j < H; ++j) go[j] += dir.peep[H + j] * cp[j];
        if (dir.has_clip) clip_span(go, H, dir.clip);
        unary_span(UnaryOp::Sigmoid, go, go, H);
        unary_span(UnaryOp::Tanh, cp, tmp.data(), H);
        binary_span(BinaryOp::Mul, go, 1, tmp.data(), 1, hn, H);
      }
      if (dir.y) std::copy_n(hn, H, dir.y + y_offset(s, t, dir.d, b));
    }
    for (int64_t b = 0; b < B; ++b)
      if (active(b)) std::copy_n(&next[static_cast<size_t>(b * H)], H, dir.h + b * H);
  }
  return Status::OK();
}

// A state input ([dirs, B, H], or [B, dirs, H] in layout 1) as [dirs][B][H]; zeros when absent.
std::vector<float> read_state(const KernelContext& ctx, size_t i, const RnnShape& s) {
  std::vector<float> v(static_cast<size_t>(s.dirs * s.b * s.h), 0.f);
  if (!ctx.has_input(i)) return v;
  const float* p = ctx.input(i).data<float>();
  for (int d = 0; d < s.dirs; ++d)
    for (int64_t b = 0; b < s.b; ++b)
      std::copy_n(p + (s.layout1 ? b * s.dirs + d : d * s.b + b) * s.h, s.h,
                  &v[static_cast<size_t>((d * s.b + b) * s.h)]);
  return v;
}

Result<Tensor> write_state(const std::vector<float>& v, const RnnShape& s) {
  GBX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate_uninitialized(
                                     DType::F32, s.layout1 ? Dims{s.b, s.dirs, s.h} : Dims{s.dirs, s.b, s.h}));
  for (int d = 0; d < s.dirs; ++d)
    for (int64_t b = 0; b < s.b; ++b)
      std::copy_n(&v[static_cast<size_t>((d * s.b + b) * s.h)], s.h,
                  t.data<float>() + (s.layout1 ? b * s.dirs + d : d * s.b + b) * s.h);
  return t;
}

Status rnn_impl(KernelContext& ctx) {
  const Cell cell = cell_of(ctx.op().op_type);
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const Tensor& R = ctx.input(2);
  RnnShape s;
  const std::string direction = ctx.attr_string("direction", "forward");
  if (std::string why = shape_refusal(cell, direction, ctx.attr_int("layout", 0), ctx.attr_int("hidden_size", -1),
                                      X.dims(), W.dims(), R.dims(), &s);
      !why.empty())
    return outside_supports(ctx, why);
  const int64_t H = s.h, G = s.g, GH = G * H, I = s.in;
  std::vector<int64_t> lens(static_cast<size_t>(s.b), s.s);
  if (ctx.has_input(4)) {
    const Tensor& L = ctx.input(4);
    for (int64_t b = 0; b < s.b; ++b) {
      const int64_t l = L.data<int32_t>()[b];
      if (l < 0 || l > s.s)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "sequence length ", l, " is outside [0, ", s.s, "]");
      lens[static_cast<size_t>(b)] = l;
    }
  }
  const bool lbr = cell == Cell::Gru && ctx.attr_int("linear_before_reset", 0) != 0;
  const Biases biases = read_biases(ctx, cell, s, lbr);

  // The input projection of every step at once: XW[d] = X W_d^T + biases, (S B) x (G H).
  const auto w_packed = gemm::pack_weights(W, 0, s.dirs, GH * I, 1, I, I, GH, ctx.input_is_constant(1));
  std::vector<float> xw(static_cast<size_t>(s.dirs * s.s * s.b * GH));
  for (int d = 0; d < s.dirs; ++d) {
    gemm::Problem p;
    p.a = X.data<float>();
    p.a_rs = I;
    p.bp = w_packed->batch(d);
    p.y = &xw[static_cast<size_t>(d * s.s * s.b * GH)];
    p.ldy = GH;
    p.m = s.s * s.b;
    p.n = GH;
    p.k = I;
    p.c = &biases.x[static_cast<size_t>(d * GH)];
    p.c_cs = 1;
    gemm::multiply(p);
  }
  // R^T per direction (a GRU without linear_before_reset: its z, r part and its h part).
  const bool split_r = cell == Cell::Gru && !lbr;
  const bool r_const = ctx.input_is_constant(2);
  const auto r_packed = gemm::pack_weights(R, 0, s.dirs, GH * H, 1, H, H, split_r ? 2 * H : GH, r_const);
  const auto rh_packed = split_r ? gemm::pack_weights(R, 2 * H * H, s.dirs, GH * H, 1, H, H, H, r_const) : nullptr;

  std::vector<float> h = read_state(ctx, 5, s);
  std::vector<float> c = cell == Cell::Lstm ? read_state(ctx, 6, s) : std::vector<float>{};
  Tensor y;
  if (ctx.wants_output(0)) {
    const Dims yd = s.layout1 ? Dims{s.b, s.s, s.dirs, H} : Dims{s.s, s.dirs, s.b, H};
    const bool all_full = std::all_of(lens.begin(), lens.end(), [&](int64_t l) { return l == s.s; });
    GBX_ASSIGN_OR_RETURN(y,
                         all_full ? Tensor::allocate_uninitialized(DType::F32, yd) : Tensor::allocate(DType::F32, yd));
  }
  const float* peep = cell == Cell::Lstm && ctx.has_input(7) ? ctx.input(7).data<float>() : nullptr;
  std::vector<Direction> dirs;
  for (int d = 0; d < s.dirs; ++d) {
    Direction dir{};
    dir.cell = cell;
    dir.s = &s;
    dir.d = d;
    dir.reverse = s.reverse_only || d == 1;
    dir.input_forget = ctx.attr_int("input_forget", 0) != 0;
    dir.has_clip = ctx.has_attr("clip");
    dir.clip = ctx.attr_float("clip", 0.f);
    dir.xw = &xw[static_cast<size_t>(d * s.s * s.b * GH)];
    dir.hbias = lbr ? &biases.h[static_cast<size_t>(d * GH)] : nullptr;
    dir.peep = peep ? peep + d * 3 * H : nullptr;
    dir.r = r_packed->batch(d);
    dir.r_h = rh_packed ? rh_packed->batch(d) : nullptr;
    dir.lens = &lens;
    dir.h = &h[static_cast<size_t>(d * s.b * H)];
    dir.c = c.empty() ? nullptr : &c[static_cast<size_t>(d * s.b * H)];
    dir.y = y.defined() ? y.data<float>() : nullptr;
    dirs.push_back(dir);
  }
  // Two directions on two threads: each recurrence is serial, and together they fill two cores.
  Status st[2];
  const bool two_threads = s.dirs == 2 && !omp_in_parallel() && omp_get_max_threads() > 1;
  if (two_threads) {
#pragma omp parallel for num_threads(2) schedule(static, 1)
    for (int d = 0; d < 2; ++d) st[d] = run_direction(dirs[static_cast<size_t>(d)]);
  } else {
    for (int d = 0; d < s.dirs; ++d) st[d] = run_direction(dirs[static_cast<size_t>(d)]);
  }
  for (int d = 0; d < s.dirs; ++d) GBX_RETURN_IF_ERROR(st[d]);

  if (ctx.wants_output(0)) ctx.set_output(0, std::move(y));
  if (ctx.wants_output(1)) {
    GBX_ASSIGN_OR_RETURN(Tensor t, write_state(h, s));
    ctx.set_output(1, std::move(t));
  }
  if (cell == Cell::Lstm && ctx.wants_output(2)) {
    GBX_ASSIGN_OR_RETURN(Tensor t, write_state(c, s));
    ctx.set_output(2, std::move(t));
  }
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "RNN", 7, 18, kEngineSimd, {DType::F32}, rnn_impl});
GBX_REGISTER_KERNEL({"", "GRU", 7, 18, kEngineSimd, {DType::F32}, rnn_impl});
GBX_REGISTER_KERNEL({"", "LSTM", 7, 18, kEngineSimd, {DType::F32}, rnn_impl});
// sequence_lens is int32 (the ONNX type constraint); Y_h and the states are float32.
GBX_KERNEL_SUPPORT(rnn_impl, {.inputs = {{DType::F32},
                                         {DType::F32},
                                         {DType::F32},
                                         {DType::F32},
                                         {DType::I32},
                                         {DType::F32},
                                         {DType::F32},
                                         {DType::F32}},
                              .supports = rnn_supports});

}  // namespace

}  // namespace gearbox::simd

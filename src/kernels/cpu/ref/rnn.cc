// RNN, GRU and LSTM (reference), opsets 7-17: forward/reverse/bidirectional, optional bias,
// sequence_lens, initial states and peepholes, GRU linear_before_reset, LSTM input_forget,
// clip, custom activations with alpha/beta, and layout 0/1 (opset 14).
//
// All three share one driver: per direction, per time step, per batch row, compute the
// gates from x_t and h_{t-1} (naive dot products in double). Rows past their sequence
// length produce zeros in Y and keep their last state; the reverse direction walks each
// row from its own last valid step.
#include <cmath>

#include "base/run_options.h"
#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

enum class Cell { Rnn, Gru, Lstm };

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
  double operator()(double x) const {
    if (name == "sigmoid") return 1 / (1 + std::exp(-x));
    if (name == "tanh") return std::tanh(x);
    if (name == "relu") return x > 0 ? x : 0;
    if (name == "affine") return alpha * x + beta;
    if (name == "leakyrelu") return x >= 0 ? x : alpha * x;
    if (name == "thresholdedrelu") return x > alpha ? x : 0;
    if (name == "scaledtanh") return alpha * std::tanh(beta * x);
    if (name == "hardsigmoid") return std::max(0.0, std::min(1.0, alpha * x + beta));
    if (name == "elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
    if (name == "softsign") return x / (1 + std::fabs(x));
    if (name == "softplus") return std::log1p(std::exp(x));
    return x;
  }
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<std::vector<Act>> read_acts(const KernelContext& ctx, Cell cell, int dirs) {
  std::vector<std::string> names = ctx.attr_strings("activations");
  const size_t per_dir = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3;
  if (names.empty()) {
    for (int d = 0; d < dirs; ++d) {
      if (cell == Cell::Rnn) names.push_back("Tanh");
      else if (cell == Cell::Gru) names.insert(names.end(), {"Sigmoid", "Tanh"});
      else names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
    }
  }
  if (names.size() == per_dir && dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per_dir * static_cast<size_t>(dirs))
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "activations has ", names.size(), " entries, expected ",
                     per_dir * static_cast<size_t>(dirs));
  std::vector<float> alphas = ctx.attr_floats("activation_alpha"), betas = ctx.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Act> acts;
  static const char* kKnown[] = {"sigmoid",    "tanh",        "relu", "affine",   "leakyrelu", "thresholdedrelu",
                                 "scaledtanh", "hardsigmoid", "elu",  "softsign", "softplus"};
  for (const auto& n : names) {
    Act a;
    a.name = lower(n);
    bool known = false;
    for (const char* k : kKnown) known |= a.name == k;
    if (!known) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "activation '", n, "' is not supported");
    const bool uses_alpha = a.name == "affine" || a.name == "leakyrelu" || a.name == "thresholdedrelu" ||
                            a.name == "scaledtanh" || a.name == "hardsigmoid" || a.name == "elu";
    const bool uses_beta = a.name == "affine" || a.name == "scaledtanh" || a.name == "hardsigmoid";
    double da = a.name == "leakyrelu" ? 0.01 : a.name == "hardsigmoid" ? 0.2 : 1.0;
    double db = a.name == "hardsigmoid" ? 0.5 : 0.0;
    a.alpha = uses_alpha && ai < alphas.size() ? alphas[ai++] : da;
    a.beta = uses_beta && bi < betas.size() ? betas[bi++] : db;
    acts.push_back(a);
  }
  return acts;
}

Status rnn_common(KernelContext& ctx, Cell cell) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(2));
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const Tensor& R = ctx.input(2);
  if (!is_float(X.dtype())) return ctx.unsupported_dtype(X.dtype());
  const int64_t G = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  const int64_t layout = ctx.attr_int("layout", 0);
  const std::string direction = ctx.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "direction '", direction, "' is unknown");
  const int dirs = direction == "bidirectional" ? 2 : 1;
  if (X.rank() != 3 || W.rank() != 3 || R.rank() != 3)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X, W and R must be 3-D; got ", describe(X), ", ", describe(W), ", ",
                     describe(R));
  const int64_t S = layout ? X.dim(1) : X.dim(0), B = layout ? X.dim(0) : X.dim(1), I = X.dim(2);
  const int64_t Hs = W.dim(1) / G;
  if (ctx.has_attr("hidden_size") && ctx.attr_int("hidden_size", 0) != Hs)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "hidden_size ", ctx.attr_int("hidden_size", 0), " does not match W ",
                     describe(W));
  if (W.dims() != Dims{dirs, G * Hs, I} || R.dims() != Dims{dirs, G * Hs, Hs})
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "W ", describe(W), " / R ", describe(R), " do not fit ", dirs,
                     " direction(s), ", G, " gates, input size ", I);
  auto opt = [&](size_t i, Dims want, const char* what) -> Result<std::vector<double>> {
    if (!ctx.has_input(i)) return std::vector<double>{};
    GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
    if (ctx.input(i).dims() != want)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, what, " must be ", to_string(want), ", got ", describe(ctx.input(i)));
    return read_doubles(ctx.input(i));
  };
  GBX_ASSIGN_OR_RETURN(std::vector<double> bias, opt(3, {dirs, 2 * G * Hs}, "B"));
  std::vector<int64_t> lens(static_cast<size_t>(B), S);
  if (ctx.has_input(4)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(4));
    GBX_ASSIGN_OR_RETURN(lens, read_ints(ctx, ctx.input(4)));
    if (static_cast<int64_t>(lens.size()) != B)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "sequence_lens has ", lens.size(), " values for batch ", B);
    for (int64_t l : lens)
      if (l < 0 || l > S)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "sequence length ", l, " is outside [0, ", S, "]");
  }
  const Dims state_dims = layout ? Dims{B, dirs, Hs} : Dims{dirs, B, Hs};
  GBX_ASSIGN_OR_RETURN(std::vector<double> h0, opt(5, state_dims, "initial_h"));
  std::vector<double> c0, peep;
  if (cell == Cell::Lstm) {
    GBX_ASSIGN_OR_RETURN(c0, opt(6, state_dims, "initial_c"));
    GBX_ASSIGN_OR_RETURN(peep, opt(7, {dirs, 3 * Hs}, "P"));
  }
  GBX_ASSIGN_OR_RETURN(std::vector<Act> acts, read_acts(ctx, cell, dirs));
  const bool has_clip = ctx.has_attr("clip");
  const double clip = ctx.attr_float("clip", 0);
  const bool lbr = ctx.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = ctx.attr_int("input_forget", 0) != 0;

  const std::vector<double> x = read_doubles(X), w = read_doubles(W), r = read_doubles(R);
  auto xat = [&](int64_t t, int64_t b) { return &x[static_cast<size_t>((layout ? b * S + t : t * B + b) * I)]; };
  auto sidx = [&](int d, int64_t b) { return static_cast<size_t>((layout ? b * dirs + d : d * B + b) * Hs); };
  // Y in layout-0 order [S, dirs, B, Hs] first; transposed for layout 1 at the end.
  std::vector<double> y(static_cast<size_t>(S * dirs * B * Hs), 0.0);
  std::vector<double> yh(static_cast<size_t>(dirs * B * Hs)), yc(yh.size());
  for (int d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const double* Wd = &w[static_cast<size_t>(d * G * Hs * I)];
    const double* Rd = &r[static_cast<size_t>(d * G * Hs * Hs)];
    const size_t na = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3;
    const Act &f = acts[d * na], &g = acts[d * na + (na > 1 ? 1 : 0)], &h = acts[d * na + (na > 2 ? 2 : 0)];
    for (int64_t b = 0; b < B; ++b) {
      // Per (direction, batch row): a long sequence stops at its run's deadline (serial code).
      GBX_RETURN_IF_ERROR(check_run_stop());
      std::vector<double> H(static_cast<size_t>(Hs), 0.0), C(static_cast<size_t>(Hs), 0.0);
      if (!h0.empty()) std::copy_n(&h0[sidx(d, b)], Hs, H.begin());
      if (!c0.empty()) std::copy_n(&c0[sidx(d, b)], Hs, C.begin());
      const int64_t L = lens[static_cast<size_t>(b)];
      std::vector<double> xw(static_cast<size_t>(G * Hs)), hr(static_cast<size_t>(G * Hs));
      for (int64_t s = 0; s < L; ++s) {
        const int64_t t = reverse ? L - 1 - s : s;
        const double* xt = xat(t, b);
        // xw = x_t W^T + Wb; hr = h_{t-1} R^T + Rb, per gate row.
        for (int64_t k = 0; k < G * Hs; ++k) {
          double a = bias.empty() ? 0 : bias[static_cast<size_t>(d * 2 * G * Hs + k)];
          for (int64_t i = 0; i < I; ++i) a += xt[i] * Wd[k * I + i];
          double c = bias.empty() ? 0 : bias[static_cast<size_t>(d * 2 * G * Hs + G * Hs + k)];
          for (int64_t i = 0; i < Hs; ++i) c += H[static_cast<size_t>(i)] * Rd[k * Hs + i];
          xw[static_cast<size_t>(k)] = a;
          hr[static_cast<size_t>(k)] = c;
        }
        auto cl = [&](double v) { return has_clip ? std::min(std::max(v, -clip), clip) : v; };
        std::vector<double> Hn(static_cast<size_t>(Hs));
        if (cell == Cell::Rnn) {
          for (int64_t j = 0; j < Hs; ++j) Hn[size_t(j)] = f(cl(xw[size_t(j)] + hr[size_t(j)]));
        } else if (cell == Cell::Gru) {
          for (int64_t j = 0; j < Hs; ++j) {
            const size_t zj = size_t(j), rj = size_t(Hs + j), hj = size_t(2 * Hs + j);
            double z = f(cl(xw[zj] + hr[zj]));
            double rg = f(cl(xw[rj] + hr[rj]));
            // linear_before_reset: r . (h_{t-1} R_h^T + Rb_h); otherwise only Rb_h here and
            // (r . h_{t-1}) R_h^T is added below, once every r is known.
            double pre = lbr ? xw[hj] + rg * hr[hj]
                             : xw[hj] + (bias.empty() ? 0 : bias[static_cast<size_t>(d * 2 * G * Hs + G * Hs) + hj]);
            Hn[zj] = pre;  // finished after the reset-gated product below
            xw[zj] = z;    // keep z for the update
            hr[rj] = rg;
          }
          if (!lbr) {
            // Needs every r_i before the product: (r . h_{t-1}) R_h^T.
            for (int64_t j = 0; j < Hs; ++j) {
              double acc = 0;
              for (int64_t i = 0; i < Hs; ++i) acc += hr[size_t(Hs + i)] * H[size_t(i)] * Rd[(2 * Hs + j) * Hs + i];
              Hn[size_t(j)] += acc;
            }
          }
          for (int64_t j = 0; j < Hs; ++j) {
            double hh = g(cl(Hn[size_t(j)]));
            double z = xw[size_t(j)];
            Hn[size_t(j)] = (1 - z) * hh + z * H[size_t(j)];
          }
        } else {  // LSTM gates i, o, f, c; peepholes P = [Pi, Po, Pf]
          for (int64_t j = 0; j < Hs; ++j) {
            const size_t ij = size_t(j), oj = size_t(Hs + j), fj = size_t(2 * Hs + j), cj = size_t(3 * Hs + j);
            const double pi = peep.empty() ? 0 : peep[size_t(d * 3 * Hs + j)];
            const double po = peep.empty() ? 0 : peep[size_t(d * 3 * Hs + Hs + j)];
            const double pf = peep.empty() ? 0 : peep[size_t(d * 3 * Hs + 2 * Hs + j)];
            const double cp = C[size_t(j)];
            double ig = f(cl(xw[ij] + hr[ij] + pi * cp));
            double fg = input_forget ? 1 - ig : f(cl(xw[fj] + hr[fj] + pf * cp));
            double cc = g(cl(xw[cj] + hr[cj]));
            double cn = fg * cp + ig * cc;
            double og = f(cl(xw[oj] + hr[oj] + po * cn));
            C[size_t(j)] = cn;
            Hn[size_t(j)] = og * h(cn);
          }
        }
        H = Hn;
        std::copy(H.begin(), H.end(), &y[static_cast<size_t>(((t * dirs + d) * B + b) * Hs)]);
      }
      std::copy(H.begin(), H.end(), &yh[static_cast<size_t>((d * B + b) * Hs)]);
      std::copy(C.begin(), C.end(), &yc[static_cast<size_t>((d * B + b) * Hs)]);
    }
  }
  const DType dt = X.dtype();
  if (ctx.wants_output(0)) {
    std::vector<double> yo = y;
    Dims yd{S, dirs, B, Hs};
    if (layout) {  // [B, S, dirs, Hs]
      yd = {B, S, dirs, Hs};
      for (int64_t t = 0; t < S; ++t)
        for (int d = 0; d < dirs; ++d)
          for (int64_t b = 0; b < B; ++b)
            std::copy_n(&y[size_t(((t * dirs + d) * B + b) * Hs)], Hs, &yo[size_t(((b * S + t) * dirs + d) * Hs)]);
    }
    GBX_ASSIGN_OR_RETURN(Tensor yt, make_float_tensor(dt, yd, yo));
    ctx.set_output(0, std::move(yt));
  }
  auto state_out = [&](const std::vector<double>& v) -> Result<Tensor> {
    std::vector<double> o = v;
    if (layout)
      for (int d = 0; d < dirs; ++d)
        for (int64_t b = 0; b < B; ++b) std::copy_n(&v[size_t((d * B + b) * Hs)], Hs, &o[sidx(d, b)]);
    return make_float_tensor(dt, state_dims, o);
  };
  if (ctx.wants_output(1)) {
    GBX_ASSIGN_OR_RETURN(Tensor t, state_out(yh));
    ctx.set_output(1, std::move(t));
  }
  if (cell == Cell::Lstm && ctx.wants_output(2)) {
    GBX_ASSIGN_OR_RETURN(Tensor t, state_out(yc));
    ctx.set_output(2, std::move(t));
  }
  return Status::OK();
}

Status rnn(KernelContext& ctx) { return rnn_common(ctx, Cell::Rnn); }
Status gru(KernelContext& ctx) { return rnn_common(ctx, Cell::Gru); }
Status lstm(KernelContext& ctx) { return rnn_common(ctx, Cell::Lstm); }

GBX_REGISTER_KERNEL({"", "RNN", 7, 18, kEngineRef, float_dtypes(), rnn});
GBX_REGISTER_KERNEL({"", "GRU", 7, 18, kEngineRef, float_dtypes(), gru});
GBX_REGISTER_KERNEL({"", "LSTM", 7, 18, kEngineRef, float_dtypes(), lstm});

}  // namespace
}  // namespace gearbox::ref

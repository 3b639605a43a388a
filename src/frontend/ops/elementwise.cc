// Element-wise arithmetic (numpy broadcasting): Add, Sub, Mul, Div, Neg, Exp, Log, Pow.
#include "frontend/ops/internal.h"

namespace gbx::nn {

Tensor add(const Tensor& a, const Tensor& b) { return apply1({"Add"}, {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return apply1({"Sub"}, {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return apply1({"Mul"}, {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return apply1({"Div"}, {a, b}); }
Tensor neg(const Tensor& x) { return apply1({"Neg"}, {x}); }
Tensor exp(const Tensor& x) { return apply1({"Exp"}, {x}); }
Tensor log(const Tensor& x) { return apply1({"Log"}, {x}); }
Tensor pow(const Tensor& x, double exponent) { return apply1({"Pow"}, {x, scalar_like(x, exponent)}); }

Tensor Tensor::operator-() const { return neg(*this); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(b, a), b); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }

}  // namespace gbx::nn

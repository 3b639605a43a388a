// nn::Tensor: construction, data access and the autodiff state's accessors (the ops are in
// ops/, backward() in autodiff/tape.cc).
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "base/npy.h"
#include "frontend/graph/trace_hook.h"
#include "frontend/random.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Int64:
      return "int64";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float16:
      return "float16";
  }
  return "?";
}

gearbox::DType to_internal(DType t) {
  switch (t) {
    case DType::Float32:
      return gearbox::DType::F32;
    case DType::Float64:
      return gearbox::DType::F64;
    case DType::Int64:
      return gearbox::DType::I64;
    case DType::BFloat16:
      return gearbox::DType::BF16;
    case DType::Float16:
      return gearbox::DType::F16;
  }
  return gearbox::DType::Undefined;
}

DType to_public(gearbox::DType t, const char* what) {
  switch (t) {
    case gearbox::DType::F32:
      return DType::Float32;
    case gearbox::DType::F64:
      return DType::Float64;
    case gearbox::DType::I64:
      return DType::Int64;
    case gearbox::DType::BF16:
      return DType::BFloat16;
    case gearbox::DType::F16:
      return DType::Float16;
    default:
      throw_status(gearbox::make_error(gearbox::ErrorCode::DTYPE_UNSUPPORTED, what, ": dtype ", gearbox::dtype_name(t),
                                       " is not one of nn's float32, float64, int64, bfloat16, float16"));
  }
}

void throw_status(const gearbox::Status& st) {
  throw Error(std::string(gearbox::error_info(st.code()).name), st.to_string());
}

void throw_if_error(const gearbox::Status& st) {
  if (!st.ok()) throw_status(st);
}

const gearbox::Tensor& value_of(const Tensor& t, const char* what) {
  if (!t.defined())
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, what, ": the tensor is undefined"));
  return t.impl()->value;
}

namespace {

template <typename T>
Tensor from_values(const std::vector<T>& values, std::vector<int64_t> shape) {
  if (shape.empty() && values.size() != 1) shape = {static_cast<int64_t>(values.size())};
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "Tensor::from_vector: negative dim ", d));
    n *= d;
  }
  if (n != static_cast<int64_t>(values.size()))
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "Tensor::from_vector: ", values.size(),
                                     " values do not fill shape ", gearbox::to_string(shape), " (", n, " elements)"));
  gearbox::Result<gearbox::Tensor> t = gearbox::Tensor::allocate_uninitialized(gearbox::dtype_of<T>(), shape);
  throw_if_error(t.status());
  std::copy(values.begin(), values.end(), t.value().template data<T>());
  return wrap(std::move(t.value()));
}

gearbox::Tensor filled(const std::vector<int64_t>& shape, DType dtype, const std::function<double()>& next) {
  gearbox::Result<gearbox::Tensor> r = gearbox::Tensor::allocate(to_internal(dtype), shape);
  throw_if_error(r.status());
  gearbox::Tensor t = std::move(r.value());
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = next();
    switch (dtype) {
      case DType::Float32:
        t.data<float>()[i] = static_cast<float>(v);
        break;
      case DType::Float64:
        t.data<double>()[i] = v;
        break;
      case DType::Int64:
        t.data<int64_t>()[i] = static_cast<int64_t>(v);
        break;
      case DType::BFloat16:
        t.data<gearbox::BFloat16>()[i] = gearbox::BFloat16(static_cast<float>(v));
        break;
      case DType::Float16:
        t.data<gearbox::Half>()[i] = gearbox::Half(static_cast<float>(v));
        break;
    }
  }
  return t;
}

// A host read of a tensor, which a trace refuses when the tensor depends on the traced inputs
// (frontend/graph/trace_hook.h).
const gearbox::Tensor& host_value(const Tensor& t, const char* what) {
  const gearbox::Tensor& v = value_of(t, what);
  check_host_read(v, what);
  return v;
}

// Random draws are host-side: a trace would freeze one draw into the graph.
void refuse_random_while_tracing(const char* what) {
  refuse_while_tracing(what,
                       "random draws happen on the host, so the graph would repeat this one draw on every run; "
                       "create the tensor outside the traced function and pass it as an input");
}

template <typename T>
std::vector<T> convert(const gearbox::Tensor& v) {
  std::vector<T> out(static_cast<size_t>(v.numel()));
  for (int64_t i = 0; i < v.numel(); ++i) out[i] = static_cast<T>(v.at_double(i));
  return out;
}

}  // namespace

Tensor Tensor::from_vector(const std::vector<float>& values, std::vector<int64_t> shape) {
  return from_values(values, std::move(shape));
}
Tensor Tensor::from_vector(const std::vector<double>& values, std::vector<int64_t> shape) {
  return from_values(values, std::move(shape));
}
Tensor Tensor::from_vector(const std::vector<int64_t>& values, std::vector<int64_t> shape) {
  return from_values(values, std::move(shape));
}
Tensor Tensor::scalar(double v, DType dtype) {
  return wrap(filled({}, dtype, [v] { return v; }));
}
Tensor Tensor::zeros(std::vector<int64_t> shape, DType dtype) { return full(std::move(shape), 0.0, dtype); }
Tensor Tensor::full(std::vector<int64_t> shape, double v, DType dtype) {
  return wrap(filled(shape, dtype, [v] { return v; }));
}
Tensor Tensor::uniform(std::vector<int64_t> shape, double low, double high, DType dtype) {
  refuse_random_while_tracing("Tensor::uniform");
  std::uniform_real_distribution<double> dist(low, high);
  return wrap(filled(shape, dtype, [&] { return dist(generator()); }));
}
Tensor Tensor::randn(std::vector<int64_t> shape, DType dtype) {
  refuse_random_while_tracing("Tensor::randn");
  std::normal_distribution<double> dist(0.0, 1.0);
  return wrap(filled(shape, dtype, [&] { return dist(generator()); }));
}

DType Tensor::dtype() const { return to_public(value_of(*this, "dtype()").dtype(), "dtype()"); }
const std::vector<int64_t>& Tensor::shape() const { return value_of(*this, "shape()").dims(); }
int64_t Tensor::dim(size_t i) const { return shape().at(i); }
size_t Tensor::rank() const { return shape().size(); }
int64_t Tensor::numel() const { return value_of(*this, "numel()").numel(); }
std::string Tensor::describe() const { return defined() ? gearbox::describe(impl_->value) : "undefined"; }

std::vector<float> Tensor::to_float_vector() const { return convert<float>(host_value(*this, "to_float_vector()")); }
std::vector<double> Tensor::to_double_vector() const {
  return convert<double>(host_value(*this, "to_double_vector()"));
}
std::vector<int64_t> Tensor::to_int64_vector() const {
  return convert<int64_t>(host_value(*this, "to_int64_vector()"));
}

double Tensor::item() const {
  const gearbox::Tensor& v = host_value(*this, "item()");
  if (v.numel() != 1)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "item() on ", gearbox::describe(v),
                                     ": only a one-element tensor has an item"));
  return v.at_double(0);
}

const void* Tensor::data() const { return host_value(*this, "data()").raw(); }
void* Tensor::mutable_data() {
  host_value(*this, "mutable_data()");
  return impl_->value.mutable_raw();
}

bool Tensor::requires_grad() const { return defined() && impl_->requires_grad; }
Tensor& Tensor::set_requires_grad(bool on) {
  const gearbox::Tensor& v = value_of(*this, "set_requires_grad()");
  if (impl_->grad_fn)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "set_requires_grad() on ",
                                     gearbox::describe(v),
                                     ", which an op produced: only leaves take it (detach() first)"));
  if (on && !gearbox::is_float(v.dtype()))
    throw_status(gearbox::make_error(gearbox::ErrorCode::DTYPE_UNSUPPORTED, "set_requires_grad() on ",
                                     gearbox::describe(v), ": only float tensors have gradients"));
  impl_->requires_grad = on;
  return *this;
}
bool Tensor::is_leaf() const { return !defined() || !impl_->grad_fn; }
Tensor Tensor::grad() const {
  value_of(*this, "grad()");
  return impl_->grad.defined() ? wrap(impl_->grad) : Tensor();
}
void Tensor::zero_grad() {
  if (defined()) impl_->grad = gearbox::Tensor();
}
Tensor Tensor::detach() const { return wrap(value_of(*this, "detach()")); }
Tensor Tensor::clone() const {
  const gearbox::Tensor& v = value_of(*this, "clone()");
  gearbox::Tensor copy = v.clone();
  // A copy of a traced value is that value to the tracer, not a new constant.
  if (TraceHook* hook = active_trace_hook()) hook->copied(v, copy);
  return wrap(std::move(copy));
}

Tensor load_npy(const std::string& path) {
  gearbox::Result<gearbox::Tensor> t = gearbox::read_npy(path);
  throw_if_error(t.status());
  to_public(t.value().dtype(), path.c_str());  // DTYPE_UNSUPPORTED for what nn has no dtype for
  return wrap(std::move(t.value()));
}

void save_npy(const std::string& path, const Tensor& t) {
  throw_if_error(gearbox::write_npy(path, host_value(t, "save_npy()")));
}

}  // namespace gbx::nn

// gearbox C++ API: RAII types over the C API (gearbox.h). Header-only, so it adds nothing
// to the library's ABI. Like the C API it throws no exceptions: fallible calls return a
// gbx::Status or a gbx::Expected<T> holding the value or the error.
//
//   auto ctx = gbx::Context::create();
//   auto model = gbx::Model::load_file(*ctx, "model.onnx");
//   if (!model) { std::cerr << model.status().message() << "\n"; return 1; }
//   auto x = gbx::Tensor::from_data<float>({2, 3}, values);
//   auto out = model->run({{"x", &*x}});
#ifndef GEARBOX_GEARBOX_HPP_
#define GEARBOX_GEARBOX_HPP_

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gearbox/gearbox.h"

namespace gbx {

class Status {
 public:
  Status() = default;
  Status(gbx_status code, std::string message) : code_(code), message_(std::move(message)) {}
  // The status of the C call that just returned `code` (with this thread's last message).
  static Status from(gbx_status code) { return code == GBX_OK ? Status() : Status(code, gbx_last_error_message()); }
  bool ok() const { return code_ == GBX_OK; }
  explicit operator bool() const { return ok(); }
  gbx_status code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  gbx_status code_ = GBX_OK;
  std::string message_;
};

template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  Status status() const { return ok() ? Status() : std::get<1>(v_); }
  T& value() { return std::get<0>(v_); }
  T& operator*() { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
// A move-only owner of a C handle.
template <typename H, void (*Destroy)(H)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(H h) : h_(h) {}
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      if (h_) Destroy(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (h_) Destroy(h_);
  }
  H get() const { return h_; }

 private:
  H h_ = nullptr;
};

template <typename T>
constexpr gbx_dtype dtype_of();
template <>
constexpr gbx_dtype dtype_of<float>() {
  return GBX_DTYPE_FLOAT32;
}
template <>
constexpr gbx_dtype dtype_of<double>() {
  return GBX_DTYPE_FLOAT64;
}
template <>
constexpr gbx_dtype dtype_of<int8_t>() {
  return GBX_DTYPE_INT8;
}
template <>
constexpr gbx_dtype dtype_of<uint8_t>() {
  return GBX_DTYPE_UINT8;
}
template <>
constexpr gbx_dtype dtype_of<int32_t>() {
  return GBX_DTYPE_INT32;
}
template <>
constexpr gbx_dtype dtype_of<int64_t>() {
  return GBX_DTYPE_INT64;
}
}  // namespace detail

class Tensor {
 public:
  explicit Tensor(gbx_tensor h) : h_(h) {}
  static Expected<Tensor> zeros(gbx_dtype dtype, const std::vector<int64_t>& dims) {
    gbx_tensor t = nullptr;
    if (gbx_status s = gbx_tensor_create(dtype, dims.data(), dims.size(), &t)) return Status::from(s);
    return Tensor(t);
  }
  template <typename T>
  static Expected<Tensor> from_data(const std::vector<int64_t>& dims, const std::vector<T>& values) {
    gbx_tensor t = nullptr;
    if (gbx_status s = gbx_tensor_create_copy(detail::dtype_of<T>(), dims.data(), dims.size(), values.data(),
                                              values.size() * sizeof(T), &t))
      return Status::from(s);
    return Tensor(t);
  }
  gbx_dtype dtype() const {
    int32_t d = 0;
    gbx_tensor_dtype(h_.get(), &d);
    return static_cast<gbx_dtype>(d);
  }
  std::vector<int64_t> shape() const {
    size_t rank = 0;
    gbx_tensor_shape(h_.get(), nullptr, 0, &rank);
    std::vector<int64_t> dims(rank);
    gbx_tensor_shape(h_.get(), dims.data(), dims.size(), &rank);
    return dims;
  }
  size_t bytes() const {
    void* p = nullptr;
    size_t n = 0;
    gbx_tensor_data(h_.get(), &p, &n);
    return n;
  }
  // The elements; nullptr when T does not match dtype().
  template <typename T>
  T* data() {
    if (dtype() != detail::dtype_of<T>()) return nullptr;
    void* p = nullptr;
    gbx_tensor_data(h_.get(), &p, nullptr);
    return static_cast<T*>(p);
  }
  template <typename T>
  std::vector<T> to_vector() {
    T* p = data<T>();
    return p ? std::vector<T>(p, p + bytes() / sizeof(T)) : std::vector<T>();
  }
  gbx_tensor get() const { return h_.get(); }

 private:
  detail::Handle<gbx_tensor, gbx_tensor_destroy> h_;
};

struct IoDesc {
  std::string name;
  gbx_dtype dtype;
  int32_t rank;               // -1: unknown
  std::vector<int64_t> dims;  // -1: symbolic or unknown
  std::vector<std::string> dim_names;
};

class Context {
 public:
  // A context on this thread's current device (gbx_device_set).
  static Expected<Context> create() {
    gbx_context c = nullptr;
    if (gbx_status s = gbx_context_create(&c)) return Status::from(s);
    return Context(c);
  }
  gbx_context get() const { return h_.get(); }

 private:
  explicit Context(gbx_context h) : h_(h) {}
  detail::Handle<gbx_context, gbx_context_destroy> h_;
};

class Event {
 public:
  explicit Event(gbx_event h) : h_(h) {}
  Status wait() { return Status::from(gbx_event_wait(h_.get())); }
  bool done() const {
    int32_t d = 0;
    gbx_event_query(h_.get(), &d);
    return d != 0;
  }
  // Waits, then returns the outputs in the model's output order.
  Expected<std::vector<Tensor>> outputs() {
    if (Status s = wait(); !s.ok()) return s;
    size_t n = 0;
    if (gbx_status s = gbx_event_output_count(h_.get(), &n)) return Status::from(s);
    std::vector<Tensor> out;
    for (size_t i = 0; i < n; ++i) {
      gbx_tensor t = nullptr;
      if (gbx_status s = gbx_event_output(h_.get(), i, &t)) return Status::from(s);
      out.emplace_back(t);
    }
    return out;
  }

 private:
  detail::Handle<gbx_event, gbx_event_destroy> h_;
};

class Stream {
 public:
  static Expected<Stream> create(const Context& ctx) {
    gbx_stream s = nullptr;
    if (gbx_status st = gbx_stream_create(ctx.get(), &s)) return Status::from(st);
    return Stream(s);
  }
  Status synchronize() { return Status::from(gbx_stream_synchronize(h_.get())); }
  gbx_stream get() const { return h_.get(); }

 private:
  explicit Stream(gbx_stream h) : h_(h) {}
  detail::Handle<gbx_stream, gbx_stream_destroy> h_;
};

// A timeout and a terminate flag for runs (gbx_run_options): pass it to Model::run or
// run_async; terminate() from any thread stops every run given it with RUN_CANCELLED (4007), a
// run longer than the timeout stops with RUN_DEADLINE_EXCEEDED (4008), and the model stays
// ready for the next run.
class RunOptions {
 public:
  static Expected<RunOptions> create() {
    gbx_run_options o = nullptr;
    if (gbx_status s = gbx_run_options_create(&o)) return Status::from(s);
    return RunOptions(o);
  }
  // Seconds from each run's start (0: no limit).
  Status set_timeout(double seconds) { return Status::from(gbx_run_options_set_timeout(h_.get(), seconds)); }
  Status terminate() { return Status::from(gbx_run_options_set_terminate(h_.get(), 1)); }
  Status unset_terminate() { return Status::from(gbx_run_options_set_terminate(h_.get(), 0)); }
  gbx_run_options get() const { return h_.get(); }

 private:
  explicit RunOptions(gbx_run_options h) : h_(h) {}
  detail::Handle<gbx_run_options, gbx_run_options_destroy> h_;
};

using Feeds = std::vector<std::pair<std::string, const Tensor*>>;

class Model {
 public:
  static Expected<Model> load_file(const Context& ctx, const std::string& path) {
    gbx_model m = nullptr;
    if (gbx_status s = gbx_model_load_file(ctx.get(), path.c_str(), &m)) return Status::from(s);
    return Model(m);
  }
  static Expected<Model> load_memory(const Context& ctx, const void* data, size_t size) {
    gbx_model m = nullptr;
    if (gbx_status s = gbx_model_load_memory(ctx.get(), data, size, &m)) return Status::from(s);
    return Model(m);
  }
  std::vector<IoDesc> inputs() const { return describe(true); }
  std::vector<IoDesc> outputs() const { return describe(false); }

  Expected<std::vector<Tensor>> run(const Feeds& feeds) const { return run_with(feeds, nullptr); }
  Expected<std::vector<Tensor>> run(const Feeds& feeds, const RunOptions& options) const {
    return run_with(feeds, options.get());
  }
  Expected<Event> run_async(const Feeds& feeds, Stream& stream) const { return run_async_with(feeds, stream, nullptr); }
  Expected<Event> run_async(const Feeds& feeds, Stream& stream, const RunOptions& options) const {
    return run_async_with(feeds, stream, options.get());
  }

 private:
  explicit Model(gbx_model h) : h_(h) {}
  Expected<std::vector<Tensor>> run_with(const Feeds& feeds, gbx_run_options options) const {
    std::vector<const char*> names;
    std::vector<gbx_tensor> handles;
    split(feeds, &names, &handles);
    size_t n_out = 0;
    gbx_model_output_count(h_.get(), &n_out);
    std::vector<gbx_tensor> out(n_out, nullptr);
    if (gbx_status s = gbx_execute_with_options(h_.get(), names.data(), handles.data(), handles.size(), out.data(),
                                                out.size(), options))
      return Status::from(s);
    std::vector<Tensor> result;
    for (gbx_tensor t : out) result.emplace_back(t);
    return result;
  }
  Expected<Event> run_async_with(const Feeds& feeds, Stream& stream, gbx_run_options options) const {
    std::vector<const char*> names;
    std::vector<gbx_tensor> handles;
    split(feeds, &names, &handles);
    gbx_event e = nullptr;
    if (gbx_status s = gbx_execute_async_with_options(h_.get(), names.data(), handles.data(), handles.size(),
                                                      stream.get(), options, &e))
      return Status::from(s);
    return Event(e);
  }
  static void split(const Feeds& feeds, std::vector<const char*>* names, std::vector<gbx_tensor>* handles) {
    for (const auto& [name, t] : feeds) {
      names->push_back(name.c_str());
      handles->push_back(t ? t->get() : nullptr);
    }
  }
  std::vector<IoDesc> describe(bool inputs) const {
    size_t n = 0;
    (inputs ? gbx_model_input_count : gbx_model_output_count)(h_.get(), &n);
    std::vector<IoDesc> out;
    for (size_t i = 0; i < n; ++i) {
      gbx_io_desc d{};
      (inputs ? gbx_model_input : gbx_model_output)(h_.get(), i, &d);
      IoDesc io{d.name, static_cast<gbx_dtype>(d.dtype), d.rank, {}, {}};
      for (int32_t k = 0; k < d.rank; ++k) {
        io.dims.push_back(d.dims[k]);
        io.dim_names.emplace_back(d.dim_names[k]);
      }
      out.push_back(std::move(io));
    }
    return out;
  }
  detail::Handle<gbx_model, gbx_model_destroy> h_;
};

}  // namespace gbx

#endif  // GEARBOX_GEARBOX_HPP_

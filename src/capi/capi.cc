// The C API (include/gearbox/gearbox.h) over Session, Tensor and the device layer.
//
// Every entry point catches everything: a C caller cannot handle a C++ exception, so an
// escaping one becomes INTERNAL with its what() text. Failures set a thread-local last
// error that gbx_last_error_message() returns.
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device/device.h"
#include "device/stream.h"
#include "gearbox/gearbox.h"
#include "graph/onnx_importer.h"
#include "runtime/session.h"

using gearbox::ErrorCode;
using gearbox::Result;
using gearbox::Status;
using gearbox::Tensor;

// The API casts between gbx_dtype and gearbox::DType: their values must stay identical.
#define GBX_SAME_DTYPE(c, d) \
  static_assert(static_cast<int32_t>(c) == static_cast<int32_t>(gearbox::DType::d), #c " must equal DType::" #d)
GBX_SAME_DTYPE(GBX_DTYPE_UNDEFINED, Undefined);
GBX_SAME_DTYPE(GBX_DTYPE_FLOAT32, F32);
GBX_SAME_DTYPE(GBX_DTYPE_UINT8, U8);
GBX_SAME_DTYPE(GBX_DTYPE_INT8, I8);
GBX_SAME_DTYPE(GBX_DTYPE_UINT16, U16);
GBX_SAME_DTYPE(GBX_DTYPE_INT16, I16);
GBX_SAME_DTYPE(GBX_DTYPE_INT32, I32);
GBX_SAME_DTYPE(GBX_DTYPE_INT64, I64);
GBX_SAME_DTYPE(GBX_DTYPE_BOOL, Bool);
GBX_SAME_DTYPE(GBX_DTYPE_FLOAT16, F16);
GBX_SAME_DTYPE(GBX_DTYPE_FLOAT64, F64);
GBX_SAME_DTYPE(GBX_DTYPE_UINT32, U32);
GBX_SAME_DTYPE(GBX_DTYPE_UINT64, U64);
GBX_SAME_DTYPE(GBX_DTYPE_BFLOAT16, BF16);
#undef GBX_SAME_DTYPE

struct gbx_context_s {
  gearbox::device::Device* device = nullptr;
  std::string op_path;  // gbx_context_set_op_path: SessionOptions::op_path of its models
};

namespace {
gearbox::SessionOptions options_of(const gbx_context_s& ctx) {
  gearbox::SessionOptions o;
  o.op_path = ctx.op_path;
  return o;
}
}  // namespace

struct gbx_model_s {
  std::shared_ptr<const gearbox::Session> session;
  // Backing storage for the gbx_io_desc pointers.
  struct Io {
    std::string name;
    int32_t dtype = 0, rank = -1;
    std::vector<int64_t> dims;
    std::vector<std::string> dim_names;
    std::vector<const char*> dim_name_ptrs;
  };
  std::vector<Io> inputs, outputs;
};

struct gbx_tensor_s {
  Tensor tensor;
};

struct gbx_run_options_s {
  // Shared with the runs given these options, so destroying the handle leaves them their flag.
  gearbox::CancelToken terminate;
  std::atomic<double> timeout_s{0};  // 0: no limit; set and read from any thread
};

namespace {

thread_local std::string t_last_error;
thread_local gbx_status t_last_code = GBX_OK;
thread_local gearbox::device::DeviceKind t_kind = gearbox::device::DeviceKind::CPU;
thread_local int t_index = 0;

gbx_status fail(const Status& s) {
  t_last_error = s.to_string();
  t_last_code = static_cast<gbx_status>(s.code());
  return t_last_code;
}

gbx_status ok() { return GBX_OK; }

gbx_status invalid(const std::string& what) { return fail(Status(ErrorCode::API_INVALID_ARGUMENT, what)); }

// Runs body, turning an escaping exception into INTERNAL.
template <typename Fn>
gbx_status guarded(Fn&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(Status(ErrorCode::OUT_OF_MEMORY, "out of memory in the C API"));
  } catch (const std::exception& e) {
    return fail(Status(ErrorCode::INTERNAL, std::string("exception in the C API: ") + e.what()));
  } catch (...) {
    return fail(Status(ErrorCode::INTERNAL, "unknown exception in the C API"));
  }
}

gbx_model_s::Io describe_io(const gearbox::IoInfo& info) {
  gbx_model_s::Io io;
  io.name = info.name;
  io.dtype = static_cast<int32_t>(info.type.dtype);
  if (info.type.kind == gearbox::ValueType::Kind::Tensor && info.type.shape.ranked) {
    io.rank = static_cast<int32_t>(info.type.shape.rank());
    for (const auto& d : info.type.shape.dims) {
      io.dims.push_back(d.known() ? d.value : -1);
      io.dim_names.push_back(d.symbol);
    }
  }
  for (const auto& n : io.dim_names) io.dim_name_ptrs.push_back(n.c_str());
  return io;
}

gbx_status make_model(Result<std::unique_ptr<gearbox::Session>> session, gbx_model* out) {
  if (!session.ok()) return fail(session.status());
  auto m = std::make_unique<gbx_model_s>();
  m->session = std::move(session).value();
  for (const auto& i : m->session->inputs()) m->inputs.push_back(describe_io(i));
  for (const auto& o : m->session->outputs()) m->outputs.push_back(describe_io(o));
  // dim_name_ptrs point into strings that moved with the vector; rebuild them in place.
  for (auto* list : {&m->inputs, &m->outputs})
    for (auto& io : *list) {
      io.dim_name_ptrs.clear();
      for (const auto& n : io.dim_names) io.dim_name_ptrs.push_back(n.c_str());
    }
  *out = m.release();
  return ok();
}

Result<std::map<std::string, Tensor>> collect_inputs(const char* const* names, const gbx_tensor* inputs, size_t n) {
  std::map<std::string, Tensor> feeds;
  if (n > 0 && (names == nullptr || inputs == nullptr))
    return Status(ErrorCode::API_INVALID_ARGUMENT, "input_names and inputs must not be NULL when n_inputs > 0");
  for (size_t i = 0; i < n; ++i) {
    if (names[i] == nullptr || inputs[i] == nullptr)
      return gearbox::make_error(ErrorCode::API_INVALID_ARGUMENT, "input ", i, " has a NULL name or tensor");
    feeds[names[i]] = inputs[i]->tensor;
  }
  return feeds;
}

// What one execution given `options` (may be null) checks: the shared flag, and a deadline
// counted from now.
gearbox::RunOptions run_options_of(gbx_run_options options) {
  gearbox::RunOptions o;
  if (options == nullptr) return o;
  o.terminate = options->terminate;
  const double timeout = options->timeout_s.load();
  if (timeout > 0) o.deadline = gearbox::RunOptions::after(timeout);
  return o;
}

gbx_status fill_desc(const std::vector<gbx_model_s::Io>& list, size_t index, gbx_io_desc* out, const char* what) {
  if (out == nullptr) return invalid("out is NULL");
  if (index >= list.size())
    return invalid(std::string(what) + " index " + std::to_string(index) + " is out of range (the model has " +
                   std::to_string(list.size()) + ")");
  const auto& io = list[index];
  out->name = io.name.c_str();
  out->dtype = io.dtype;
  out->rank = io.rank;
  out->dims = io.dims.data();
  out->dim_names = io.dim_name_ptrs.data();
  return ok();
}

}  // namespace

// ---- streams and events: device::Stream runs the jobs; the event keeps the outputs -------

struct gbx_stream_s {
  gearbox::device::Stream stream;
};

struct gbx_event_s {
  gearbox::device::Event event;
  // Written by the job before the event reports done; read only after done() (the event's
  // mutex orders the two).
  std::shared_ptr<std::vector<Tensor>> outputs;
};

extern "C" {

const char* gbx_version(void) { return GEARBOX_VERSION_STRING; }  // the CMake project version
int32_t gbx_api_version(void) { return GBX_API_VERSION; }
const char* gbx_last_error_message(void) { return t_last_error.c_str(); }
gbx_status gbx_last_error_code(void) { return t_last_code; }

gbx_status gbx_device_count(gbx_device_kind kind, int32_t* count) {
  return guarded([&] {
    if (count == nullptr) return invalid("count is NULL");
    int32_t n = 0;
    for (auto* d : gearbox::device::devices())
      if (static_cast<int>(d->kind()) == static_cast<int>(kind)) ++n;
    *count = n;
    return ok();
  });
}

gbx_status gbx_device_set(gbx_device_kind kind, int32_t index) {
  return guarded([&] {
    auto k = static_cast<gearbox::device::DeviceKind>(kind);
    auto d = gearbox::device::get_device(k, index);
    if (!d.ok()) return fail(d.status());
    t_kind = k;
    t_index = index;
    return ok();
  });
}

gbx_status gbx_device_reset(void) {
  t_kind = gearbox::device::DeviceKind::CPU;
  t_index = 0;
  return GBX_OK;
}

gbx_status gbx_device_memory(size_t* capacity, size_t* used, size_t* largest_free, double* fragmentation) {
  return guarded([&] {
    auto d = gearbox::device::get_device(t_kind, t_index);
    if (!d.ok()) return fail(d.status());
    auto pool = (*d)->pool();
    if (!pool.ok()) return fail(pool.status());
    auto s = (*pool)->stats();
    if (capacity) *capacity = s.capacity;
    if (used) *used = s.used;
    if (largest_free) *largest_free = s.largest_free;
    if (fragmentation) *fragmentation = s.fragmentation;
    return ok();
  });
}

gbx_status gbx_context_create(gbx_context* out) {
  return guarded([&] {
    if (out == nullptr) return invalid("out is NULL");
    auto d = gearbox::device::get_device(t_kind, t_index);
    if (!d.ok()) return fail(d.status());
    *out = new gbx_context_s{*d, {}};
    return ok();
  });
}

void gbx_context_destroy(gbx_context ctx) { delete ctx; }

gbx_status gbx_context_set_op_path(gbx_context ctx, const char* op_path) {
  return guarded([&] {
    if (ctx == nullptr) return invalid("ctx is NULL");
    ctx->op_path = op_path ? op_path : "";
    return ok();
  });
}

gbx_status gbx_model_load_file(gbx_context ctx, const char* path, gbx_model* out) {
  return guarded([&] {
    if (ctx == nullptr || path == nullptr || out == nullptr) return invalid("ctx, path and out must not be NULL");
    return make_model(gearbox::Session::load(path, options_of(*ctx)), out);
  });
}

gbx_status gbx_model_load_memory(gbx_context ctx, const void* data, size_t size, gbx_model* out) {
  return guarded([&] {
    if (ctx == nullptr || data == nullptr || out == nullptr) return invalid("ctx, data and out must not be NULL");
    if (size == 0) return fail(Status(ErrorCode::FILE_EMPTY, "the model buffer is empty (size 0)"));
    // No base folder: a model from memory cannot refer to external data files.
    auto model = gearbox::import_onnx_bytes(std::string(static_cast<const char*>(data), size), "");
    if (!model.ok()) return fail(model.status());
    return make_model(gearbox::Session::create(std::move(model).value(), options_of(*ctx)), out);
  });
}

void gbx_model_destroy(gbx_model model) { delete model; }

gbx_status gbx_model_input_count(gbx_model model, size_t* count) {
  if (model == nullptr || count == nullptr) return invalid("model and count must not be NULL");
  *count = model->inputs.size();
  return GBX_OK;
}

gbx_status gbx_model_output_count(gbx_model model, size_t* count) {
  if (model == nullptr || count == nullptr) return invalid("model and count must not be NULL");
  *count = model->outputs.size();
  return GBX_OK;
}

gbx_status gbx_model_input(gbx_model model, size_t index, gbx_io_desc* out) {
  if (model == nullptr) return invalid("model is NULL");
  return fill_desc(model->inputs, index, out, "input");
}

gbx_status gbx_model_output(gbx_model model, size_t index, gbx_io_desc* out) {
  if (model == nullptr) return invalid("model is NULL");
  return fill_desc(model->outputs, index, out, "output");
}

gbx_status gbx_tensor_create(int32_t dtype, const int64_t* dims, size_t rank, gbx_tensor* out) {
  return guarded([&] {
    if (out == nullptr || (rank > 0 && dims == nullptr))
      return invalid("out (and dims when rank > 0) must not be NULL");
    auto dt = static_cast<gearbox::DType>(dtype);
    if (!gearbox::dtype_is_known(dtype) || dt == gearbox::DType::String || dt == gearbox::DType::Undefined)
      return invalid("dtype " + std::to_string(dtype) + " is not a numeric gbx_dtype");
    auto t = Tensor::allocate(dt, gearbox::Dims(dims, dims + rank));
    if (!t.ok()) return fail(t.status());
    *out = new gbx_tensor_s{std::move(t).value()};
    return ok();
  });
}

gbx_status gbx_tensor_create_copy(int32_t dtype, const int64_t* dims, size_t rank, const void* data, size_t bytes,
                                  gbx_tensor* out) {
  return guarded([&] {
    gbx_tensor t = nullptr;
    if (gbx_status s = gbx_tensor_create(dtype, dims, rank, &t); s != GBX_OK) return s;
    if (bytes != t->tensor.nbytes() || (bytes > 0 && data == nullptr)) {
      std::string msg = "the tensor " + gearbox::describe(t->tensor) + " takes " + std::to_string(t->tensor.nbytes()) +
                        " bytes but " + std::to_string(bytes) + " were given";
      delete t;
      return invalid(msg);
    }
    if (bytes) std::memcpy(t->tensor.mutable_raw(), data, bytes);
    *out = t;
    return ok();
  });
}

void gbx_tensor_destroy(gbx_tensor tensor) { delete tensor; }

gbx_status gbx_tensor_dtype(gbx_tensor tensor, int32_t* dtype) {
  if (tensor == nullptr || dtype == nullptr) return invalid("tensor and dtype must not be NULL");
  *dtype = static_cast<int32_t>(tensor->tensor.dtype());
  return GBX_OK;
}

gbx_status gbx_tensor_shape(gbx_tensor tensor, int64_t* dims, size_t capacity, size_t* rank) {
  if (tensor == nullptr || rank == nullptr) return invalid("tensor and rank must not be NULL");
  const auto& d = tensor->tensor.dims();
  *rank = d.size();
  if (capacity > 0 && dims == nullptr) return invalid("dims is NULL but capacity > 0");
  for (size_t i = 0; i < d.size() && i < capacity; ++i) dims[i] = d[i];
  return GBX_OK;
}

gbx_status gbx_tensor_data(gbx_tensor tensor, void** data, size_t* bytes) {
  return guarded([&] {
    if (tensor == nullptr || data == nullptr) return invalid("tensor and data must not be NULL");
    *data = tensor->tensor.nbytes() ? tensor->tensor.mutable_raw() : nullptr;
    if (bytes) *bytes = tensor->tensor.nbytes();
    return ok();
  });
}

gbx_status gbx_run_options_create(gbx_run_options* out) {
  return guarded([&] {
    if (out == nullptr) return invalid("out is NULL");
    *out = new gbx_run_options_s();
    return ok();
  });
}

void gbx_run_options_destroy(gbx_run_options options) { delete options; }

gbx_status gbx_run_options_set_timeout(gbx_run_options options, double seconds) {
  if (options == nullptr) return invalid("options is NULL");
  if (!std::isfinite(seconds) || seconds < 0)
    return invalid("the timeout must be a finite number of seconds >= 0 (0: no limit), got " + std::to_string(seconds));
  options->timeout_s.store(seconds);
  return GBX_OK;
}

gbx_status gbx_run_options_set_terminate(gbx_run_options options, int32_t terminate) {
  if (options == nullptr) return invalid("options is NULL");
  if (terminate) options->terminate.cancel();
  else options->terminate.reset();
  return GBX_OK;
}

gbx_status gbx_execute(gbx_model model, const char* const* input_names, const gbx_tensor* inputs, size_t n_inputs,
                       gbx_tensor* outputs, size_t n_outputs) {
  return gbx_execute_with_options(model, input_names, inputs, n_inputs, outputs, n_outputs, nullptr);
}

gbx_status gbx_execute_with_options(gbx_model model, const char* const* input_names, const gbx_tensor* inputs,
                                    size_t n_inputs, gbx_tensor* outputs, size_t n_outputs, gbx_run_options options) {
  return guarded([&] {
    if (model == nullptr) return invalid("model is NULL");
    if (n_outputs != model->outputs.size() || (n_outputs > 0 && outputs == nullptr))
      return invalid("outputs must hold " + std::to_string(model->outputs.size()) + " handles (n_outputs is " +
                     std::to_string(n_outputs) + ")");
    auto feeds = collect_inputs(input_names, inputs, n_inputs);
    if (!feeds.ok()) return fail(feeds.status());
    const gearbox::RunOptions run_options = run_options_of(options);
    auto result = model->session->run(*feeds, run_options);
    if (!result.ok()) return fail(result.status());
    for (size_t i = 0; i < n_outputs; ++i) outputs[i] = new gbx_tensor_s{std::move(result.value()[i])};
    return ok();
  });
}

gbx_status gbx_stream_create(gbx_context ctx, gbx_stream* out) {
  return guarded([&] {
    if (ctx == nullptr || out == nullptr) return invalid("ctx and out must not be NULL");
    *out = new gbx_stream_s();
    return ok();
  });
}

void gbx_stream_destroy(gbx_stream stream) { delete stream; }

gbx_status gbx_stream_synchronize(gbx_stream stream) {
  if (stream == nullptr) return invalid("stream is NULL");
  stream->stream.synchronize();
  return GBX_OK;
}

gbx_status gbx_execute_async(gbx_model model, const char* const* input_names, const gbx_tensor* inputs, size_t n_inputs,
                             gbx_stream stream, gbx_event* event) {
  return gbx_execute_async_with_options(model, input_names, inputs, n_inputs, stream, nullptr, event);
}

gbx_status gbx_execute_async_with_options(gbx_model model, const char* const* input_names, const gbx_tensor* inputs,
                                          size_t n_inputs, gbx_stream stream, gbx_run_options options,
                                          gbx_event* event) {
  return guarded([&] {
    if (model == nullptr || stream == nullptr || event == nullptr)
      return invalid("model, stream and event must not be NULL");
    auto feeds = collect_inputs(input_names, inputs, n_inputs);
    if (!feeds.ok()) return fail(feeds.status());
    // Capture private copies: the caller may refill its input buffers right away.
    std::map<std::string, Tensor> captured;
    for (auto& [name, t] : *feeds) captured[name] = t.clone();
    auto outputs = std::make_shared<std::vector<Tensor>>();
    std::shared_ptr<const gearbox::Session> session = model->session;  // outlives a destroyed model
    gearbox::device::Event e = stream->stream.enqueue(
        [session, outputs, captured = std::move(captured), run_options = run_options_of(options)] {
          auto r = session->run(captured, run_options);
          if (!r.ok()) return r.status();
          *outputs = std::move(r).value();
          return Status::OK();
        });
    *event = new gbx_event_s{e, outputs};
    return ok();
  });
}

gbx_status gbx_event_wait(gbx_event event) {
  if (event == nullptr) return invalid("event is NULL");
  Status st = event->event.wait();
  return st.ok() ? GBX_OK : fail(st);
}

gbx_status gbx_event_query(gbx_event event, int32_t* done) {
  if (event == nullptr || done == nullptr) return invalid("event and done must not be NULL");
  *done = event->event.done() ? 1 : 0;
  return GBX_OK;
}

// The finished event's outputs, or the status that says why there are none.
static gbx_status finished_outputs(gbx_event event, const std::vector<Tensor>** out) {
  if (!event->event.done()) return invalid("the execution has not finished: call gbx_event_wait first");
  Status st = event->event.wait();  // done: returns at once
  if (!st.ok()) return fail(st);
  *out = event->outputs.get();
  return GBX_OK;
}

gbx_status gbx_event_output_count(gbx_event event, size_t* count) {
  if (event == nullptr || count == nullptr) return invalid("event and count must not be NULL");
  const std::vector<Tensor>* outs = nullptr;
  if (gbx_status s = finished_outputs(event, &outs)) return s;
  *count = outs->size();
  return GBX_OK;
}

gbx_status gbx_event_output(gbx_event event, size_t index, gbx_tensor* out) {
  return guarded([&] {
    if (event == nullptr || out == nullptr) return invalid("event and out must not be NULL");
    const std::vector<Tensor>* outs = nullptr;
    if (gbx_status s = finished_outputs(event, &outs)) return s;
    if (index >= outs->size())
      return invalid("output index " + std::to_string(index) + " is out of range (" + std::to_string(outs->size()) +
                     " outputs)");
    *out = new gbx_tensor_s{(*outs)[index]};
    return ok();
  });
}

void gbx_event_destroy(gbx_event event) { delete event; }

}  // extern "C"

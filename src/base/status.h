// Status and Result<T>: how every fallible call in gearbox reports failure.
//
// A Status is either OK (no allocation) or an ErrorCode from the catalogue (errors.def)
// plus a message with the concrete values (op, tensor name, shapes, sizes). The likely
// cause and the fix come from the catalogue, so messages never repeat them.
//
//   Result<Tensor> r = read_npy(path);
//   if (!r) return r.status();
//   Tensor t = std::move(r).value();
//
// No exceptions cross a gearbox API; CHECK-style aborts are for internal invariants only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gearbox {

enum class ErrorCode : int {
  OK = 0,
#define GBX_ERROR(code, name, summary, cause, fix) name = code,
#include "base/errors.def"
#undef GBX_ERROR
};

struct ErrorInfo {
  int code;
  std::string_view name;
  std::string_view summary;
  std::string_view cause;
  std::string_view fix;
};

// Catalogue lookups; nullptr when the code is not in the catalogue.
const ErrorInfo* find_error(int code);
const ErrorInfo* find_error(std::string_view name);
const ErrorInfo& error_info(ErrorCode code);
// Every entry, in catalogue order.
const ErrorInfo* all_errors(size_t* count);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(ErrorCode code, std::string message);

  static Status OK() { return Status(); }
  bool ok() const { return state_ == nullptr; }
  explicit operator bool() const { return ok(); }
  ErrorCode code() const { return ok() ? ErrorCode::OK : state_->code; }
  const std::string& message() const;
  // "GBX-E<code> <NAME>: <message>", the one-line form every CLI and server error uses.
  std::string to_string() const;
  // The one-line form followed by the catalogue's cause and fix.
  std::string to_string_with_help() const;
  // Prefixes context ("node 'conv1' (Conv): ") to the message; OK stays OK.
  Status with_context(std::string_view context) const;

 private:
  struct State {
    ErrorCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

// Builds a Status from streamed parts: make_error(ErrorCode::SHAPE_MISMATCH, "got ", a, " vs ", b).
template <typename... Args>
Status make_error(ErrorCode code, const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return Status(code, os.str());
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  Status status() const { return ok() ? Status() : std::get<1>(v_); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gearbox

#define GBX_CONCAT_INNER(a, b) a##b
#define GBX_CONCAT(a, b) GBX_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when expr fails.
#define GBX_RETURN_IF_ERROR(expr)                  \
  do {                                             \
    ::gearbox::Status gbx_status_ = (expr);        \
    if (!gbx_status_.ok()) return gbx_status_;     \
  } while (0)

// Returns make_error(code, ...) when cond is false.
#define GBX_RETURN_IF_NOT(cond, code, ...)                                      \
  do {                                                                          \
    if (!(cond)) return ::gearbox::make_error(::gearbox::ErrorCode::code, __VA_ARGS__); \
  } while (0)

// `GBX_ASSIGN_OR_RETURN(auto x, f())`: unwraps a Result or returns its Status.
#define GBX_ASSIGN_OR_RETURN(lhs, expr) \
  GBX_ASSIGN_OR_RETURN_IMPL(GBX_CONCAT(gbx_result_, __LINE__), lhs, expr)
#define GBX_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

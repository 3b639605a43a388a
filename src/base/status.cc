// Status formatting and the catalogue lookups generated from errors.def.
#include "base/status.h"

#include <array>

namespace gearbox {
namespace {

constexpr ErrorInfo kErrors[] = {
#define GBX_ERROR(code, name, summary, cause, fix) {code, #name, summary, cause, fix},
#include "base/errors.def"
#undef GBX_ERROR
};

const std::string& empty_string() {
  static const std::string s;
  return s;
}

}  // namespace

const ErrorInfo* find_error(int code) {
  for (const auto& e : kErrors)
    if (e.code == code) return &e;
  return nullptr;
}

const ErrorInfo* find_error(std::string_view name) {
  for (const auto& e : kErrors)
    if (e.name == name) return &e;
  return nullptr;
}

const ErrorInfo& error_info(ErrorCode code) {
  static const ErrorInfo ok{0, "OK", "Success", "", ""};
  const ErrorInfo* e = find_error(static_cast<int>(code));
  return e ? *e : ok;
}

const ErrorInfo* all_errors(size_t* count) {
  *count = std::size(kErrors);
  return kErrors;
}

Status::Status(ErrorCode code, std::string message) {
  if (code != ErrorCode::OK) state_ = std::make_shared<State>(State{code, std::move(message)});
}

const std::string& Status::message() const { return ok() ? empty_string() : state_->message; }

std::string Status::to_string() const {
  if (ok()) return "OK";
  const ErrorInfo& e = error_info(state_->code);
  return "GBX-E" + std::to_string(e.code) + " " + std::string(e.name) + ": " + state_->message;
}

std::string Status::to_string_with_help() const {
  if (ok()) return "OK";
  const ErrorInfo& e = error_info(state_->code);
  return to_string() + "\n  cause: " + std::string(e.cause) + "\n  fix:   " + std::string(e.fix) +
         "\n  (gearbox explain " + std::to_string(e.code) + ")";
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return Status(state_->code, std::string(context) + state_->message);
}

}  // namespace gearbox

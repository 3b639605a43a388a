// DType names and sizes.
#include "base/dtype.h"

namespace gearbox {
namespace {
struct DTypeEntry {
  DType type;
  size_t size;
  std::string_view name;
  std::string_view short_name;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::F32, 4, "float32", "f32"},  {DType::F64, 8, "float64", "f64"},
    {DType::F16, 2, "float16", "f16"},  {DType::BF16, 2, "bfloat16", "bf16"},
    {DType::I8, 1, "int8", "i8"},       {DType::U8, 1, "uint8", "u8"},
    {DType::I16, 2, "int16", "i16"},    {DType::U16, 2, "uint16", "u16"},
    {DType::I32, 4, "int32", "i32"},    {DType::U32, 4, "uint32", "u32"},
    {DType::I64, 8, "int64", "i64"},    {DType::U64, 8, "uint64", "u64"},
    {DType::Bool, 1, "bool", "bool"},   {DType::String, 0, "string", "str"},
};
}  // namespace

size_t dtype_size(DType t) {
  for (const auto& e : kDTypes)
    if (e.type == t) return e.size;
  return 0;
}

std::string_view dtype_name(DType t) {
  for (const auto& e : kDTypes)
    if (e.type == t) return e.name;
  return "undefined";
}

DType dtype_from_name(std::string_view name) {
  for (const auto& e : kDTypes)
    if (e.name == name || e.short_name == name) return e.type;
  if (name == "float") return DType::F32;
  if (name == "double") return DType::F64;
  return DType::Undefined;
}

bool dtype_is_known(int32_t onnx_type) {
  for (const auto& e : kDTypes)
    if (static_cast<int32_t>(e.type) == onnx_type) return true;
  return false;
}

}  // namespace gearbox

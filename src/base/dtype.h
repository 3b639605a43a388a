// Element types. The numeric values match ONNX's TensorProto.DataType so the importer and
// the .gbm format can store them directly; they are stable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/half.h"

namespace gearbox {

enum class DType : int32_t {
  Undefined = 0,
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  String = 8,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  U32 = 12,
  U64 = 13,
  BF16 = 16,
};

// Bytes per element; 0 for Undefined, sizeof(std::string) is not meaningful for String (0).
size_t dtype_size(DType t);
// "float32", "int64", "bool", ... (numpy's names, which users know).
std::string_view dtype_name(DType t);
// Parses numpy-style names and the short forms "f32", "i64", ...; Undefined if unknown.
DType dtype_from_name(std::string_view name);
// True for the ONNX enum values gearbox represents.
bool dtype_is_known(int32_t onnx_type);
inline bool is_float(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}
inline bool is_signed_int(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}
inline bool is_unsigned_int(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
inline bool is_integer(DType t) { return is_signed_int(t) || is_unsigned_int(t); }

// C++ type <-> DType.
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  else if constexpr (std::is_same_v<T, double>) return DType::F64;
  else if constexpr (std::is_same_v<T, Half>) return DType::F16;
  else if constexpr (std::is_same_v<T, BFloat16>) return DType::BF16;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::I8;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::U8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::I16;
  else if constexpr (std::is_same_v<T, uint16_t>) return DType::U16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
  else if constexpr (std::is_same_v<T, uint32_t>) return DType::U32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
  else if constexpr (std::is_same_v<T, uint64_t>) return DType::U64;
  else if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else if constexpr (std::is_same_v<T, std::string>) return DType::String;
  else return DType::Undefined;
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) for the C++ type of a numeric dtype (bool included, string not).
// Returns false when t is not numeric, so callers can report DTYPE_UNSUPPORTED.
template <typename Fn>
bool visit_numeric(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32: fn(TypeTag<float>{}); return true;
    case DType::F64: fn(TypeTag<double>{}); return true;
    case DType::F16: fn(TypeTag<Half>{}); return true;
    case DType::BF16: fn(TypeTag<BFloat16>{}); return true;
    case DType::I8: fn(TypeTag<int8_t>{}); return true;
    case DType::U8: fn(TypeTag<uint8_t>{}); return true;
    case DType::I16: fn(TypeTag<int16_t>{}); return true;
    case DType::U16: fn(TypeTag<uint16_t>{}); return true;
    case DType::I32: fn(TypeTag<int32_t>{}); return true;
    case DType::U32: fn(TypeTag<uint32_t>{}); return true;
    case DType::I64: fn(TypeTag<int64_t>{}); return true;
    case DType::U64: fn(TypeTag<uint64_t>{}); return true;
    case DType::Bool: fn(TypeTag<bool>{}); return true;
    default: return false;
  }
}

// Like visit_numeric but for every dtype including String.
template <typename Fn>
bool visit_any(DType t, Fn&& fn) {
  if (t == DType::String) {
    fn(TypeTag<std::string>{});
    return true;
  }
  return visit_numeric(t, std::forward<Fn>(fn));
}

// The type arithmetic is done in: float for the 16-bit floats, the type itself otherwise.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

}  // namespace gearbox

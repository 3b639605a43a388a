// float16 and bfloat16 storage types. Arithmetic on them is done in float (accumulate in
// f32, round once on store), which is what the reference kernels need.
#pragma once

#include <cstdint>
#include <cstring>

namespace gearbox {

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }  // NOLINT: numeric-like

  static float to_float(uint16_t h) {
    uint32_t sign = (uint32_t(h) & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
      if (man == 0) return bits_to_float(sign);
      // subnormal: value = man * 2^-24
      float f = float(man) * (1.0f / 16777216.0f);
      return sign ? -f : f;
    }
    if (exp == 31) return bits_to_float(sign | 0x7f800000u | (man << 13));
    return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
  }
  // Round to nearest even, with overflow to inf and gradual underflow.
  static uint16_t from_float(float f) {
    uint32_t x = float_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (ax < 0x38800000u) {                                  // below 2^-14: subnormal or zero
      float a = bits_to_float(ax);
      // Scale into the subnormal integer grid; nearbyint-like rounding via the float adder.
      float scaled = a * 16777216.0f;  // units of 2^-24
      uint32_t m = uint32_t(scaled);
      float rem = scaled - float(m);
      if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
      return uint16_t(sign | m);
    }
    uint32_t mant_odd = (ax >> 13) & 1;
    ax += 0xfffu + mant_odd;
    return uint16_t(sign | ((ax - 0x38000000u) >> 13));
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(from_float(f)) {}
  operator float() const { return bits_to_float(uint32_t(bits) << 16); }  // NOLINT

  static uint16_t from_float(float f) {
    uint32_t x = float_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1);  // round to nearest even
    return uint16_t(x >> 16);
  }
};

}  // namespace gearbox

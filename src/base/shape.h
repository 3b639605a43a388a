// Shapes. A Dim is either a known size or a symbol ("batch", "seq"): the IR keeps model
// shapes symbolic; tensors at run time always have concrete dims (std::vector<int64_t>).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gearbox {

using Dims = std::vector<int64_t>;

struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // set when the model names the dim; empty and value < 0 means unknown

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: a number is a known dim
  static Dim symbolic(std::string s) {
    Dim d;
    d.symbol = std::move(s);
    return d;
  }
  bool known() const { return value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
};

// A possibly-unranked shape with possibly-symbolic dims.
struct Shape {
  bool ranked = false;
  std::vector<Dim> dims;

  Shape() = default;
  explicit Shape(std::vector<Dim> d) : ranked(true), dims(std::move(d)) {}
  static Shape from_dims(const Dims& d);
  size_t rank() const { return dims.size(); }
  bool fully_known() const;
  // The concrete dims; nullopt unless fully known.
  std::optional<Dims> concrete() const;
  // True when concrete dims d fit this shape (same rank, equal known dims).
  bool accepts(const Dims& d) const;
  bool operator==(const Shape& o) const { return ranked == o.ranked && dims == o.dims; }
};

// "[1,3,224,224]", "[batch,128]", "[?]" ("unranked" when not ranked).
std::string to_string(const Shape& s);
std::string to_string(const Dims& d);
// Number of elements; 1 for a scalar. Returns -1 on overflow past int64.
int64_t numel(const Dims& d);

}  // namespace gearbox

// .npy read and write (numpy format versions 1.0, 2.0 and 3.0), for every numeric dtype and
// bool. float16 is numpy's '<f2'; bfloat16 has no numpy dtype and is written as float32.
// Malformed files give NPY_INVALID, dtypes gearbox cannot hold NPY_UNSUPPORTED_DTYPE. A header
// is refused exactly when numpy refuses it (tests/base/npy_numpy_agreement.py checks).
#pragma once

#include <string>

#include "base/status.h"
#include "base/tensor.h"

namespace gearbox {

// What a reader tolerates beyond numpy's format. numpy ignores bytes after the array's data;
// gearbox refuses them by default (a file with more data than its shape is usually the wrong
// file, or a rewrite that went wrong), and reads them like numpy with allow_trailing_bytes
// (the CLI's --npy-allow-trailing-bytes).
struct NpyReadOptions {
  bool allow_trailing_bytes = false;
};

Result<Tensor> read_npy(const std::string& path, const NpyReadOptions& options = {});
Result<Tensor> parse_npy(const std::string& bytes, const std::string& what = "<memory>",
                         const NpyReadOptions& options = {});
Status write_npy(const std::string& path, const Tensor& t);
std::string serialize_npy(const Tensor& t);

}  // namespace gearbox

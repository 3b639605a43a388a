// .npy read and write (numpy format versions 1.0, 2.0 and 3.0), for every numeric dtype and
// bool. float16 is numpy's '<f2'; bfloat16 has no numpy dtype and is written as float32.
// Malformed files give NPY_INVALID, dtypes gearbox cannot hold NPY_UNSUPPORTED_DTYPE.
#pragma once

#include <string>

#include "base/status.h"
#include "base/tensor.h"

namespace gearbox {

Result<Tensor> read_npy(const std::string& path);
Result<Tensor> parse_npy(const std::string& bytes, const std::string& what = "<memory>");
Status write_npy(const std::string& path, const Tensor& t);
std::string serialize_npy(const Tensor& t);

}  // namespace gearbox

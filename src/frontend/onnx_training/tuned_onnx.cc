// write_tuned_onnx (see imported_model.h): the original ModelProto with the trained
// initializers' values replaced, everything else (nodes, names, opsets, metadata, other
// initializers, their storage) as it was, so the file is the model the user gave, tuned.
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "base/atomic_file.h"
#include "frontend/onnx_training/imported_model.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn::onnx_training {

void write_tuned_onnx(const std::string& original_path, const std::string& out_path,
                      const std::vector<std::pair<std::string, Tensor>>& params) {
  std::ifstream in(original_path, std::ios::binary);
  if (!in)
    throw_status(gearbox::make_error(gearbox::ErrorCode::FILE_NOT_FOUND, "cannot reopen ", original_path,
                                     " to write the tuned model"));
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes.str()))
    throw_status(gearbox::make_error(gearbox::ErrorCode::MODEL_PARSE_FAILED, original_path,
                                     " no longer parses as an ONNX model (changed while training?)"));
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : params) by_name[name] = &t;
  size_t replaced = 0;
  for (onnx::TensorProto& init : *model.mutable_graph()->mutable_initializer()) {
    auto it = by_name.find(init.name());
    if (it == by_name.end()) continue;
    const gearbox::Tensor& v = value_of(*it->second, "a trained initializer");
    int64_t numel = 1;
    for (int64_t d : init.dims()) numel *= d;
    if (init.data_type() != onnx::TensorProto::FLOAT || numel != v.numel())
      throw_status(gearbox::make_error(gearbox::ErrorCode::INTERNAL, "initializer '", init.name(), "' of ",
                                       original_path, " is not the float32 tensor that was trained"));
    // raw_data is little-endian, as this machine's floats are.
    init.clear_float_data();
    init.clear_external_data();
    init.clear_data_location();
    init.set_raw_data(std::string(static_cast<const char*>(v.raw()), v.nbytes()));
    by_name.erase(it);
    ++replaced;
  }
  if (!by_name.empty())
    throw_status(gearbox::make_error(gearbox::ErrorCode::INTERNAL, "'", by_name.begin()->first,
                                     "' is not an initializer of ", original_path));
  std::string out;
  if (!model.SerializeToString(&out))
    throw_status(gearbox::make_error(gearbox::ErrorCode::FILE_WRITE_FAILED, "cannot serialize the tuned model (",
                                     replaced, " initializers replaced)"));
  throw_if_error(gearbox::write_file_atomically(out_path, out));
}

}  // namespace gbx::nn::onnx_training

// KServe v2 (Open Inference Protocol) tensors on the wire: parsing an infer request body
// (JSON tensors, or JSON header + binary tensor data) into gearbox Tensors, and encoding the
// response. Knows nothing about HTTP or models; the server checks names against the model.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"

namespace gearbox::serve {

// "FP32" <-> DType::F32 ...; Undefined when the name is not a datatype gearbox serves.
DType dtype_from_kserve(std::string_view name);
// "FP32"; "" for dtypes without a KServe name (String).
std::string_view kserve_datatype(DType t);

struct RequestedOutput {
  std::string name;
  bool binary = false;
};

struct InferRequest {
  std::string id;  // echoed in the response when set
  std::map<std::string, Tensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every model output
  bool binary_outputs_default = false;   // request-level "binary_data_output" parameter
};

// Parses a request body. `header_length` is the Inference-Header-Content-Length header's value
// (nullopt when absent: the whole body is JSON). Errors: SERVE_REQUEST_INVALID,
// SERVE_DATATYPE_UNKNOWN, SERVE_TENSOR_DATA_INVALID, SERVE_BINARY_DATA_INVALID.
Result<InferRequest> parse_infer_request(std::string_view body, std::optional<size_t> header_length);

struct NamedOutput {
  std::string name;
  Tensor tensor;
  bool binary = false;
};

struct EncodedResponse {
  std::string body;
  // Set when some output is sent as binary data: the JSON part's length, for the
  // Inference-Header-Content-Length response header.
  std::optional<size_t> header_length;
};

EncodedResponse encode_infer_response(const std::string& model, const std::string& version, const std::string& id,
                                      const std::vector<NamedOutput>& outputs);

}  // namespace gearbox::serve

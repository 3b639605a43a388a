// cpp_example: the C++ API (RAII, no exceptions). Loads the model from memory, fills every
// float input with a fixed pattern (symbolic dims = 2), runs it on a stream and prints the
// outputs.
//
//   cpp_example MODEL.onnx
#include <gearbox/gearbox.hpp>

#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " MODEL.onnx\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  auto ctx = gbx::Context::create();
  if (!ctx) return std::cerr << ctx.status().message() << "\n", 1;
  auto model = gbx::Model::load_memory(*ctx, bytes.data(), bytes.size());
  if (!model) return std::cerr << model.status().message() << "\n", 1;

  std::vector<gbx::Tensor> tensors;
  std::vector<std::string> names;
  for (const gbx::IoDesc& io : model->inputs()) {
    if (io.dtype != GBX_DTYPE_FLOAT32 || io.rank < 0) return std::cerr << "unsupported input " << io.name << "\n", 1;
    std::vector<int64_t> dims;
    int64_t n = 1;
    for (int64_t d : io.dims) n *= dims.emplace_back(d >= 0 ? d : 2);
    std::vector<float> values(static_cast<size_t>(n));
    for (size_t e = 0; e < values.size(); ++e)
      values[e] = static_cast<float>(static_cast<int>((e + 3 * tensors.size()) % 7) - 3) * 0.5f;
    auto t = gbx::Tensor::from_data<float>(dims, values);
    if (!t) return std::cerr << t.status().message() << "\n", 1;
    tensors.push_back(std::move(*t));
    names.push_back(io.name);
  }
  gbx::Feeds feeds;
  for (size_t i = 0; i < names.size(); ++i) feeds.emplace_back(names[i], &tensors[i]);

  auto stream = gbx::Stream::create(*ctx);
  if (!stream) return std::cerr << stream.status().message() << "\n", 1;
  auto event = model->run_async(feeds, *stream);
  if (!event) return std::cerr << event.status().message() << "\n", 1;
  auto outputs = event->outputs();
  if (!outputs) return std::cerr << outputs.status().message() << "\n", 1;

  auto descs = model->outputs();
  for (size_t o = 0; o < outputs->size(); ++o) {
    std::cout << "output " << descs[o].name << ":";
    for (float v : (*outputs)[o].to_vector<float>()) std::cout << " " << v;
    std::cout << "\n";
  }
  // Errors come back as values with the catalogue code and message.
  auto missing = model->run({});
  std::cout << "no inputs -> status " << missing.status().code() << ": " << missing.status().message() << "\n";
  return missing.ok() ? 1 : 0;
}

// libFuzzer target: bytes -> a gbx_plugin descriptor (include/gearbox/plugin.h) ->
// check_plugin_descriptor, the checks a plugin library's descriptor passes before any of its ops
// is registered: name, version, op count, each op's domain, op type, opset range, input and
// output counts, dtype lists and functions, and no op listed twice. The bytes choose every field,
// NULL pointers included; what a C descriptor cannot say about itself is kept consistent (an
// array holds as many entries as its count, a dtype list ends with 0), since no check can see
// past a plugin's own out-of-bounds count. Registration is not fuzzed: it would fill the process'
// kernel registry.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "gearbox/plugin.h"
#include "kernels/plugin_ops.h"

namespace {

int32_t shape_fn(const gbx_plugin_node*, const gbx_plugin_shape*, int32_t, gbx_plugin_shape*, int32_t) { return 0; }
int32_t kernel_fn(const gbx_plugin_node*, const gbx_plugin_tensor*, int32_t, gbx_plugin_tensor*, int32_t) { return 0; }

// The storage the descriptor's pointers point into, alive for one input.
struct Storage {
  std::deque<std::string> strings;
  std::deque<std::vector<int32_t>> lists;
  std::deque<std::vector<const int32_t*>> list_arrays;
  std::vector<gbx_plugin_op> ops;

  const char* string_or_null(FuzzedDataProvider& in) {
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) return nullptr;
    return strings.emplace_back(in.ConsumeRandomLengthString(40)).c_str();
  }
  // `count` dtype lists (each NULL or 0-ended), or NULL for the whole array.
  const int32_t* const* dtype_lists(FuzzedDataProvider& in, int32_t count) {
    if (count < 0 || count > 64 || in.ConsumeIntegralInRange<int>(0, 3) == 0) return nullptr;
    auto& array = list_arrays.emplace_back();
    for (int32_t k = 0; k < count; ++k) {
      if (in.ConsumeBool()) {
        array.push_back(nullptr);
        continue;
      }
      auto& list = lists.emplace_back();
      const int n = in.ConsumeIntegralInRange<int>(0, 70);
      for (int i = 0; i < n; ++i) list.push_back(in.ConsumeIntegral<int32_t>());
      list.push_back(0);
      array.push_back(list.data());
    }
    return array.data();
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Storage st;
  gbx_plugin plugin{};
  plugin.abi_version = in.ConsumeIntegral<uint32_t>();
  plugin.name = st.string_or_null(in);
  plugin.version = st.string_or_null(in);
  // -1 to 61 ops, or one over the limit (refused before the array is read, so none is made): a
  // descriptor of thousands of ops would cost each input milliseconds and reach no other check.
  const int32_t pick = in.ConsumeIntegralInRange<int32_t>(0, 63);
  plugin.num_ops = pick == 63 ? gearbox::kMaxPluginOps + 1 : pick - 1;
  if (plugin.num_ops > 0 && plugin.num_ops <= gearbox::kMaxPluginOps) st.ops.resize(plugin.num_ops);
  for (gbx_plugin_op& op : st.ops) {
    if (in.remaining_bytes() == 0) break;  // the rest stay zero: no op_type
    op.domain = st.string_or_null(in);
    op.op_type = st.string_or_null(in);
    op.since_version = in.ConsumeIntegral<int32_t>();
    op.end_version = in.ConsumeBool() ? 0 : in.ConsumeIntegral<int32_t>();
    op.num_inputs = in.ConsumeIntegralInRange<int32_t>(-2, 66);
    op.num_outputs = in.ConsumeIntegralInRange<int32_t>(-2, 66);
    op.input_dtypes = st.dtype_lists(in, op.num_inputs);
    op.output_dtypes = st.dtype_lists(in, op.num_outputs);
    op.shape = in.ConsumeIntegralInRange<int>(0, 7) ? shape_fn : nullptr;
    op.kernel = in.ConsumeIntegralInRange<int>(0, 7) ? kernel_fn : nullptr;
  }
  plugin.ops = in.ConsumeIntegralInRange<int>(0, 15) ? st.ops.data() : nullptr;
  (void)gearbox::check_plugin_descriptor(plugin, "fuzz.so");
  return 0;
}

// The precision pass: which nodes compute in a reduced precision (bf16, fp16) under one of
// CANN's precision modes, and the lists that steer it (docs/precision.md).
//
// A lowered node computes with fp32 accumulation (Node::compute_dtype); its kernel converts
// what it reads into the reduced format (weights once, when they are constants: cached in the
// kernel's layout and written converted into nothing else). The model's I/O dtypes never
// change and no Cast node is inserted; what changes is where the rounding happens, which
// `gearbox compare --precision-mode` shows per node.
//
// Storage: a float32 value written by a lowered node and read only by lowered nodes whose
// kernels read the reduced dtype (cpu.dnnl's convolutions) is stored in it -- its Value's
// dtype becomes bf16, so the memory planner sizes it so and the .gbm keeps it. The producer
// rounds its result once (bias, residual and activation applied in fp32 before), and the
// consumers read it without the conversion each would otherwise make of a float32 input: one
// rounding of 2^-9 relative per stored value, where the consumers rounded their float32 input
// anyway. Graph outputs, values a subgraph reads and values with any other reader stay
// float32. On a CPU without bf16 arithmetic the kernels convert the stored values to fp32 and
// back (the same roundings, fp32 products).
//
// Which nodes: a node is lowered only where the kernel its engine runs declares the reduced
// dtype (KernelSupport::compute) -- "allow" means never slower for want of a kernel -- and:
//   force_fp32                      nothing (the default);
//   allow_fp32_to_bf16 / _fp16      every node whose kernel computes in the format;
//   allow_mix_precision_bf16 / _fp16
//                                   white-list ops (contractions), and gray ops whose float
//                                   input comes from a lowered node; black-list ops stay fp32
//                                   (OpDescriptor::precision, changed by --modify-mixlist);
//   force_bf16 / force_fp16         every node with a kernel, warning for each black-list op.
// Nodes named in --keep-dtype (a node name, or OpType::X for every X) stay in their dtype.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "graph/ir.h"
#include "kernels/op_descriptor.h"
#include "runtime/partitioner.h"

namespace gearbox {

enum class PrecisionMode : uint8_t {
  ForceFp32,
  AllowFp32ToBf16,
  AllowFp32ToFp16,
  AllowMixBf16,
  AllowMixFp16,
  ForceBf16,
  ForceFp16,
};
// CANN's names ("allow_mix_precision_bf16"); "" and "fp32" are force_fp32.
// PRECISION_MODE_UNKNOWN otherwise, listing the names.
Result<PrecisionMode> parse_precision_mode(std::string_view name);
std::string_view precision_mode_name(PrecisionMode m);
// BF16, F16, or Undefined for force_fp32.
DType reduced_dtype(PrecisionMode m);

// What --keep-dtype and --modify-mixlist say.
struct PrecisionLists {
  std::set<std::string, std::less<>> keep_nodes;     // node names kept in their dtype
  std::set<std::string, std::less<>> keep_op_types;  // op types ("Conv", "com.gearbox.FusedConv")
  // Op type -> the list --modify-mixlist moved it to (its descriptor's class otherwise).
  std::map<std::string, PrecisionClass, std::less<>> classes;
  bool empty() const { return keep_nodes.empty() && keep_op_types.empty() && classes.empty(); }
};
// --keep-dtype FILE: one entry per line, a node name or "OpType::Conv"; '#' starts a comment.
// PRECISION_LIST_INVALID for an unreadable file or an empty OpType:: entry.
Status read_keep_dtype(const std::string& path, PrecisionLists* lists);
// --modify-mixlist FILE: {"white-list": {"to-add": [...], "to-remove": [...]}, "black-list":
// {...}, "gray-list": {...}} with op types; an op removed from a list without being added to
// another becomes gray. PRECISION_LIST_INVALID for bad JSON, an unknown key, an op type gearbox
// does not know, or an op added to two lists.
Status read_modify_mixlist(const std::string& path, PrecisionLists* lists);

// The op type a user names for a node in the lists: gearbox's fused and re-laid-out forms
// answer to the op they came from (com.gearbox.FusedConv, NhwcConv and Nchw16cConv to "Conv",
// FusedMatMul to "MatMul"), so a list written against the model still applies after the passes.
std::string precision_op_type(const Node& n);

// What assign_precision did, for the compile report, the log and doctor.
struct PrecisionReport {
  PrecisionMode mode = PrecisionMode::ForceFp32;
  size_t float_nodes = 0;  // nodes with a float32 input (the candidates)
  std::vector<std::string> lowered;  // names of the nodes lowered, in graph order
  // Why candidates stayed in their dtype -> how many ("black list: Softmax", "no bf16 kernel
  // on cpu.simd", "--keep-dtype").
  std::map<std::string, size_t> kept;
  std::vector<std::string> warnings;  // force modes: black-list ops lowered
  size_t moved = 0;  // nodes placed on another engine of the list for its reduced-precision kernel
  size_t stored = 0;  // values between lowered nodes stored in the reduced dtype (Storage, above)
  bool storage_skipped = false;  // no reduced arithmetic on this CPU: every value stays float32
  // "allow_mix_precision_bf16: 53 of 180 float nodes compute in bf16; kept fp32: ..."
  std::string summary() const;
};

// Sets Node::compute_dtype on every node of the model's graphs (clearing earlier choices),
// after partitioning: a node to be lowered whose engine's kernel does not compute in the
// reduced dtype moves to the first engine of the list whose kernel does (not a node an
// --engine override placed; report.moved counts them, and the caller partitions again keeping
// the placements, for the regions and counts). Then types the values stored in the reduced
// dtype (Storage, above; report.stored counts them), after undoing an earlier call's.
// PRECISION_LIST_INVALID when a --keep-dtype node name or op type matches nothing in the model.
// A --keep-dtype node name the passes fused or replaced keeps the node that computes its result
// now (`final_nodes`: OptimizerReport::final_nodes(); empty when the model was not optimized).
// `arithmetic`: whether the CPU compiled for computes in the reduced dtype; without it nothing
// is stored (the kernels would convert every stored value back: slower than fp32, none faster).
Result<PrecisionReport> assign_precision(Model& model, const Partition& partition, PrecisionMode mode,
                                         const PrecisionLists& lists,
                                         const std::map<std::string, std::string>& final_nodes = {},
                                         bool arithmetic = true);

// For a compiled model (gearbox compile, before the .gbm is written): the float32 constant
// weights that only lowered nodes read, each through a kernel that reads them in the reduced
// dtype (today cpu.dnnl's convolutions), converted into it once (round to nearest even, as
// the kernel's own conversion would) -- half the bytes in the file, and no conversion at load.
// The in-memory session keeps float32 weights and converts them in the kernel: the same
// values, so a .gbm runs bit for bit as the session it was compiled from.
struct WeightStorageReport {
  size_t weights = 0;  // initializers converted
  size_t bytes_before = 0, bytes_after = 0;
};
WeightStorageReport store_weights_reduced(Model& model);

// Nodes of the model's graphs that compute in `dtype` (a compiled model's, for its report).
size_t count_lowered(const Model& model, DType dtype);

}  // namespace gearbox

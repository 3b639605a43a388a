// What gearbox plan splits: a GPT-style decoder-only transformer described by its dimensions,
// and the per-layer facts the cost model needs (parameters, FLOPs, bytes moved, activations).
//
// The formulas are the ones the parallel-training literature uses for this family, so a
// figure can be checked by hand:
//   parameters per block        12 h^2 + 13 h                (QKV, projection, 2-layer MLP with
//                                                              ffn = 4h, two LayerNorms, biases)
//   forward FLOPs per block      24 T h^2 + 4 T s h           (T = b s tokens; Narayanan et al.
//                                                              2021, "Efficient large-scale
//                                                              language model training")
//   activations per block        s b h (10 + 24/t + 5 a s/(h t)) bytes at 2-byte activations
//                                                             (Korthikanti et al. 2022, tensor
//                                                              parallel without sequence parallel)
// Blocks are preceded by the embedding (vocabulary and positions) and followed by the final
// LayerNorm and the logits, which reuse the embedding's weight (a copy on the last stage when
// the network is pipelined, as Megatron-LM keeps it).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace gearbox::comm::plan {

struct TransformerSpec {
  std::string name;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn_hidden = 0;  // 0: 4 x hidden
  int64_t vocab = 0;
  int64_t seq = 0;
  int64_t global_batch = 0;  // sequences per optimizer step, over all data-parallel ranks
  // Mixed-precision training stores bf16/fp16 weights, gradients and activations (2 bytes) and
  // keeps fp32 master weights and Adam's two moments in the optimizer (12 bytes per parameter);
  // fp32 training stores 4-byte weights, gradients and activations and 8 bytes of moments.
  int dtype_bytes = 2;
  // The logits reuse the embedding's table (GPT's tying, Megatron-LM's default); false: the
  // head has a vocab x hidden weight of its own (more parameters, gradients and optimizer state).
  bool tied_embeddings = true;

  int64_t ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int optimizer_bytes_per_param() const { return dtype_bytes == 2 ? 12 : 8; }
  int64_t params_per_block() const;
  int64_t embedding_params() const;  // vocabulary + positions
  int64_t head_params() const;       // final LayerNorm (+ the logits' weight when not tied)
  int64_t total_params() const;      // blocks + embedding + head
};

// One unit of work a pipeline stage can hold: the embedding, a transformer block or the head.
// Costs are per micro-batch of `micro_batch` sequences with the tensor-parallel degree applied.
struct Op {
  std::string name;
  double flops = 0;  // forward
  double bytes = 0;  // forward memory traffic (reads + writes)
  bool matmul = false;
};

struct Unit {
  enum class Kind { kEmbedding, kBlock, kHead } kind = Kind::kBlock;
  int64_t params = 0;   // whole (before the tensor-parallel split)
  std::vector<Op> ops;  // forward ops, already divided by the tensor-parallel degree
  // Tensor-parallel allreduces per micro-batch (none when tp = 1): of one activation [b, s, h]
  // in the forward and in the backward pass, and of one float per token (the vocabulary-
  // parallel cross-entropy's max, sum of exponentials and target logit) in the forward pass.
  int tp_allreduces_forward = 0, tp_allreduces_backward = 0, tp_token_allreduces = 0;
  double activation_bytes = 0;  // kept for the backward pass, per micro-batch, per rank
  double input_bytes = 0;       // the unit's input, per micro-batch (kept under recomputation)
};

// The units of the network in order, costed for one micro-batch on a tensor-parallel group of
// `tp` ranks.
std::vector<Unit> units(const TransformerSpec& spec, int64_t micro_batch, int tp);

// Forward FLOPs of the whole network for `batch` sequences (no split), for tests and reports.
double forward_flops(const TransformerSpec& spec, int64_t batch);

// Built-in networks: gpt-1.3b (alias gpt-1b), gpt-13b, gpt-175b (GPT-3's configurations) and
// gpt-tiny (a small one for tests). INVALID: PLAN_SPEC_INVALID naming the known ones.
Result<TransformerSpec> builtin_network(const std::string& name);
std::vector<std::string> builtin_network_names();

// A network from JSON: {"name", "layers", "hidden", "heads", "vocab", "seq", "global_batch",
// optional "ffn_hidden", "dtype": "bf16"|"fp16"|"fp32", "tied_embeddings": true|false}. PLAN_SPEC_INVALID on a missing
// key, a wrong type or an impossible value (hidden not divisible by heads, a count < 1).
Result<TransformerSpec> network_from_json(const nlohmann::json& j, const std::string& where);
// A built-in name, or a JSON file.
Result<TransformerSpec> load_network(const std::string& name_or_path);

nlohmann::json network_to_json(const TransformerSpec& spec);

}  // namespace gearbox::comm::plan

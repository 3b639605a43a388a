#include "comm/plan/network.h"

#include <fstream>
#include <map>
#include <sstream>

namespace gearbox::comm::plan {

int64_t TransformerSpec::params_per_block() const {
  const int64_t h = hidden, f = ffn();
  // QKV (3h^2 + 3h), output projection (h^2 + h), MLP (2hf + f + h), two LayerNorms (4h).
  return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
}

int64_t TransformerSpec::embedding_params() const { return vocab * hidden + seq * hidden; }

int64_t TransformerSpec::head_params() const { return 2 * hidden + (tied_embeddings ? 0 : vocab * hidden); }

int64_t TransformerSpec::total_params() const {
  return layers * params_per_block() + embedding_params() + head_params();
}

namespace {

Unit block_unit(const TransformerSpec& sp, int64_t b, int t) {
  const double e = sp.dtype_bytes, T = double(b) * sp.seq, s = double(sp.seq), h = double(sp.hidden),
               f = double(sp.ffn()), a = double(sp.heads);
  const double scores = double(b) * (a / t) * s * s;  // attention probabilities per rank
  Unit u;
  u.kind = Unit::Kind::kBlock;
  u.params = sp.params_per_block();
  u.ops = {
      {"layer_norm_1", 5 * T * h, e * 2 * T * h, false},
      {"qkv", 2 * T * h * 3 * h / t, e * (T * h + 3 * h * h / t + 3 * T * h / t), true},
      {"attention_scores", 2 * T * s * h / t, e * (2 * T * h / t + scores), true},
      {"softmax", 5 * scores, e * 2 * scores, false},
      {"attention_context", 2 * T * s * h / t, e * (scores + 2 * T * h / t), true},
      {"projection", 2 * T * h * h / t, e * (T * h / t + h * h / t + T * h), true},
      {"residual_layer_norm_2", 8 * T * h, e * 5 * T * h, false},
      {"mlp_up", 2 * T * h * f / t, e * (T * h + h * f / t + T * f / t), true},
      {"gelu", 8 * T * f / t, e * 2 * T * f / t, false},
      {"mlp_down", 2 * T * f * h / t, e * (T * f / t + f * h / t + T * h), true},
      {"residual", T * h, e * 3 * T * h, false},
  };
  // Forward: the row-parallel projection's and MLP's sums; backward: the input gradients of the
  // column-parallel QKV and MLP.
  u.tp_allreduces_forward = u.tp_allreduces_backward = t > 1 ? 2 : 0;
  // Korthikanti et al.: s b h (10 + 24/t + 5 a s / (h t)) bytes with 2-byte activations.
  u.activation_bytes = s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t)) * (e / 2);
  u.input_bytes = e * T * h;
  return u;
}

Unit embedding_unit(const TransformerSpec& sp, int64_t b, int t) {
  const double e = sp.dtype_bytes, T = double(b) * sp.seq, h = double(sp.hidden);
  Unit u;
  u.kind = Unit::Kind::kEmbedding;
  u.params = sp.embedding_params();
  u.ops = {{"embedding", T * h, e * 3 * T * h, false}};
  u.tp_allreduces_forward = t > 1 ? 1 : 0;  // vocabulary-parallel lookup: partial rows summed (no backward one)
  u.activation_bytes = e * T * h;
  u.input_bytes = 8 * T;  // int64 token ids
  return u;
}

Unit head_unit(const TransformerSpec& sp, int64_t b, int t) {
  const double e = sp.dtype_bytes, T = double(b) * sp.seq, h = double(sp.hidden), V = double(sp.vocab);
  Unit u;
  u.kind = Unit::Kind::kHead;
  u.params = sp.head_params();  // the final LayerNorm, and the logits' weight unless tied to the embedding
  u.ops = {
      {"layer_norm_final", 5 * T * h, e * 2 * T * h, false},
      {"logits", 2 * T * h * V / t, e * (T * h + V * h / t + T * V / t), true},
      {"cross_entropy", 5 * T * V / t, 4 * 2 * T * V / t, false},  // fp32 logits
  };
  // The column-parallel logits' input gradient (backward); the vocabulary-parallel
  // cross-entropy reduces three floats per token (forward).
  u.tp_allreduces_backward = t > 1 ? 1 : 0;
  u.tp_token_allreduces = t > 1 ? 3 : 0;
  u.activation_bytes = 4 * T * V / t + e * T * h;
  u.input_bytes = e * T * h;
  return u;
}

Status invalid(const std::string& where, const std::string& what) {
  return make_error(ErrorCode::PLAN_SPEC_INVALID, where, ": ", what);
}

}  // namespace

std::vector<Unit> units(const TransformerSpec& spec, int64_t micro_batch, int tp) {
  std::vector<Unit> out;
  out.reserve(size_t(spec.layers) + 2);
  out.push_back(embedding_unit(spec, micro_batch, tp));
  Unit block = block_unit(spec, micro_batch, tp);
  for (int64_t i = 0; i < spec.layers; ++i) out.push_back(block);
  out.push_back(head_unit(spec, micro_batch, tp));
  return out;
}

double forward_flops(const TransformerSpec& spec, int64_t batch) {
  double total = 0;
  for (const Unit& u : units(spec, batch, 1))
    for (const Op& op : u.ops)
      if (op.matmul) total += op.flops;
  return total;
}

std::vector<std::string> builtin_network_names() { return {"gpt-tiny", "gpt-1.3b", "gpt-13b", "gpt-175b"}; }

Result<TransformerSpec> builtin_network(const std::string& name) {
  // GPT-3's configurations (Brown et al. 2020, table 2.1), with the hidden sizes and head
  // counts the public reimplementations use where the table's columns disagree (13B: 5120;
  // 1.3B: 16 heads of 128). Global batch in sequences of 2,048 tokens.
  static const std::map<std::string, TransformerSpec> known = {
      {"gpt-tiny", {"gpt-tiny", 4, 256, 8, 0, 1024, 128, 64, 2}},
      {"gpt-1.3b", {"gpt-1.3b", 24, 2048, 16, 0, 50257, 2048, 512, 2}},
      {"gpt-13b", {"gpt-13b", 40, 5120, 40, 0, 50257, 2048, 1024, 2}},
      {"gpt-175b", {"gpt-175b", 96, 12288, 96, 0, 50257, 2048, 1536, 2}},
  };
  std::string key = name == "gpt-1b" ? "gpt-1.3b" : name;
  auto it = known.find(key);
  if (it == known.end()) {
    std::string all;
    for (const auto& n : builtin_network_names()) all += (all.empty() ? "" : ", ") + n;
    return invalid("network '" + name + "'", "is neither a built-in network (" + all + ") nor a JSON file");
  }
  return it->second;
}

Result<TransformerSpec> network_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return invalid(where, "the network must be a JSON object");
  TransformerSpec sp;
  // json::value() throws (and so aborts the process: nothing catches) when the key holds
  // another type, e.g. "name": 6; found by fuzz/plan_network.cc.
  if (j.contains("name") && !j["name"].is_string()) return invalid(where, "\"name\" must be a string");
  sp.name = j.value("name", std::string("network"));
  auto count = [&](const char* key, int64_t* out, bool required) -> Status {
    if (!j.contains(key)) {
      if (required) return invalid(where, std::string("missing key \"") + key + "\"");
      return Status::OK();
    }
    const auto& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 40))
      return invalid(where, std::string("\"") + key + "\" must be an integer >= 1, not " + v.dump());
    *out = v.get<int64_t>();
    return Status::OK();
  };
  GBX_RETURN_IF_ERROR(count("layers", &sp.layers, true));
  GBX_RETURN_IF_ERROR(count("hidden", &sp.hidden, true));
  GBX_RETURN_IF_ERROR(count("heads", &sp.heads, true));
  GBX_RETURN_IF_ERROR(count("vocab", &sp.vocab, true));
  GBX_RETURN_IF_ERROR(count("seq", &sp.seq, true));
  GBX_RETURN_IF_ERROR(count("global_batch", &sp.global_batch, true));
  GBX_RETURN_IF_ERROR(count("ffn_hidden", &sp.ffn_hidden, false));
  if (sp.hidden % sp.heads != 0)
    return invalid(where, "\"hidden\" (" + std::to_string(sp.hidden) + ") must be divisible by \"heads\" (" +
                              std::to_string(sp.heads) + ")");
  std::string dtype = "bf16";
  if (j.contains("dtype")) {
    if (!j["dtype"].is_string()) return invalid(where, "\"dtype\" must be \"bf16\", \"fp16\" or \"fp32\"");
    dtype = j["dtype"].get<std::string>();
  }
  if (dtype == "bf16" || dtype == "fp16") sp.dtype_bytes = 2;
  else if (dtype == "fp32") sp.dtype_bytes = 4;
  else return invalid(where, "\"dtype\" must be \"bf16\", \"fp16\" or \"fp32\", not \"" + dtype + "\"");
  if (j.contains("tied_embeddings")) {
    if (!j["tied_embeddings"].is_boolean()) return invalid(where, "\"tied_embeddings\" must be true or false");
    sp.tied_embeddings = j["tied_embeddings"].get<bool>();
  }
  return sp;
}

Result<TransformerSpec> load_network(const std::string& name_or_path) {
  std::ifstream in(name_or_path);
  if (!in) return builtin_network(name_or_path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid(name_or_path, "not valid JSON");
  return network_from_json(j, name_or_path);
}

nlohmann::json network_to_json(const TransformerSpec& sp) {
  return {{"name", sp.name},
          {"layers", sp.layers},
          {"hidden", sp.hidden},
          {"heads", sp.heads},
          {"ffn_hidden", sp.ffn()},
          {"vocab", sp.vocab},
          {"seq", sp.seq},
          {"global_batch", sp.global_batch},
          {"dtype", sp.dtype_bytes == 2 ? "bf16" : "fp32"},
          {"tied_embeddings", sp.tied_embeddings},
          {"parameters", sp.total_params()}};
}

}  // namespace gearbox::comm::plan

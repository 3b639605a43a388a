#include "tools/plan_model.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "graph/onnx_importer.h"

namespace gearbox::cli {
namespace {

using comm::plan::TransformerSpec;

Status unsupported(const Model& m, const std::string& what) {
  return make_error(ErrorCode::PLAN_MODEL_UNSUPPORTED, "'", m.path,
                    "' is not a transformer language model gearbox plan can read: ", what);
}

// The value's dims when all are known.
std::optional<std::vector<int64_t>> static_dims(const Value* v) {
  if (!v || v->type.kind != ValueType::Kind::Tensor || !v->type.shape.ranked) return std::nullopt;
  std::vector<int64_t> d;
  for (const Dim& x : v->type.shape.dims) {
    if (!x.known()) return std::nullopt;
    d.push_back(x.value);
  }
  return d;
}

bool is_float_weight(const Value* v) {
  return v && v->is_initializer && is_float(v->initializer.dtype()) && v->initializer.dims().size() == 2;
}

// A rank-2 weight of a MatMul (its B) or a Gemm, as [in, out]; the Value itself, and whether it is
// stored [out, in] (Gemm's transB).
struct Projection {
  const Value* weight = nullptr;
  int64_t in = 0, out = 0;
  bool transposed = false;
};
std::optional<Projection> projection(const Node& n) {
  if ((n.op_type != "MatMul" && n.op_type != "Gemm") || !n.domain.empty() || n.inputs.size() < 2) return std::nullopt;
  const Value* w = n.inputs[1];
  if (!is_float_weight(w)) return std::nullopt;
  bool trans = false;
  if (n.op_type == "Gemm")
    if (auto it = n.attrs.find("transB"); it != n.attrs.end()) trans = it->second.i != 0;
  const Dims& d = w->initializer.dims();
  return Projection{w, trans ? d[1] : d[0], trans ? d[0] : d[1], trans};
}

// Whether `w` ([rows, cols] or [cols, rows] when `transposed`) holds table^T: the copy of a tied
// weight that torch.onnx.export writes for the logits.
bool is_transposed_copy(const Tensor& table, const Tensor& w, bool transposed) {
  if (w.dtype() != table.dtype() || w.numel() != table.numel()) return false;
  const int64_t v = table.dims()[0], h = table.dims()[1];
  const size_t es = dtype_size(table.dtype());
  const auto* t = static_cast<const unsigned char*>(table.raw());
  const auto* c = static_cast<const unsigned char*>(w.raw());
  if (transposed) return std::memcmp(t, c, table.nbytes()) == 0;  // Gemm transB: stored [V, h], as the table
  for (int64_t i = 0; i < v; ++i)
    for (int64_t j = 0; j < h; ++j)
      if (std::memcmp(t + size_t(i * h + j) * es, c + size_t(j * v + i) * es, es) != 0) return false;
  return true;
}

}  // namespace

Result<TransformerSpec> transformer_from_model(const Model& model, int64_t global_batch) {
  const Graph& g = *model.graph;
  // The token embedding: the largest float [V, h] table gathered by an integer graph input.
  const Node* embedding = nullptr;
  for (const auto& n : g.nodes) {
    if (n->op_type != "Gather" || !n->domain.empty() || n->inputs.size() < 2) continue;
    const Value *table = n->inputs[0], *ids = n->inputs[1];
    if (!is_float_weight(table) || !ids || ids->producer || ids->is_initializer || !is_integer(ids->type.dtype))
      continue;
    if (!embedding || table->initializer.dims()[0] > embedding->inputs[0]->initializer.dims()[0]) embedding = n.get();
  }
  if (!embedding)
    return unsupported(model, "no token embedding (a Gather of a [vocab, hidden] table by an integer input)");
  const Tensor& table = embedding->inputs[0]->initializer;
  TransformerSpec sp;
  sp.name = model.path.substr(model.path.find_last_of('/') + 1);
  sp.vocab = table.dims()[0], sp.hidden = table.dims()[1];
  sp.dtype_bytes = dtype_size(table.dtype()) == 2 ? 2 : 4;
  const auto ids = static_dims(embedding->inputs[1]);
  if (!ids || ids->size() != 2)
    return unsupported(model, "the token ids input '" + embedding->inputs[1]->name +
                                  "' has no static [batch, seq] shape (export with fixed input shapes)");
  const int64_t batch = (*ids)[0];
  sp.seq = (*ids)[1];
  if (batch < 1 || sp.seq < 1) return unsupported(model, "the token ids input has an empty dimension");
  sp.global_batch = global_batch > 0 ? global_batch : batch;

  // One attention softmax per block: scores [b, H, s, s] or [b H, s, s].
  int64_t heads = 0;
  for (const auto& n : g.nodes) {
    if (n->op_type != "Softmax" || !n->domain.empty() || n->inputs.empty()) continue;
    const auto d = static_dims(n->inputs[0]);
    if (!d || d->size() < 3 || (*d)[d->size() - 1] != sp.seq || (*d)[d->size() - 2] != sp.seq) continue;
    int64_t lead = 1;
    for (size_t i = 0; i + 2 < d->size(); ++i) lead *= std::min<int64_t>((*d)[i], int64_t{1} << 20);  // no overflow
    const int64_t h = lead % batch == 0 ? lead / batch : 0;
    if (h < 1 || (heads != 0 && h != heads))
      return unsupported(model, "the attention scores of '" + n->name + "' do not split into heads of the batch " +
                                    std::to_string(batch));
    heads = h;
    ++sp.layers;
  }
  if (sp.layers == 0)
    return unsupported(model, "no attention softmax over [seq, seq] = [" + std::to_string(sp.seq) + ", " +
                                  std::to_string(sp.seq) + "] scores (with static shapes)");
  if (sp.hidden % heads != 0)
    return unsupported(model,
                       std::to_string(heads) + " heads do not divide the hidden size " + std::to_string(sp.hidden));
  sp.heads = heads;

  // The MLP's width and the logits' weight, from the [h, F] projections.
  std::map<int64_t, int> widths;
  std::optional<Projection> logits;
  for (const auto& n : g.nodes) {
    const auto p = projection(*n);
    if (!p || p->in != sp.hidden) continue;
    if (p->out == sp.vocab) logits = p;
    else if (p->out != sp.hidden && p->out != 3 * sp.hidden) ++widths[p->out];
  }
  // The table used directly as the logits' weight, through a Transpose.
  bool tied = false;
  for (const auto& n : g.nodes)
    if (n->op_type == "Transpose" && !n->inputs.empty() && n->inputs[0] == embedding->inputs[0]) tied = true;
  if (logits) tied = tied || is_transposed_copy(table, logits->weight->initializer, logits->transposed);
  if (!logits && !tied)
    return unsupported(model, "no logits over the vocabulary (an [" + std::to_string(sp.hidden) + ", " +
                                  std::to_string(sp.vocab) + "] weight)");
  sp.tied_embeddings = tied;
  if (widths.empty()) return unsupported(model, "no MLP (an [hidden, ffn] weight other than [h, h] and [h, 3h])");
  sp.ffn_hidden = std::max_element(widths.begin(), widths.end(), [](const auto& a, const auto& b) {
                    return a.second < b.second;
                  })->first;
  // The JSON description's checks (counts in range, heads dividing the hidden size), once.
  return comm::plan::network_from_json(comm::plan::network_to_json(sp), model.path);
}

Result<TransformerSpec> load_plan_network(const std::string& name_or_path, int64_t global_batch) {
  if (!name_or_path.ends_with(".onnx")) {
    GBX_ASSIGN_OR_RETURN(TransformerSpec sp, comm::plan::load_network(name_or_path));
    if (global_batch > 0) sp.global_batch = global_batch;
    return sp;
  }
  GBX_ASSIGN_OR_RETURN(Model m, import_onnx_file(name_or_path));
  return transformer_from_model(m, global_batch);
}

}  // namespace gearbox::cli

// nn::ParallelMesh and nn::parse_parallel_layout: the framework applying the layout gearbox plan
// chose (comm/plan, docs/parallel.md), in the planner's rank order.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "frontend/tensor_impl.h"
#include "gearbox/nn_distributed.hpp"

namespace gbx::nn {

using gearbox::ErrorCode;
using nlohmann::json;

namespace {

[[noreturn]] void bad_layout(const std::string& what) {
  throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "parallel layout: ", what));
}

int64_t count(const json& j, const char* key, int64_t min, int64_t def, bool required) {
  if (!j.contains(key)) {
    if (required) bad_layout(std::string("missing key \"") + key + "\"");
    return def;
  }
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > (int64_t{1} << 30))
    bad_layout(std::string("\"") + key + "\" must be an integer >= " + std::to_string(min) + ", not " + v.dump());
  return v.get<int64_t>();
}

std::vector<int> ints(const json& j, const char* key) {
  std::vector<int> out;
  if (!j.contains(key)) return out;
  const json& v = j.at(key);
  if (!v.is_array()) bad_layout(std::string("\"") + key + "\" must be a list of integers");
  for (const json& x : v) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > (int64_t{1} << 30))
      bad_layout(std::string("\"") + key + "\" must hold integers >= 0, not " + x.dump());
    out.push_back(x.get<int>());
  }
  return out;
}

}  // namespace

bool ParallelLayout::runs_whole(int unit) const {
  return std::binary_search(replicated_units.begin(), replicated_units.end(), unit);
}

ParallelLayout parse_parallel_layout(const std::string& json_text) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) bad_layout("not a JSON object");
  // gearbox plan --json's document -> its chosen candidate -> the candidate's layout.
  if (doc.contains("chosen")) doc = doc["chosen"];
  if (doc.is_object() && doc.contains("layout")) doc = doc["layout"];
  if (!doc.is_object()) bad_layout("no layout object");
  ParallelLayout l;
  l.dp = int(count(doc, "dp", 1, 1, true));
  l.tp = int(count(doc, "tp", 1, 1, true));
  l.pp = int(count(doc, "pp", 1, 1, true));
  l.micro_batches = count(doc, "micro_batches", 1, 1, false);
  l.zero = int(count(doc, "zero", 0, 0, false));
  if (l.zero > 2) bad_layout("\"zero\" must be 0, 1 or 2");
  if (doc.contains("schedule")) {
    const json& s = doc["schedule"];
    if (s == "1f1b") l.schedule = PipelineSchedule::OneFOneB;
    else if (s == "gpipe") l.schedule = PipelineSchedule::GPipe;
    else bad_layout("\"schedule\" must be \"1f1b\" or \"gpipe\", not " + s.dump());
  }
  l.stage_units = ints(doc, "stage_units");
  l.replicated_units = ints(doc, "replicated_units");
  if (!std::is_sorted(l.replicated_units.begin(), l.replicated_units.end()) ||
      std::adjacent_find(l.replicated_units.begin(), l.replicated_units.end()) != l.replicated_units.end())
    bad_layout("\"replicated_units\" must be ascending");
  if (l.pp > 1 && l.stage_units.size() != size_t(l.pp))
    bad_layout("\"stage_units\" must list the units of each of the " + std::to_string(l.pp) + " stages");
  for (int u : l.stage_units)
    if (u < 1) bad_layout("a stage holds no unit");
  return l;
}

ParallelMesh::ParallelMesh(std::shared_ptr<ProcessGroup> world, ParallelLayout layout)
    : world_(std::move(world)), layout_(std::move(layout)) {
  if (!world_) bad_layout("ParallelMesh needs a world group");
  const int tp = layout_.tp, dp = layout_.dp, pp = layout_.pp, n = world_->size();
  if (layout_.devices() != n)
    bad_layout("dp x tp x pp = " + std::to_string(layout_.devices()) + " is not the world's " + std::to_string(n) +
               " ranks");
  if (pp > 1 && layout_.stage_units.size() != size_t(pp))
    bad_layout("the stage cut lists " + std::to_string(layout_.stage_units.size()) + " stages, not " +
               std::to_string(pp));
  const int rank = world_->rank();
  tensor_rank_ = rank % tp, data_rank_ = (rank / tp) % dp, stage_ = rank / (tp * dp);
  // Every rank makes every group of each kind, in the same order; it keeps the one it is in.
  // Group g of a kind enumerates the other two indices; i runs along the group's own axis.
  auto make = [&](int size, auto member) -> std::shared_ptr<ProcessGroup> {
    std::shared_ptr<ProcessGroup> mine;
    if (size == 1) return mine;
    for (int g = 0; g < n / size; ++g) {
      std::vector<int> ranks;
      for (int i = 0; i < size; ++i) ranks.push_back(member(g, i));
      std::sort(ranks.begin(), ranks.end());
      if (auto pg = world_->new_group(ranks)) mine = pg;
    }
    return mine;
  };
  tensor_ = make(tp, [&](int g, int i) { return g * tp + i; });
  data_ = make(dp, [&](int g, int i) { return g % tp + tp * (i + dp * (g / tp)); });
  pipeline_ = make(pp, [&](int g, int i) { return g % tp + tp * (g / tp + dp * i); });
  for (int s = 0; s < stage_ && s < int(layout_.stage_units.size()); ++s) first_unit_ += layout_.stage_units[size_t(s)];
  unit_count_ = layout_.stage_units.empty() ? -1 : layout_.stage_units[size_t(stage_)];
}

std::shared_ptr<ProcessGroup> ParallelMesh::tensor_group_for(int unit) const {
  return layout_.runs_whole(unit) ? nullptr : tensor_;
}

PipelineOptions ParallelMesh::pipeline_options() const { return {layout_.micro_batches, layout_.schedule}; }

}  // namespace gbx::nn

// nn::ParallelMesh and nn::parse_parallel_layout: the framework applying the layout gearbox plan
// chose (comm/plan, docs/parallel.md), in the planner's rank order.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "comm/plan/cost_model.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_distributed.hpp"

namespace gbx::nn {

using gearbox::ErrorCode;
using nlohmann::json;
namespace plan = gearbox::comm::plan;

namespace {

[[noreturn]] void bad_layout(const std::string& what) {
  throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "parallel layout: ", what));
}

}  // namespace

bool ParallelLayout::runs_whole(int unit) const {
  return std::binary_search(replicated_units.begin(), replicated_units.end(), unit);
}

ParallelLayout parse_parallel_layout(const std::string& json_text) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    throw_status(gearbox::make_error(ErrorCode::PLAN_SPEC_INVALID, "parallel layout: not a JSON object"));
  // gearbox plan --json's document -> its chosen candidate -> the candidate's layout.
  if (doc.contains("chosen")) doc = doc["chosen"];
  if (doc.is_object() && doc.contains("layout")) doc = doc["layout"];
  // The format is the planner's (layout_to_json): read with its reader.
  auto read = plan::layout_from_json(doc, "parallel layout");
  if (!read.ok()) throw_status(read.status());
  const plan::Layout& p = *read;
  ParallelLayout l;
  l.dp = p.dp, l.tp = p.tp, l.pp = p.pp, l.micro_batches = p.micro_batches, l.zero = p.zero;
  l.schedule = p.schedule == plan::Schedule::kGPipe ? PipelineSchedule::GPipe : PipelineSchedule::OneFOneB;
  l.stage_units = p.stage_units, l.replicated_units = p.replicated_units;
  return l;
}

ParallelMesh::ParallelMesh(std::shared_ptr<ProcessGroup> world, ParallelLayout layout)
    : world_(std::move(world)), layout_(std::move(layout)) {
  if (!world_) bad_layout("ParallelMesh needs a world group");
  const int tp = layout_.tp, dp = layout_.dp, pp = layout_.pp, n = world_->size();
  if (layout_.devices() != n)
    bad_layout("dp x tp x pp = " + std::to_string(layout_.devices()) + " is not the world's " + std::to_string(n) +
               " ranks");
  if (layout_.stage_units.size() != size_t(pp))
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
  for (int s = 0; s < stage_; ++s) first_unit_ += layout_.stage_units[size_t(s)];
  unit_count_ = layout_.stage_units[size_t(stage_)];
}

std::shared_ptr<ProcessGroup> ParallelMesh::tensor_group_for(int unit) const {
  return layout_.runs_whole(unit) ? nullptr : tensor_;
}

PipelineOptions ParallelMesh::pipeline_options() const { return {layout_.micro_batches, layout_.schedule}; }

}  // namespace gbx::nn

#include "runtime/accuracy_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "base/logging.h"
#include "base/strings.h"
#include "runtime/precision.h"
#include "runtime/precision_compare.h"

namespace gearbox {
namespace {

Status invalid(std::string_view text, const std::string& why) {
  return make_error(ErrorCode::ACCURACY_BUDGET_INVALID, "--accuracy-budget '", text, "': ", why,
                    "; write it like cosine>=0.9999,top1>=0.995 (metrics: cosine>=X and top1>=X with X in [0, 1], "
                    "relative<=X with X >= 0)");
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// The index of the largest element of row `r` (of `n` elements) of a float tensor.
int64_t argmax_row(const Tensor& t, int64_t r, int64_t n) {
  int64_t best = 0;
  double best_v = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const double v = t.at_double(r * n + i);
    if (v > best_v || (std::isnan(v) && !std::isnan(best_v))) {
      best_v = v;
      best = i;
    }
  }
  return best;
}

using Clock = std::chrono::steady_clock;

double millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string num(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

std::string AccuracyBudget::text() const {
  std::vector<std::string> parts;
  if (cosine) parts.push_back("cosine>=" + num(*cosine));
  if (top1) parts.push_back("top1>=" + num(*top1));
  if (relative) parts.push_back("relative<=" + num(*relative));
  return join(parts, ",");
}

Result<AccuracyBudget> parse_accuracy_budget(std::string_view text) {
  AccuracyBudget b;
  bool any = false;
  for (const std::string& raw : split_list(std::string(text))) {
    const std::string term = trim(raw);
    if (term.empty()) continue;
    const size_t ge = term.find(">="), le = term.find("<=");
    const size_t at = ge != std::string::npos ? ge : le;
    if (at == std::string::npos) return invalid(text, "'" + term + "' is not METRIC>=VALUE or METRIC<=VALUE");
    const std::string metric = trim(term.substr(0, at)), value = trim(term.substr(at + 2));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !std::isfinite(v)) return invalid(text, "'" + value + "' is not a number");
    const bool at_least = ge != std::string::npos;
    std::optional<double>* slot = metric == "cosine"     ? &b.cosine
                                  : metric == "top1"     ? &b.top1
                                  : metric == "relative" ? &b.relative
                                                         : nullptr;
    if (!slot) return invalid(text, "'" + metric + "' is not a metric");
    if (slot->has_value()) return invalid(text, "'" + metric + "' is named twice");
    if (metric == "relative") {
      if (at_least) return invalid(text, "relative is an error: write relative<=X");
      if (v < 0) return invalid(text, "relative<=" + value + " is below 0");
    } else {
      if (!at_least) return invalid(text, metric + " is an agreement: write " + metric + ">=X");
      if (v < 0 || v > 1) return invalid(text, metric + ">=" + value + " is outside [0, 1]");
    }
    *slot = v;
    any = true;
  }
  if (!any) return invalid(text, "it names no metric");
  return b;
}

bool AccuracyMeasure::meets(const AccuracyBudget& b) const {
  return (!b.cosine || cosine >= *b.cosine) && (!b.top1 || rows == 0 || top1 >= *b.top1) &&
         (!b.relative || relative <= *b.relative);
}

std::string AccuracyMeasure::describe(const AccuracyBudget& b) const {
  std::vector<std::string> parts;
  auto yes = [](bool ok) { return ok ? "yes" : "no"; };
  if (b.cosine)
    parts.push_back(fmt::format("cosine {:.6f} (>= {}: {})", cosine, num(*b.cosine), yes(cosine >= *b.cosine)));
  if (b.top1) {
    if (rows == 0) parts.push_back("top1: no output has classes (not counted)");
    else
      parts.push_back(
          fmt::format("top1 {:.4f} of {} rows (>= {}: {})", top1, rows, num(*b.top1), yes(top1 >= *b.top1)));
  }
  if (b.relative)
    parts.push_back(
        fmt::format("relative {} (<= {}: {})", num(relative), num(*b.relative), yes(relative <= *b.relative)));
  return join(parts, ", ");
}

AccuracyMeasure measure_accuracy(const std::vector<std::vector<Tensor>>& fp32,
                                 const std::vector<std::vector<Tensor>>& reduced) {
  AccuracyMeasure m;
  size_t agree = 0;
  for (size_t s = 0; s < fp32.size() && s < reduced.size(); ++s)
    for (size_t o = 0; o < fp32[s].size() && o < reduced[s].size(); ++o) {
      const Tensor& ref = fp32[s][o];
      const Tensor& got = reduced[s][o];
      if (!is_float(ref.dtype()) || got.dtype() != ref.dtype() || got.dims() != ref.dims()) continue;
      const ValueError e = compare_values("", got, ref);
      m.cosine = std::isnan(e.cosine) ? 0 : std::min(m.cosine, e.cosine);
      m.relative = std::max(m.relative, e.relative);
      const int64_t classes = ref.dims().empty() ? 0 : ref.dims().back();
      if (classes < 2) continue;
      const int64_t rows = ref.numel() / classes;
      for (int64_t r = 0; r < rows; ++r) agree += argmax_row(got, r, classes) == argmax_row(ref, r, classes);
      m.rows += static_cast<size_t>(rows);
    }
  m.top1 = m.rows ? static_cast<double>(agree) / static_cast<double>(m.rows) : 1;
  return m;
}

std::vector<std::string> BudgetResult::kept_nodes() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < kept && i < ranking.size(); ++i) names.push_back(ranking[i].node);
  return names;
}

std::string BudgetResult::summary() const {
  std::string s = fmt::format("accuracy budget {} ({}, {} calibration samples):\n", budget.text(), mode, samples);
  s += fmt::format("  without fallback: {} of the lowered nodes in {}: {}\n", lowered, mode, without.describe(budget));
  if (kept == 0) {
    s += "  met with no node kept in fp32\n";
  } else {
    s += fmt::format("  kept in fp32: {} of {} lowered nodes, the most sensitive first ({} {}):\n", kept, lowered,
                     tries.size(), tries.size() == 1 ? "try" : "tries");
    for (size_t i = 0; i < kept && i < ranking.size(); ++i) {
      const Fallback& f = ranking[i];
      s += fmt::format(
          "    {} ({}): alone in the reduced format, outputs' cosine {:.7f}; its own error {} is {}x "
          "what it was given\n",
          f.node, f.op_type, f.alone.cosine, num(f.error), num(f.gain));
    }
    s += fmt::format("  achieved: {}\n", achieved.describe(budget));
  }
  if (all_kept)
    s += "  the budget holds only with every lowered node in fp32: the model computes as force_fp32 does (loosen "
         "the budget for any speed-up)\n";
  if (fp32_ms > 0 && reduced_ms > 0)
    s += fmt::format("  speed: {:.3g} ms against force_fp32's {:.3g} ms ({:.2f}x; medians of {} alternating runs)\n",
                     reduced_ms, fp32_ms, fp32_ms / reduced_ms, timing_runs);
  return s;
}

nlohmann::json BudgetResult::to_json() const {
  auto measure_json = [&](const AccuracyMeasure& m) {
    return nlohmann::json{{"cosine", m.cosine},
                          {"top1", m.top1},
                          {"top1_rows", m.rows},
                          {"relative", m.relative},
                          {"meets", m.meets(budget)}};
  };
  nlohmann::json kept_list = nlohmann::json::array();
  for (size_t i = 0; i < kept && i < ranking.size(); ++i)
    kept_list.push_back({{"node", ranking[i].node},
                         {"op_type", ranking[i].op_type},
                         {"from", ranking[i].from},
                         {"gain", ranking[i].gain},
                         {"alone", measure_json(ranking[i].alone)},
                         {"error", ranking[i].error}});
  nlohmann::json tries_json = nlohmann::json::array();
  for (const BudgetTry& t : tries)
    tries_json.push_back({{"kept", t.kept}, {"met", t.met}, {"measure", measure_json(t.measure)}});
  return {{"budget", budget.text()},
          {"mode", mode},
          {"samples", samples},
          {"lowered", lowered},
          {"without_fallback", measure_json(without)},
          {"kept_fp32", kept_list},
          {"achieved", measure_json(achieved)},
          {"met", met},
          {"all_kept", all_kept},
          {"tries", tries_json},
          {"fp32_ms", fp32_ms},
          {"reduced_ms", reduced_ms}};
}

namespace {

// Every sample through one session: its outputs, in the session's output order.
Result<std::vector<std::vector<Tensor>>> run_all(const Session& session,
                                                 const std::vector<std::map<std::string, Tensor>>& calibration,
                                                 Progress* progress, std::string_view phase) {
  progress_begin(progress, phase, calibration.size());
  std::vector<std::vector<Tensor>> out;
  out.reserve(calibration.size());
  for (size_t i = 0; i < calibration.size(); ++i) {
    auto r = session.run(calibration[i]);
    if (!r.ok()) return r.status().with_context(fmt::format("calibration sample {}: ", i));
    out.push_back(std::move(r).value());
    progress_advance(progress, i + 1);
  }
  return out;
}

}  // namespace

Result<BudgetResult> fit_accuracy_budget(const SessionFactory& make_session, const SessionOptions& reduced,
                                         const AccuracyBudget& budget,
                                         const std::vector<std::map<std::string, Tensor>>& calibration,
                                         const BudgetOptions& options) {
  if (calibration.empty())
    return make_error(ErrorCode::USAGE,
                      "the accuracy budget needs calibration samples (--calibration DIR or "
                      "--calibration-random N)");
  BudgetResult result;
  result.budget = budget;
  result.samples = calibration.size();
  SessionOptions fp32_options = reduced;
  fp32_options.precision = "force_fp32";
  fp32_options.keep_dtype.clear();
  fp32_options.keep_dtype_nodes.clear();
  fp32_options.modify_mixlist.clear();
  GBX_ASSIGN_OR_RETURN(std::unique_ptr<Session> fp32, make_session(fp32_options));
  GBX_ASSIGN_OR_RETURN(std::unique_ptr<Session> lowered, make_session(reduced));
  // The model passed onnx's checker when these two were built; the tries' sessions skip it.
  SessionOptions tried = reduced;
  tried.check_model = false;
  result.mode = lowered->model().precision_mode;
  if (result.mode.empty())
    return make_error(ErrorCode::USAGE,
                      "an accuracy budget needs a reduced --precision-mode (e.g. "
                      "allow_mix_precision_bf16): force_fp32 has nothing to keep");
  result.lowered = lowered->precision_report().lowered.size();
  GBX_ASSIGN_OR_RETURN(auto reference, run_all(*fp32, calibration, options.progress, "budget: fp32 reference"));
  GBX_ASSIGN_OR_RETURN(auto outputs, run_all(*lowered, calibration, options.progress, "budget: " + result.mode));
  result.without = measure_accuracy(reference, outputs);
  result.achieved = result.without;
  result.met = result.without.meets(budget);
  std::unique_ptr<Session> chosen = std::move(lowered);

  if (!result.met) {
    // Each lowered node's gain, the largest over the first samples (the report's why).
    const size_t rank_samples = std::min(options.rank_samples, calibration.size());
    std::map<std::string, Fallback> by_node;
    for (size_t s = 0; s < rank_samples; ++s) {
      GBX_ASSIGN_OR_RETURN(PrecisionComparison c, compare_precision(*fp32, *chosen, calibration[s]));
      for (const NodeError& n : c.nodes) {
        if (n.compute_dtype == DType::Undefined) continue;
        Fallback& f = by_node[n.node];
        f.node = n.node;
        f.op_type = n.op_type;
        f.from = n.from;
        const double gain = std::isfinite(n.gain) ? n.gain : std::numeric_limits<double>::max();
        if (gain >= f.gain) {
          f.gain = gain;
          f.error = n.error;
        }
      }
    }
    // The ranking: each node alone in the reduced format, measured on the first samples.
    const std::vector<std::map<std::string, Tensor>> rank_set(calibration.begin(), calibration.begin() + rank_samples);
    const std::vector<std::vector<Tensor>> rank_reference(reference.begin(), reference.begin() + rank_samples);
    progress_begin(options.progress, "budget: each layer alone", by_node.size());
    size_t ranked = 0;
    for (auto& [name, f] : by_node) {
      SessionOptions o = tried;
      for (const auto& [other, unused] : by_node)
        if (other != name) o.keep_dtype_nodes.push_back(other);
      GBX_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, make_session(o));
      GBX_ASSIGN_OR_RETURN(auto got, run_all(*session, rank_set, nullptr, ""));
      f.alone = measure_accuracy(rank_reference, got);
      result.ranking.push_back(f);
      progress_advance(options.progress, ++ranked);
    }
    // Most damaging alone first; ties by relative error, then in name order (a stable sort of
    // the map's order), so the same model gives the same choice.
    std::stable_sort(result.ranking.begin(), result.ranking.end(), [](const Fallback& a, const Fallback& b) {
      if (a.alone.cosine != b.alone.cosine) return a.alone.cosine < b.alone.cosine;
      return a.alone.relative > b.alone.relative;
    });

    // Tries: k = 1, 2, 4, ... until the budget holds, then the smallest k between.
    std::map<size_t, std::unique_ptr<Session>> sessions;
    auto attempt = [&](size_t k) -> Result<bool> {
      SessionOptions o = tried;
      for (size_t i = 0; i < k; ++i) o.keep_dtype_nodes.push_back(result.ranking[i].node);
      GBX_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, make_session(o));
      GBX_ASSIGN_OR_RETURN(auto got, run_all(*session, calibration, options.progress,
                                             fmt::format("budget: {} of {} nodes in fp32", k, result.ranking.size())));
      BudgetTry t{k, measure_accuracy(reference, got), false};
      t.met = t.measure.meets(budget);
      GBX_LOG_INFO("PRECISION", "accuracy budget: {} nodes kept in fp32: {}", k, t.measure.describe(budget));
      result.tries.push_back(t);
      if (t.met) sessions[k] = std::move(session);
      return t.met;
    };
    const size_t n = result.ranking.size();
    size_t lo = 0, hi = 0;  // the largest k known to miss, the smallest known to meet
    for (size_t k = 1; n > 0; k = std::min(n, k * 2)) {
      GBX_ASSIGN_OR_RETURN(bool met, attempt(k));
      if (met) {
        hi = k;
        break;
      }
      lo = k;
      if (k == n) break;
    }
    if (hi == 0)
      return make_error(ErrorCode::ACCURACY_BUDGET_UNMET, "the budget ", budget.text(), " is missed even with all ", n,
                        " lowered nodes in fp32 (",
                        result.tries.empty() ? "" : result.tries.back().measure.describe(budget),
                        "): the model's fp32 runs differ from each other");
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      GBX_ASSIGN_OR_RETURN(bool met, attempt(mid));
      (met ? hi : lo) = mid;
    }
    result.kept = hi;
    result.met = true;
    result.all_kept = hi == n;
    for (const BudgetTry& t : result.tries)
      if (t.kept == hi) result.achieved = t.measure;
    chosen = std::move(sessions[hi]);
  }

  // The speed the budget leaves: the two sessions alternating on the first sample.
  progress_begin(options.progress, "budget: timing", 2 * (options.timing_runs + 1));
  std::vector<double> fp32_times, reduced_times;
  for (size_t r = 0; r <= options.timing_runs; ++r)
    for (int which = 0; which < 2; ++which) {
      const Session& s = which == 0 ? *fp32 : *chosen;
      const auto start = Clock::now();
      GBX_RETURN_IF_ERROR(s.run(calibration.front()).status());
      if (r > 0) (which == 0 ? fp32_times : reduced_times).push_back(millis(Clock::now() - start));
      progress_advance(options.progress, 2 * r + which + 1);
    }
  result.timing_runs = options.timing_runs;
  result.fp32_ms = median(fp32_times);
  result.reduced_ms = median(reduced_times);
  return result;
}

}  // namespace gearbox

// The report's efficiency-quality plane: each run placed by its efficiency and quality, runs
// that do the same work collapsed into one point, and the Pareto frontier of those points.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "exitsim/analysis/svg_chart.hpp"
#include "exitsim/core/error.hpp"
#include "report_parts.hpp"

namespace exitsim::analysis::report_parts {

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

// The quality table's row for a run's exit setting under its own strategy (policy's one join:
// never a row measured under another strategy); full depth for `none` or strategy full_depth.
const policy::QualityRow* quality_row(const policy::QualityTable& table, const RunSetting& s) {
  return policy::find_quality_row(table,
                                  {s.policy, s.strategy, s.measure, s.threshold, s.capacities});
}

double run_metric(const RunMetrics& m, const std::string& name) {
  if (const RunMetricColumn* column = find_run_metric(name))
    return m.*column->member;
  std::string known;
  for (const RunMetricColumn& column : k_run_metric_columns)
    known += fmt::format("{}{}", known.empty() ? "" : ", ", column.name);
  throw InputError({"", 0, 0, "--efficiency"}, expected_found("one of " + known, name));
}

// The point's name: the full-depth baseline is named as the reference.
std::string point_label(const FrontierRow& p) {
  return p.reference ? "full depth (reference)" : p.key;
}

// Runs that do the same work are one configuration: the same outcome (efficiency and quality,
// exactly: the simulator is deterministic) under the same settings of the axes other than the
// exit setting and the strategy (a threshold under full_depth, or one no token reaches, exits
// nobody). The full-depth run stands for its group when it is in one.
void collapse_same_configurations(Report& r, const std::vector<RunSetting>& settings,
                                  const std::vector<RunRecord>& runs) {
  std::map<std::tuple<std::string, double, double>, std::size_t> first;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    FrontierRow& p = r.points[i];
    const policy::QualitySetting setting =
        policy::canonical({settings[i].policy, settings[i].strategy, settings[i].measure,
                           settings[i].threshold, settings[i].capacities});
    p.reference = setting == policy::full_depth_setting();
    p.same_as = i;
    const std::string axes = other_axes(runs[i]);
    if (!std::isfinite(p.quality) || !std::isfinite(p.efficiency))
      continue;
    const auto [at, inserted] = first.try_emplace({axes, p.efficiency, p.quality}, i);
    if (inserted)
      continue;
    FrontierRow& head = r.points[at->second];
    if (p.reference && !head.reference) {
      // The reference stands for the group: it takes the group over.
      p.also = std::move(head.also);
      p.also.push_back(head.key);
      for (FrontierRow& q : r.points) {
        if (q.same_as == at->second)
          q.same_as = i;
      }
      head.also.clear();
      at->second = i;
    } else {
      p.same_as = at->second;
      head.also.push_back(p.key);
    }
  }
  // A reference row's name says what it stands for too.
  for (FrontierRow& p : r.points) {
    if (p.reference && p.same_as == p.run && p.key != "(scenario)")
      p.also.insert(p.also.begin(), p.key);
  }
}

// One Pareto point per distinct configuration, the others it stands for sharing its rank: sets
// r.frontier and every point's rank, and returns the distinct points.
std::vector<ParetoPoint> rank_distinct(const std::vector<Objective>& objectives, Report& r) {
  std::vector<ParetoPoint> distinct;
  std::vector<std::size_t> distinct_run;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const FrontierRow& row = r.points[i];
    if (row.same_as == i) {
      distinct.push_back({row.key, {row.efficiency, row.quality}});
      distinct_run.push_back(i);
    }
  }
  const std::vector<int> ranks = pareto_ranks(distinct, objectives);
  for (const std::size_t f : pareto_frontier(distinct, objectives))
    r.frontier.push_back(distinct_run[f]);
  for (std::size_t k = 0; k < distinct_run.size(); ++k) {
    FrontierRow& p = r.points[distinct_run[k]];
    p.rank = std::isfinite(p.quality) && std::isfinite(p.efficiency) ? ranks[k] : -1;
  }
  for (FrontierRow& p : r.points)
    p.rank = r.points[p.same_as].rank;
  return distinct;
}

// The hypervolume against a reference of the worst value seen on each axis pushed out by a
// tenth of the axis's range (the nadir with a margin), so that the extreme frontier points add
// area too.
double hypervolume_of(const std::vector<ParetoPoint>& points,
                      const std::vector<Objective>& objectives) {
  std::vector<double> reference(2);
  for (std::size_t k = 0; k < 2; ++k) {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (const ParetoPoint& p : points) {
      if (std::isfinite(p.values[0]) && std::isfinite(p.values[1])) {
        lo = std::min(lo, p.values[k]);
        hi = std::max(hi, p.values[k]);
      }
    }
    const double margin = hi > lo ? 0.1 * (hi - lo) : std::max(0.1 * std::abs(lo), 1e-9);
    reference[k] = objectives[k].maximize ? lo - margin : hi + margin;
  }
  return hypervolume_2d(points, objectives, reference);
}

// The frontier's chart and table, and its hypervolume among the `distinct` configurations.
std::string frontier_body(const ReportInputs& in, const ChartInputs& charts, std::size_t distinct,
                          Report& r) {
  std::vector<std::vector<std::string>> rows;
  for (const std::size_t f : r.frontier) {
    const FrontierRow& p = r.points[f];
    rows.push_back({point_label(p), fmt_number(p.efficiency), fmt_number(p.quality),
                    p.also.empty() ? "-" : fmt::format("{}", fmt::join(p.also, "; "))});
  }
  std::string body = frontier_chart(charts);
  if (!is_capacity(in.efficiency_objective.metric)) {
    r.notes.push_back(fmt::format(
        "efficiency is {} at the sweep's offered load, not a capacity: it varies with the "
        "configuration only where that load saturates the system; give --plan with `exitsim "
        "plan` over the same sweep to chart each configuration's sustainable load",
        in.efficiency_objective.metric));
    body += empty_note(r.notes.back());
  }
  const std::vector<std::string> header = {
      "configuration on the frontier", in.efficiency_objective.metric, in.quality_objective.metric,
      "the same work as (one point)"};
  body += html_table(header, rows);
  body += fmt::format(
      "<p>Hypervolume {} (reference: the worst value on each axis less a tenth of its "
      "range); "
      "{} of {} distinct configurations on the frontier ({} runs: configurations that do "
      "the same work, such as any threshold under full_depth, are one point).</p>\n",
      fmt_number(r.hypervolume), r.frontier.size(), distinct, in.runs.size());
  return body;
}

}  // namespace

std::vector<RunSetting> place_runs(const ReportInputs& in, const PlanView& plan, Report& r) {
  std::vector<RunSetting> settings;
  for (std::size_t i = 0; i < in.runs.size(); ++i) {
    const RunRecord& run = in.runs[i];
    settings.push_back(setting_of(run));
    FrontierRow row;
    row.run = i;
    row.key = run.point.key.empty() ? "(scenario)" : run.point.key;
    if (is_capacity(in.efficiency_objective.metric)) {
      // The steady window's token rate: the run's whole-makespan throughput counts its drain.
      row.efficiency =
          plan.number(run.point.key, in.efficiency_objective.metric == "sustainable_load"
                                         ? "max_load_per_replica"
                                         : "output_tokens_per_s_at_max");
    } else {
      row.efficiency = run_metric(run.metrics, in.efficiency_objective.metric);
    }
    row.quality = k_nan;
    if (in.quality) {
      if (const policy::QualityRow* q = quality_row(*in.quality, settings.back())) {
        row.quality =
            in.quality_objective.metric == "top1_agreement" ? q->top1_agreement : q->nll_per_token;
      }
    }
    r.points.push_back(row);
  }
  collapse_same_configurations(r, settings, in.runs);
  return settings;
}

std::string pareto_section(const ReportInputs& in, const ChartInputs& charts, Report& r) {
  if (in.runs.empty()) {
    r.notes.push_back("no sweep runs: give --db with the database of `exitsim sweep`");
    return section("Pareto frontier", empty_note(r.notes.back()));
  }
  if (!in.quality) {
    r.notes.push_back(
        "no quality table: the frontier needs the engine's quality per exit setting (`exitsim "
        "engine eval`), given with --quality");
    return section("Pareto frontier", empty_note(r.notes.back()));
  }
  const std::vector<Objective> objectives = {in.efficiency_objective, in.quality_objective};
  const std::vector<ParetoPoint> points = rank_distinct(objectives, r);
  std::size_t without_quality = 0;
  for (const FrontierRow& row : r.points)
    without_quality += std::isfinite(row.quality) && std::isfinite(row.efficiency) ? 0U : 1U;
  if (without_quality > 0) {
    r.notes.push_back(fmt::format(
        "{} of {} runs have an exit setting and strategy the quality table does not hold (it "
        "holds quality per setting and strategy: `exitsim engine eval --strategies`) or no "
        "candidate in the plan; they are left off the frontier",
        without_quality, in.runs.size()));
  }
  if (r.frontier.empty()) {
    r.notes.push_back("empty frontier: no run has both a quality and an efficiency value");
    return section("Pareto frontier", empty_note(r.notes.back()));
  }
  r.hypervolume = hypervolume_of(points, objectives);
  return section("Pareto frontier", frontier_body(in, charts, points.size(), r));
}

}  // namespace exitsim::analysis::report_parts

#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "exitsim/analysis/pareto.hpp"
#include "exitsim/analysis/sweep.hpp"
#include "exitsim/policy/quality_table.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"

namespace exitsim::analysis {

// What `exitsim report` puts together; every part is optional, and a missing or empty part is a
// section that says why rather than an empty chart.
struct ReportInputs {
  std::vector<RunRecord> runs;  // a sweep database's rows
  std::optional<policy::QualityTable> quality;
  std::optional<sim::CostProfile> profile;
  std::string validation_json;  // `exitsim validate`'s validation.json ("" = none)
  std::string plan_json;        // `exitsim plan`'s JSON ("" = none)
  // The files they were read from, for messages ("" = name the option only).
  std::string validation_path{};
  std::string plan_path{};
  Objective quality_objective{"nll_per_token", false};  // or {"top1_agreement", true}
  // "sustainable_load" (the plan's capacity per replica within the SLOs) or
  // "sustainable_tokens_per_s" (the output tokens/s at it) take the run's efficiency from the
  // plan's candidate of the same key; any other is a run metric.
  Objective efficiency_objective{"throughput_tokens_per_s", true};
  // The verdict's quality budget: the most NLL (relative, over full depth) a recommended
  // configuration may add, and the validation error (median per step, on the engine's own
  // batches) above which the verdict warns that the pricing is not to be trusted.
  double max_quality_loss = 0.01;
  double validation_target = 0.05;
};

// The efficiency the report uses when none is asked for: the planned capacity when the plan has
// a candidate for every run (a configuration's efficiency is what it sustains within the SLOs),
// else the throughput at the sweep's offered load, which varies with the decision only when that
// load saturates the system (the report then says so).
std::string default_efficiency(const ReportInputs& in);

// One run placed on the efficiency-quality plane.
struct FrontierRow {
  std::size_t run = 0;  // index into ReportInputs::runs
  std::string key;
  double quality = 0;  // NaN when the quality table has no row for the run's exit setting
  double efficiency = 0;
  int rank = -1;  // Pareto rank, 0 = on the frontier; -1 without quality
  // The configurations that do the same work are one point: the run it stands for (itself when
  // it is the point) and, on the point, the keys of the others it stands for.
  std::size_t same_as = 0;
  std::vector<std::string> also;
  bool reference = false;  // the full-depth baseline: nobody exits
};

struct Report {
  std::vector<FrontierRow> points;
  std::vector<std::size_t> frontier;  // indices into points, worst to best efficiency
  double hypervolume = 0;
  std::vector<std::string> notes;  // what could not be shown, and why
  std::string verdict;             // the answer in words and numbers, first on the page
  std::string html;                // self-contained: inline SVG and CSS, no script, no network
  std::string json;                // every number in the report
  std::string frontier_csv;
};

// Throws InputError naming the input for malformed validation or plan JSON and for an objective
// that is not a run metric.
Report build_report(const ReportInputs& inputs);

}  // namespace exitsim::analysis

#pragma once
// The report's parts, private to the report: what it reads of a run, the verdict, and the
// charts of the frontier's configurations. build_report (report.cpp) puts them together.

#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exitsim/analysis/report.hpp"

namespace exitsim::analysis::report_parts {

// The run's setting as the sweep stored it (sweep_columns.hpp), with strategy full_depth made
// the full-depth reference (exit policy none, no threshold or capacities).
RunSetting setting_of(const RunRecord& run);

// The capacity plan (`exitsim plan`'s JSON) as the report reads it, parsed once: its candidates
// by the sweep point's key and the load's key. Empty for no plan or one without candidates
// (build_report refuses a malformed plan in its Capacity section).
struct PlanView {
  explicit PlanView(const ReportInputs& in);
  std::map<std::string, nlohmann::json> candidates;
  std::string load_key;  // workload.arrivals.rate or workload.trace.rate_scale
  const nlohmann::json* find(const std::string& key) const;
  // A candidate's numeric field; NaN when the candidate or the field is missing.
  double number(const std::string& key, const char* field) const;
};

// A JSON object's numeric field; NaN when the object, the field or its number is missing.
double json_number(const nlohmann::json& object, const char* field);
// The same with a fallback for a missing field or a null (an infinity as nlohmann writes it).
double number_or(const nlohmann::json& object, const char* field, double fallback);

// --plan and --validation (null when not given), read with exitsim's JSON limits and checked:
// every key the report reads has the type it is read as, else an InputError naming the file and
// the key path ("strategies[0].metrics[2].engine_runs: expected an integer ..., found \"3\"").
nlohmann::json plan_document(const ReportInputs& in);
nlohmann::json validation_document(const ReportInputs& in);
// A sweep run's summary.json, with every field the report reads checked: one line naming the run
// and the key path when the database holds something else.
nlohmann::json run_summary(const RunRecord& run);

// The efficiency metrics read from the plan rather than from a run.
bool is_capacity(const std::string& metric);

// A sweep override that sets the exit setting or the strategy (what a configuration's point on
// the quality axis depends on), rather than one of the other axes.
bool is_exit_axis(const std::string& override_text);

// A run's exit setting ("0.5", "top-k 1/2", the policy's kind) and, with its strategy, its
// configuration but for the other axes ("skip_kv 0.5"; "full depth" for the reference).
std::string exit_label(const RunSetting& setting);
std::string setting_label(const RunSetting& setting, bool reference);

// A point's name on a chart: its strategy and exit setting, then the other swept axes by their
// last key component ("skip_kv 0.5 max_running=16"); the reference is "full depth".
std::string short_label(const RunSetting& setting, const RunRecord& run, bool reference);

// The swept axes other than the exit setting and the strategy ("scheduler.max_running=16;").
std::string other_axes(const RunRecord& run, bool keep_batch_limit = true);

std::string fmt_number(double v);
std::string section(const std::string& title, const std::string& body);
std::string empty_note(const std::string& why);

// Axis titles with their units.
std::string efficiency_title(const ReportInputs& in, const PlanView& plan);
std::string quality_title(const ReportInputs& in);

// The profile's fits per op (`ops` gets their figures for report.json).
std::string calibration_section(const sim::CostProfile& profile, nlohmann::json& ops);
// `exitsim validate`'s results with the engine's spread and the pass/fail per target; read
// defensively (a missing field shows as "-", never as an error).
std::string validation_section(const nlohmann::json& validation);

// The answer in words and numbers, first on the page.
std::string verdict_of(const ReportInputs& in, const Report& r, const PlanView& plan);

struct ChartInputs;

// The report's parts in page order (build_report puts them together); each adds what it could
// not show to r.notes and its figures to report.json (`out`).
//
// Each run placed on the efficiency-quality plane (r.points, the runs that do the same work
// collapsed into one point); returns each run's setting.
std::vector<RunSetting> place_runs(const ReportInputs& in, const PlanView& plan, Report& r);
// The Pareto frontier of the distinct configurations (r.frontier, ranks, hypervolume) and its
// section: chart, table and hypervolume, or why there is none.
std::string pareto_section(const ReportInputs& in, const ChartInputs& charts, Report& r);
// Every run (report.json "runs"), the frontier (report.json and r.frontier_csv), and the section
// of the warnings the runs carry ("" when none does).
std::string runs_part(const ReportInputs& in, const std::vector<RunSetting>& settings, Report& r,
                      nlohmann::json& out);
// The capacity plan's candidates (--plan).
std::string capacity_section(const ReportInputs& in, Report& r, nlohmann::json& out);
// adaptive_threshold's runs: calibration pairs, refits and the threshold over each run (""
// when no run used it).
std::string adaptive_threshold_section(const ReportInputs& in, Report& r);
// The profile's fit errors (--profile) and the stand-ins for ops its traces never ran.
std::string calibration_error_section(const ReportInputs& in, Report& r, nlohmann::json& out);
// `exitsim validate`'s results (--validation).
std::string validation_part(const ReportInputs& in, Report& r, nlohmann::json& out);

// What the charts of one report share.
struct ChartInputs {
  const ReportInputs& in;
  const Report& report;
  const std::vector<RunSetting>& settings;
  const PlanView& plan;
  std::vector<std::string> labels;  // short_label of each run
};

// Capacity (or the efficiency asked for) against quality: every distinct configuration, the
// frontier with its points labelled, and the full-depth reference.
std::string frontier_chart(const ChartInputs& c);
// One line per strategy through its exit thresholds (each at its best batch limit).
std::string by_strategy_chart(const ChartInputs& c);
// The efficiency of the frontier's configurations (and the reference) against the batch limit.
std::string by_batch_limit_chart(const ChartInputs& c, std::vector<std::string>& notes);
// TPOT and TTFT percentiles, exit-depth histograms and K/V use over time of the frontier's
// distinct configurations and the reference, from their sweep runs.
std::string frontier_distributions(const ChartInputs& c, std::vector<std::string>& notes);

}  // namespace exitsim::analysis::report_parts

#pragma once
// What a sweep database stores of each run beside its scenario and summary, as columns: the
// headline metrics and the run's exit setting. The metrics are one table (k_run_metric_columns):
// the database's schema, its bind and select, the JSON that MPI ranks pass and the report's
// --efficiency names are all read from it, so a new metric is one new row there (and its member).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/scenario/scenario.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::analysis {

// The headline metrics of one run, as the database's columns hold them (the full summary is
// stored as JSON beside them).
struct RunMetrics {
  double throughput_tokens_per_s = 0;
  double goodput_requests_per_s = 0;
  double slo_attainment = 0;
  double ttft_p50_ms = 0, ttft_p99_ms = 0;
  double tpot_p50_ms = 0, tpot_p99_ms = 0;
  double e2e_p50_ms = 0, e2e_p99_ms = 0;
  double mean_exit_depth = 0;
  std::string summary_json;
};

// One headline metric: its name (the database column, the JSON key, the report's --efficiency
// value), where RunMetrics holds it, and where a simulation's summary has it.
struct RunMetricColumn {
  std::string_view name;
  double RunMetrics::*member;
  double (*of)(const sim::MetricsSummary&);
};

// Every headline metric, in the database's column order.
inline constexpr RunMetricColumn k_run_metric_columns[] = {
    {"throughput_tokens_per_s", &RunMetrics::throughput_tokens_per_s,
     [](const sim::MetricsSummary& s) { return s.throughput_tokens_per_s; }},
    {"goodput_requests_per_s", &RunMetrics::goodput_requests_per_s,
     [](const sim::MetricsSummary& s) { return s.goodput_requests_per_s; }},
    {"slo_attainment", &RunMetrics::slo_attainment,
     [](const sim::MetricsSummary& s) { return s.slo_attainment; }},
    {"ttft_p50_ms", &RunMetrics::ttft_p50_ms,
     [](const sim::MetricsSummary& s) { return s.ttft.p50; }},
    {"ttft_p99_ms", &RunMetrics::ttft_p99_ms,
     [](const sim::MetricsSummary& s) { return s.ttft.p99; }},
    {"tpot_p50_ms", &RunMetrics::tpot_p50_ms,
     [](const sim::MetricsSummary& s) { return s.tpot.p50; }},
    {"tpot_p99_ms", &RunMetrics::tpot_p99_ms,
     [](const sim::MetricsSummary& s) { return s.tpot.p99; }},
    {"e2e_p50_ms", &RunMetrics::e2e_p50_ms, [](const sim::MetricsSummary& s) { return s.e2e.p50; }},
    {"e2e_p99_ms", &RunMetrics::e2e_p99_ms, [](const sim::MetricsSummary& s) { return s.e2e.p99; }},
    {"mean_exit_depth", &RunMetrics::mean_exit_depth,
     [](const sim::MetricsSummary& s) { return s.depth.mean_exit_depth; }},
};

// The metric column called `name`, or null.
const RunMetricColumn* find_run_metric(std::string_view name);

// What a run's results are placed by: its exit setting and strategy as the quality table keys
// them (policy::QualitySetting), and its batch limit. Taken from the resolved scenario when the
// sweep runs the point and stored as the database's setting columns, so that readers (the
// report) need not parse the scenario again.
struct RunSetting {
  std::string policy = "none";      // exit_policy.kind
  std::optional<double> threshold;  // the threshold that decides exits (none: top_k, or no kind
                                    // with one)
  std::string measure;              // confidence_measure, confidence only
  std::vector<double> capacities;   // router_expert_choice in top_k mode
  std::string strategy = "full_depth";
  double max_running = 0;  // scheduler.max_running (0: unlimited)
  friend bool operator==(const RunSetting&, const RunSetting&) = default;
};

// The setting of a resolved scenario: each field only where its key applies (a threshold for
// confidence and threshold-mode expert choice, a measure for confidence, capacities for top_k).
RunSetting run_setting_of(const scenario::Scenario& scenario);

}  // namespace exitsim::analysis

// The report's section on FREE's adaptive threshold: per run that used it, how many calibration
// pairs its estimators saw, how often they refit, and the threshold over the run.
#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <vector>

#include "exitsim/analysis/svg_chart.hpp"
#include "report_parts.hpp"

namespace exitsim::analysis::report_parts {

using nlohmann::json;

namespace {

// The threshold as a step function of time on replica 0 (every replica's estimator refits on its
// own; the table has all of them): the initial value from 0, then each refit's from its time.
ChartSeries threshold_series(const std::string& name, const json& adaptive) {
  ChartSeries series{name, {}, true, {}, false};
  double threshold = adaptive["initial_threshold"].get<double>();
  series.points.emplace_back(0.0, threshold);
  for (const json& point : adaptive["trajectory"]) {
    if (point["replica"].get<double>() != 0)
      continue;
    const double time = point["time_s"].get<double>();
    series.points.emplace_back(time, threshold);
    threshold = point["threshold"].get<double>();
    series.points.emplace_back(time, threshold);
  }
  return series;
}

}  // namespace

std::string adaptive_threshold_section(const ReportInputs& in, Report& r) {
  std::vector<std::vector<std::string>> rows;
  std::vector<ChartSeries> series;
  for (std::size_t i = 0; i < in.runs.size(); ++i) {
    const json summary = run_summary(in.runs[i]);
    const auto it = summary.find("adaptive_threshold");
    if (it == summary.end() || it->is_null())
      continue;
    const json& a = *it;
    const auto number = [&](const char* key) { return fmt_number(a[key].get<double>()); };
    rows.push_back(
        {r.points[i].key, number("pairs"),
         fmt::format("{} ({} degenerate)", number("refits"), number("degenerate_refits")),
         number("initial_threshold"), number("last_threshold"),
         fmt::format("{} to {}", number("min_threshold"), number("max_threshold"))});
    if (a["pairs"].get<double>() == 0) {
      r.notes.push_back(
          fmt::format("{}: adaptive_threshold collected no calibration pair, its "
                      "threshold never moved (pairs come only from deferred_fill)",
                      r.points[i].key));
    }
    series.push_back(threshold_series(r.points[i].key, a));
  }
  if (rows.empty())
    return "";
  const std::vector<std::string> header = {
      "run", "calibration pairs", "refits", "threshold first", "threshold last", "range"};
  const std::string chart = svg_xy_chart(
      {"Adaptive threshold over the run (replica 0)", "time (s)", "threshold", false, 900, 360},
      series);
  return section("Adaptive threshold (FREE)",
                 html_table(header, rows) + chart +
                     "<p>Each refit attempt of every replica is a row of the run's "
                     "threshold_trajectory.csv; a degenerate refit (one label only, or zero "
                     "variance) keeps the threshold.</p>\n");
}

}  // namespace exitsim::analysis::report_parts

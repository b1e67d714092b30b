// The report's sections after the frontier's charts: the runs and their warnings, the capacity
// plan, the calibration error and the validation against the engine. Each adds its figures to
// report.json (`out`) and its notes to the report's.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>

#include "exitsim/analysis/svg_chart.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "report_parts.hpp"

namespace exitsim::analysis::report_parts {

namespace ops = traces::engine_ops;
using nlohmann::json;

std::string runs_part(const ReportInputs& in, const std::vector<RunSetting>& settings, Report& r,
                      json& out) {
  json runs_json = json::array();
  // Each run's substitutions (summary.json "warnings"), with the runs that carry them.
  std::map<std::string, std::vector<std::string>> warned_runs;
  for (std::size_t i = 0; i < in.runs.size(); ++i) {
    const json summary = run_summary(in.runs[i]);
    if (summary.contains("warnings") && summary["warnings"].is_array()) {
      for (const json& w : summary["warnings"]) {
        if (w.is_string())
          warned_runs[w.get<std::string>()].push_back(r.points[i].key);
      }
    }
    runs_json.push_back({{"key", r.points[i].key},
                         {"quality", std::isfinite(r.points[i].quality) ? json(r.points[i].quality)
                                                                        : json(nullptr)},
                         {"efficiency", r.points[i].efficiency},
                         {"pareto_rank", r.points[i].rank},
                         {"same_work_as", r.points[r.points[i].same_as].key},
                         {"reference", r.points[i].reference},
                         {"strategy", settings[i].strategy},
                         {"summary", summary}});
  }
  out["runs"] = runs_json;
  json frontier_json = json::array();
  r.frontier_csv = fmt::format("configuration,{},{},pareto_rank\n", in.efficiency_objective.metric,
                               in.quality_objective.metric);
  for (const std::size_t f : r.frontier)
    frontier_json.push_back(r.points[f].key);
  for (const FrontierRow& p : r.points) {
    r.frontier_csv +=
        fmt::format("\"{}\",{},{},{}\n", p.key, p.efficiency,
                    std::isfinite(p.quality) ? fmt::format("{}", p.quality) : "", p.rank);
  }
  out["frontier"] = frontier_json;
  out["hypervolume"] = r.hypervolume;
  out["objectives"] = {{"efficiency", in.efficiency_objective.metric},
                       {"quality", in.quality_objective.metric}};

  if (warned_runs.empty())
    return "";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [warning, keys] : warned_runs) {
    rows.push_back({warning, fmt::format("{} of {}", keys.size(), in.runs.size()),
                    keys.size() > 3 ? keys.front() + ", ... " + keys.back()
                                    : fmt::format("{}", fmt::join(keys, "; "))});
  }
  r.notes.push_back(
      fmt::format("{} distinct warnings in the runs (trace cut, requests rejected, prices "
                  "extrapolated, ...): "
                  "see the report's Warnings section",
                  warned_runs.size()));
  const std::vector<std::string> header = {"warning", "runs", "which"};
  return section("Warnings: where a run is not exactly the work asked for",
                 html_table(header, rows));
}

std::string capacity_section(const ReportInputs& in, Report& r, json& out) {
  if (in.plan_json.empty()) {
    r.notes.push_back("no capacity plan: give --plan with the JSON of `exitsim plan -o`");
    return section("Capacity", empty_note(r.notes.back()));
  }
  const json plan_doc = plan_document(in);
  std::vector<std::pair<std::string, double>> bars;
  std::vector<std::vector<std::string>> rows;
  for (const json& c : plan_doc["candidates"]) {
    const std::string name = c["candidate"].get<std::string>().empty()
                                 ? "(scenario)"
                                 : c["candidate"].get<std::string>();
    bars.emplace_back(name, json_number(c, "max_load_per_replica"));
    const bool lower_bound = c.contains("max_load_is_lower_bound") &&
                             c["max_load_is_lower_bound"].is_boolean() &&
                             c["max_load_is_lower_bound"].get<bool>();
    rows.push_back(
        {name, (lower_bound ? ">= " : "") + fmt_number(json_number(c, "max_load_per_replica")),
         fmt_number(json_number(c, "tpot_p99_ms_at_max")), std::to_string(c["replicas"].get<int>()),
         fmt_number(json_number(c, "cost_per_hour")), c["recommended"].get<bool>() ? "yes" : ""});
  }
  const std::string load_key = plan_doc["candidates"].empty()
                                   ? std::string("load")
                                   : plan_doc["candidates"][0]["load_key"].get<std::string>();
  const std::vector<std::string> header = {"candidate",           load_key + " per replica",
                                           "TPOT p99 at it (ms)", "replicas for target",
                                           "cost per hour",       "recommended"};
  out["plan"] = plan_doc;
  return section("Capacity", svg_bar_chart({"Sustainable load per replica within the SLOs",
                                            "candidate", load_key, false, 900, 360, false},
                                           bars) +
                                 html_table(header, rows) + "<p>" +
                                 html_escape(plan_doc["recommendation"].get<std::string>()) +
                                 "</p>\n");
}

std::string calibration_error_section(const ReportInputs& in, Report& r, json& out) {
  if (!in.profile) {
    r.notes.push_back("no cost profile: give --profile with `exitsim calibrate`'s output");
    return section("Calibration error", empty_note(r.notes.back()));
  }
  json ops = json::array();
  const std::string body = calibration_section(*in.profile, ops);
  // The stand-ins the calibrated cost model uses for ops the traces did not cover.
  for (const auto& [op, stand_in] :
       {std::pair{ops::kv_only,
                  "K/V-only layers are priced as qkv_proj times the K/V share of "
                  "its output"},
        std::pair{ops::step_residual, "scheduling and policy work between ops is priced as 0"}}) {
    if (in.profile->find(std::string(op)) == nullptr) {
      r.notes.push_back(
          fmt::format("the cost profile has no {} (its traces never ran it): {}", op, stand_in));
    }
  }
  out["calibration"] = ops;
  return body;
}

std::string validation_part(const ReportInputs& in, Report& r, json& out) {
  if (in.validation_json.empty()) {
    r.notes.push_back("no validation: give --validation with `exitsim validate`'s JSON");
    return section("Validation against the engine", empty_note(r.notes.back()));
  }
  const json v = validation_document(in);
  out["validation"] = v;
  return validation_section(v);
}

}  // namespace exitsim::analysis::report_parts

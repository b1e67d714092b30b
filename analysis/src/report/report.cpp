#include "exitsim/analysis/report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "exitsim/analysis/svg_chart.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/version.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "exitsim/traces/json_document.hpp"
#include "report_parts.hpp"

namespace exitsim::analysis {

namespace {

namespace ops = traces::engine_ops;
using nlohmann::json;
using namespace report_parts;
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

}  // namespace

std::string default_efficiency(const ReportInputs& in) {
  const PlanView plan(in);
  if (in.runs.empty() || plan.candidates.empty())
    return "throughput_tokens_per_s";
  for (const RunRecord& run : in.runs) {
    if (!std::isfinite(plan.number(run.point.key, "max_load_per_replica")))
      return "throughput_tokens_per_s";
  }
  return "sustainable_load";
}

Report build_report(const ReportInputs& in) {
  Report r;
  json out = {{"format", "exitsim-report v1"},
              {"exitsim", {{"version", version()}, {"commit", commit()}}}};
  std::string body;

  // Efficiency-quality plane.
  const PlanView plan(in);
  if (is_capacity(in.efficiency_objective.metric) && in.plan_json.empty()) {
    throw InputError(
        {"", 0, 0, "--efficiency"},
        expected_found("a capacity plan (--plan) for " + in.efficiency_objective.metric, "none"));
  }
  std::vector<RunSetting> settings;
  std::vector<ParetoPoint> points;
  std::size_t without_quality = 0;
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
    without_quality += std::isfinite(row.quality) && std::isfinite(row.efficiency) ? 0U : 1U;
    r.points.push_back(row);
    points.push_back({row.key, {row.efficiency, row.quality}});
  }
  collapse_same_configurations(r, settings, in.runs);
  ChartInputs charts{in, r, settings, plan, {}};
  for (const FrontierRow& p : r.points)
    charts.labels.push_back(short_label(settings[p.run], in.runs[p.run], p.reference));
  const std::vector<Objective> objectives = {in.efficiency_objective, in.quality_objective};
  std::string pareto_body;
  if (in.runs.empty()) {
    r.notes.push_back("no sweep runs: give --db with the database of `exitsim sweep`");
    pareto_body = empty_note(r.notes.back());
  } else if (!in.quality) {
    r.notes.push_back(
        "no quality table: the frontier needs the engine's quality per exit setting (`exitsim "
        "engine eval`), given with --quality");
    pareto_body = empty_note(r.notes.back());
  } else {
    // One Pareto point per distinct configuration; the others it stands for share its rank.
    std::vector<ParetoPoint> distinct;
    std::vector<std::size_t> distinct_run;
    for (std::size_t i = 0; i < r.points.size(); ++i) {
      if (r.points[i].same_as == i) {
        distinct.push_back(points[i]);
        distinct_run.push_back(i);
      }
    }
    points = distinct;
    const std::vector<int> ranks = pareto_ranks(distinct, objectives);
    for (const std::size_t f : pareto_frontier(distinct, objectives))
      r.frontier.push_back(distinct_run[f]);
    for (std::size_t k = 0; k < distinct_run.size(); ++k) {
      FrontierRow& p = r.points[distinct_run[k]];
      p.rank = std::isfinite(p.quality) && std::isfinite(p.efficiency) ? ranks[k] : -1;
    }
    for (FrontierRow& p : r.points)
      p.rank = r.points[p.same_as].rank;
    if (without_quality > 0) {
      r.notes.push_back(fmt::format(
          "{} of {} runs have an exit setting and strategy the quality table does not hold (it "
          "holds quality per setting and strategy: `exitsim engine eval --strategies`) or no "
          "candidate in the plan; they are left off the frontier",
          without_quality, in.runs.size()));
    }
    if (r.frontier.empty()) {
      r.notes.push_back("empty frontier: no run has both a quality and an efficiency value");
      pareto_body = empty_note(r.notes.back());
    } else {
      // Reference: the worst value seen on each axis pushed out by a tenth of the axis's range
      // (the nadir with a margin), so that the extreme frontier points add area too.
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
      r.hypervolume = hypervolume_2d(points, objectives, reference);
      std::vector<std::vector<std::string>> rows;
      for (const std::size_t f : r.frontier) {
        const FrontierRow& p = r.points[f];
        rows.push_back({point_label(p), fmt_number(p.efficiency), fmt_number(p.quality),
                        p.also.empty() ? "-" : fmt::format("{}", fmt::join(p.also, "; "))});
      }
      pareto_body = frontier_chart(charts);
      if (!is_capacity(in.efficiency_objective.metric)) {
        r.notes.push_back(fmt::format(
            "efficiency is {} at the sweep's offered load, not a capacity: it varies with the "
            "configuration only where that load saturates the system; give --plan with `exitsim "
            "plan` over the same sweep to chart each configuration's sustainable load",
            in.efficiency_objective.metric));
        pareto_body += empty_note(r.notes.back());
      }
      const std::vector<std::string> header = {
          "configuration on the frontier", in.efficiency_objective.metric,
          in.quality_objective.metric, "the same work as (one point)"};
      pareto_body += html_table(header, rows);
      pareto_body += fmt::format(
          "<p>Hypervolume {} (reference: the worst value on each axis less a tenth of its "
          "range); "
          "{} of {} distinct configurations on the frontier ({} runs: configurations that do "
          "the same work, such as any threshold under full_depth, are one point).</p>\n",
          fmt_number(r.hypervolume), r.frontier.size(), points.size(), in.runs.size());
    }
  }
  body += section("Pareto frontier", pareto_body);

  const std::string strategy_chart = r.frontier.empty() ? "" : by_strategy_chart(charts);
  body +=
      section("Capacity against quality per strategy",
              strategy_chart.empty() ? empty_note("no frontier (see the notes)") : strategy_chart);
  body += section("Capacity against the batch limit",
                  r.frontier.empty() ? empty_note("no frontier (see the notes)")
                                     : by_batch_limit_chart(charts, r.notes));
  body += section("Latency, exit depths and K/V memory of the frontier's configurations",
                  frontier_distributions(charts, r.notes));

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

  if (!warned_runs.empty()) {
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
    body += section("Warnings: where a run is not exactly the work asked for",
                    html_table(header, rows));
  }

  // Capacity against rate.
  if (in.plan_json.empty()) {
    r.notes.push_back("no capacity plan: give --plan with the JSON of `exitsim plan -o`");
    body += section("Capacity", empty_note(r.notes.back()));
  } else {
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
           fmt_number(json_number(c, "tpot_p99_ms_at_max")),
           std::to_string(c["replicas"].get<int>()), fmt_number(json_number(c, "cost_per_hour")),
           c["recommended"].get<bool>() ? "yes" : ""});
    }
    const std::string load_key = plan_doc["candidates"].empty()
                                     ? std::string("load")
                                     : plan_doc["candidates"][0]["load_key"].get<std::string>();
    const std::vector<std::string> header = {"candidate",           load_key + " per replica",
                                             "TPOT p99 at it (ms)", "replicas for target",
                                             "cost per hour",       "recommended"};
    body += section("Capacity", svg_bar_chart({"Sustainable load per replica within the SLOs",
                                               "candidate", load_key, false, 900, 360, false},
                                              bars) +
                                    html_table(header, rows) + "<p>" +
                                    html_escape(plan_doc["recommendation"].get<std::string>()) +
                                    "</p>\n");
    out["plan"] = plan_doc;
  }

  // Calibration error table.
  if (!in.profile) {
    r.notes.push_back("no cost profile: give --profile with `exitsim calibrate`'s output");
    body += section("Calibration error", empty_note(r.notes.back()));
  } else {
    json ops = json::array();
    body += calibration_section(*in.profile, ops);
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
  }

  // Validation error table.
  if (in.validation_json.empty()) {
    r.notes.push_back("no validation: give --validation with `exitsim validate`'s JSON");
    body += section("Validation against the engine", empty_note(r.notes.back()));
  } else {
    const json v = validation_document(in);
    body += validation_section(v);
    out["validation"] = v;
  }
  out["notes"] = r.notes;
  r.verdict = verdict_of(in, r, plan);
  out["verdict"] = r.verdict;

  std::string notes_html;
  for (const std::string& n : r.notes)
    notes_html += "<li>" + html_escape(n) + "</li>";
  r.html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>exitsim "
      "report</title>\n<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;"
      "color:#222}h1{font-size:1.6em}h2{font-size:1.2em;border-bottom:1px solid #ccc}"
      "table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px "
      "8px;font-size:0.9em;text-align:right}td:first-child,th:first-child{text-align:left}"
      ".empty{color:#a33;font-style:italic}.warning{color:#a33;font-weight:bold}svg{display:block;"
      "margin:0.5em "
      "0}figure{display:inline-block;margin:0 1em 1em 0}"
      "figcaption{font-size:0.8em;max-width:420px}</style></head>\n"
      "<body><h1>exitsim report</h1>\n" +
      section("Verdict", "<p>" + html_escape(r.verdict) + "</p>\n") +
      fmt::format("<p>{} runs; efficiency {}, quality {}.</p>\n", in.runs.size(),
                  html_escape(in.efficiency_objective.metric),
                  html_escape(in.quality_objective.metric)) +
      (notes_html.empty() ? "" : "<ul class=\"empty\">" + notes_html + "</ul>\n") + body +
      "<p><small>exitsim " + html_escape(version_line()) + "</small></p>\n</body></html>\n";
  r.json = out.dump(2) + "\n";
  return r;
}

}  // namespace exitsim::analysis

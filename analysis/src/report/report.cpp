#include "exitsim/analysis/report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "exitsim/analysis/svg_chart.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/version.hpp"
#include "report_parts.hpp"

namespace exitsim::analysis {

namespace {

using nlohmann::json;
using namespace report_parts;

// The page: the verdict and the notes first, then the sections.
std::string page_html(const ReportInputs& in, const Report& r, const std::string& body) {
  std::string notes_html;
  for (const std::string& n : r.notes)
    notes_html += "<li>" + html_escape(n) + "</li>";
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>exitsim "
         "report</title>\n<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;"
         "color:#222}h1{font-size:1.6em}h2{font-size:1.2em;border-bottom:1px solid #ccc}"
         "table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px "
         "8px;font-size:0.9em;text-align:right}td:first-child,th:first-child{text-align:left}"
         ".empty{color:#a33;font-style:italic}.warning{color:#a33;font-weight:bold}svg{display:"
         "block;"
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
  const PlanView plan(in);
  if (is_capacity(in.efficiency_objective.metric) && in.plan_json.empty()) {
    throw InputError(
        {"", 0, 0, "--efficiency"},
        expected_found("a capacity plan (--plan) for " + in.efficiency_objective.metric, "none"));
  }
  const std::vector<RunSetting> settings = place_runs(in, plan, r);
  ChartInputs charts{in, r, settings, plan, {}};
  for (const FrontierRow& p : r.points)
    charts.labels.push_back(short_label(settings[p.run], in.runs[p.run], p.reference));

  // The efficiency-quality plane, then the frontier's configurations from other sides.
  std::string body = pareto_section(in, charts, r);
  const std::string strategy_chart = r.frontier.empty() ? "" : by_strategy_chart(charts);
  body +=
      section("Capacity against quality per strategy",
              strategy_chart.empty() ? empty_note("no frontier (see the notes)") : strategy_chart);
  body += section("Capacity against the batch limit",
                  r.frontier.empty() ? empty_note("no frontier (see the notes)")
                                     : by_batch_limit_chart(charts, r.notes));
  body += section("Latency, exit depths and K/V memory of the frontier's configurations",
                  frontier_distributions(charts, r.notes));
  // The other inputs' sections, each adding its notes in page order.
  body += runs_part(in, settings, r, out);
  body += adaptive_threshold_section(in, r);
  body += capacity_section(in, r, out);
  body += calibration_error_section(in, r, out);
  body += validation_part(in, r, out);

  out["notes"] = r.notes;
  r.verdict = verdict_of(in, r, plan);
  out["verdict"] = r.verdict;
  r.html = page_html(in, r, body);
  r.json = out.dump(2) + "\n";
  return r;
}

}  // namespace exitsim::analysis

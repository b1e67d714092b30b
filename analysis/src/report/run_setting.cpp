// What the report reads of a run's setting, and how it names and titles things.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "exitsim/analysis/svg_chart.hpp"
#include "report_parts.hpp"

namespace exitsim::analysis::report_parts {

RunSetting setting_of(const RunRecord& run) {
  RunSetting s = run.setting;
  // full_depth runs every token through every layer whatever the exit policy decides: its
  // outputs are the full-depth ones.
  if (s.strategy == "full_depth") {
    s.policy = "none";
    s.threshold.reset();
    s.capacities.clear();
  }
  return s;
}

bool is_exit_axis(const std::string& override_text) {
  return override_text.starts_with("exit_policy.") || override_text.starts_with("sync.strategy=");
}

std::string other_axes(const RunRecord& run, bool keep_batch_limit) {
  std::string axes;
  for (const std::string& o : run.point.overrides) {
    if (is_exit_axis(o) || (!keep_batch_limit && o.starts_with("scheduler.max_running=")))
      continue;
    axes += o + ";";
  }
  return axes;
}

std::string exit_label(const RunSetting& s) {
  if (!s.capacities.empty())
    return fmt::format("top-k {}", fmt::join(s.capacities, "/"));
  if (s.policy == "adaptive_threshold" && s.threshold)
    return fmt::format("adaptive from {:g}", *s.threshold);
  if (s.threshold)
    return fmt::format("{:g}", *s.threshold);
  return s.policy;
}

std::string setting_label(const RunSetting& s, bool reference) {
  return reference ? "full depth" : s.strategy + " " + exit_label(s);
}

std::string short_label(const RunSetting& s, const RunRecord& run, bool reference) {
  std::string label = setting_label(s, reference);
  for (const std::string& o : run.point.overrides) {
    if (is_exit_axis(o))
      continue;
    const std::size_t dot = o.rfind('.', o.find('='));
    label += " " + (dot == std::string::npos ? o : o.substr(dot + 1));
  }
  return label;
}

std::string fmt_number(double v) {
  return std::isfinite(v) ? fmt::format("{:.4g}", v) : "-";
}

std::string section(const std::string& title, const std::string& body) {
  return "<section><h2>" + html_escape(title) + "</h2>\n" + body + "</section>\n";
}

std::string empty_note(const std::string& why) {
  return "<p class=\"empty\">" + html_escape(why) + "</p>\n";
}

std::string efficiency_title(const ReportInputs& in, const PlanView& plan) {
  const std::string& metric = in.efficiency_objective.metric;
  if (metric == "sustainable_load") {
    return plan.load_key == "workload.trace.rate_scale"
               ? "sustainable load per replica within the SLOs (x the trace's request rate)"
               : "sustainable load per replica within the SLOs (requests/s)";
  }
  if (metric == "sustainable_tokens_per_s")
    return "output tokens/s per replica at its sustainable load";
  if (metric == "throughput_tokens_per_s")
    return "throughput at the sweep's offered load (output tokens/s)";
  if (metric.ends_with("_ms"))
    return metric.substr(0, metric.size() - 3) + " (ms)";
  return metric;
}

std::string quality_title(const ReportInputs& in) {
  return in.quality_objective.metric == "nll_per_token"
             ? "NLL per token (nats; lower is better)"
             : "top-1 agreement with full depth (fraction; higher is better)";
}

}  // namespace exitsim::analysis::report_parts

// The report's Calibration error and Validation sections: how well the profile fits its
// measurements, and how the simulator's prediction compares with the engine's own runs, judged
// against the stated targets and the engine's own spread.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "exitsim/analysis/svg_chart.hpp"
#include "report_parts.hpp"

namespace exitsim::analysis::report_parts {

namespace {

using nlohmann::json;

std::string percent(double fraction) {
  return std::isnan(fraction) ? "-" : fmt::format("{:.1f}%", 100 * fraction);
}

std::string verdict_cell(const json& object) {
  if (!object.is_object() || !object.contains("pass") || !object["pass"].is_boolean())
    return "";
  const bool inside =
      object.value("inside_engine_range", false) && object.value("engine_runs", 1) > 1;
  return object["pass"].get<bool>() ? (inside ? "pass (inside the engine's range)" : "pass")
                                    : "FAIL";
}

std::string simulated_cell(const json& m) {
  const double low = json_number(m, "simulated_low");
  const double high = json_number(m, "simulated_high");
  const std::string simulated = fmt_number(json_number(m, "simulated"));
  if (std::isnan(low) || std::isnan(high))
    return simulated;
  return fmt::format("{} [{}, {}]", simulated, fmt_number(low), fmt_number(high));
}

// For a judged figure whose price band reaches further than its target: the profile's measured
// precision alone cannot predict it that closely at this load.
std::string sensitivity_note(const json& m, double price_change) {
  const double simulated = json_number(m, "simulated");
  const double target = json_number(m, "target");
  const double low = json_number(m, "simulated_low");
  const double high = json_number(m, "simulated_high");
  if (std::isnan(price_change) || price_change <= 0 || std::isnan(target) || std::isnan(low) ||
      std::isnan(high) || std::isnan(simulated) || simulated == 0)
    return "";
  const double moved = std::max(high - simulated, simulated - low) / std::abs(simulated);
  if (moved <= target)
    return "";
  return fmt::format(
      "; prices off by the profile's {:.1f}% move it {:.0f}%: not predictable to "
      "{:.0f}% at this load",
      100 * price_change, 100 * moved, 100 * target);
}

}  // namespace

std::string calibration_section(const sim::CostProfile& profile, json& ops) {
  std::vector<std::vector<std::string>> rows;
  for (const sim::OpFit& op : profile.ops) {
    const std::string in_engine =
        op.in_situ_median_ape >= 0
            ? fmt::format("{:.1f}% (total x{:.2f})", 100 * op.in_situ_median_ape, op.in_situ_scale)
            : "-";
    rows.push_back({op.name, op.measured_by, std::to_string(op.samples),
                    std::to_string(op.held_out), fmt::format("{:.1f}%", 100 * op.held_out_mape),
                    fmt::format("{:.1f}%", 100 * op.held_out_median_ape), in_engine,
                    fmt::format("B {}, C {}", op.batch_max_seen, op.context_max_seen)});
    ops.push_back({{"op", op.name},
                   {"measured_by", op.measured_by},
                   {"fitted", op.samples},
                   {"held_out", op.held_out},
                   {"regimes", op.regimes.size()},
                   {"fit_mape", op.fit_mape},
                   {"held_out_mape", op.held_out_mape},
                   {"held_out_median_ape", op.held_out_median_ape},
                   {"in_situ_scale", op.in_situ_scale},
                   {"in_situ_median_ape", op.in_situ_median_ape}});
  }
  const std::vector<std::string> header = {"op",
                                           "measured by",
                                           "fitted",
                                           "held out",
                                           "held-out MAPE",
                                           "held-out median error",
                                           "the engine's own calls: median error",
                                           "measured up to"};
  std::string intro = fmt::format(
      "{} {} on {}, model {}. An op measured by the grid was timed in isolation (`exitsim engine "
      "profile-ops`); by a trace, fitted from the engine's running calls. The engine's own "
      "calls column compares a grid fit with the same op's calls in the profiled runs (their "
      "total over the fit's prediction in brackets: the engine's ops run slower than the same "
      "op in isolation, whose weights stay in cache).",
      profile.source.engine, profile.source.backend, profile.source.hardware, profile.source.model);
  if (profile.source.speed_probe_us > 0)
    intro += fmt::format(" Speed probe at calibration: {:.1f} us.", profile.source.speed_probe_us);
  return section("Calibration error",
                 "<p>" + html_escape(intro) + "</p>\n" + html_table(header, rows));
}

std::string validation_section(const json& v) {
  std::string body;
  const json speed = v.is_object() && v.contains("speed") ? v["speed"] : json::object();
  body += "<p>" +
          html_escape(fmt::format(
              "The engine ran each strategy {} times on {} (warm-up {} requests, OpenMP wait "
              "policy {}); each figure is the median of its runs, with their range and "
              "coefficient of variation. A figure passes within its target, or inside the "
              "engine's own range: closer than that, no run of the engine could confirm it. In "
              "brackets after a simulated figure: the simulator's runs with every price lower and "
              "higher by the same-batch median error, the profile's measured precision; where "
              "that alone moves a figure beyond its target, the figure is too sensitive to the "
              "prices at this load to be predicted to its target.",
              v.value("repeats", 1), v.value("hardware", std::string("?")),
              v.value("warmup_requests", 0), v.value("omp_wait_policy", std::string("default")))) +
          "</p>\n";
  const double change = json_number(speed, "change");
  if (!std::isnan(change) && json_number(speed, "calibration_us") > 0) {
    const bool beyond = std::abs(change) > json_number(speed, "tolerance");
    body += "<p" + std::string(beyond ? " class=\"warning\"" : "") + ">" +
            html_escape(fmt::format(
                "Speed probe: {:.1f} us at calibration, {:.1f} us at the start and {:.1f} us at "
                "the end of the validation ({:+.1f}%){}{}.",
                json_number(speed, "calibration_us"), json_number(speed, "start_us"),
                json_number(speed, "end_us"), 100 * change,
                beyond ? ": the machine's speed changed beyond the tolerance, and the errors "
                         "include that change"
                       : "",
                speed.value("normalized", false)
                    ? fmt::format("; the engine's times were normalized by x{:.3f}",
                                  json_number(speed, "factor"))
                    : "")) +
            "</p>\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& s : v.value("strategies", json::array())) {
    const std::string strategy = s.value("strategy", std::string("?"));
    const json iterations = s.value("iterations", json::object());
    const json same = s.contains("same_batches") && s["same_batches"].is_object()
                          ? s["same_batches"]
                          : json::object();
    const auto judged = [](double error, double target) {
      return std::isnan(target) ? std::string()
                                : fmt::format("{} (target {:.0f}%)",
                                              error <= target ? "pass" : "FAIL", 100 * target);
    };
    rows.push_back({strategy, "the engine's own batches priced (median error per step)", "", "",
                    percent(json_number(same, "median_ape")),
                    judged(json_number(same, "median_ape"), json_number(same, "target"))});
    rows.push_back(
        {strategy, "the simulator's own run, step by step (median error)", "", "",
         percent(json_number(iterations, "median_ape")),
         judged(json_number(iterations, "median_ape"), json_number(iterations, "target"))});
    for (const json& m : s.value("metrics", json::array())) {
      const double cv = json_number(m, "engine_cv");
      const std::string engine =
          m.value("engine_runs", 1) > 1
              ? fmt::format("{} [{}, {}] cv {:.1f}%", fmt_number(json_number(m, "engine")),
                            fmt_number(json_number(m, "engine_min")),
                            fmt_number(json_number(m, "engine_max")), 100 * cv)
              : fmt_number(json_number(m, "engine"));
      rows.push_back({strategy, m.value("metric", std::string("?")), engine, simulated_cell(m),
                      percent(json_number(m, "relative_error")),
                      verdict_cell(m) + sensitivity_note(m, json_number(s, "price_change"))});
    }
    rows.push_back({strategy, "all targets", "", "", "", s.value("pass", false) ? "PASS" : "FAIL"});
  }
  const std::vector<std::string> header = {"strategy",
                                           "metric",
                                           "engine (median [min, max])",
                                           "simulated [prices -/+ the same-batch error]",
                                           "error",
                                           "judgement"};
  return section("Validation against the engine", body + html_table(header, rows));
}

}  // namespace exitsim::analysis::report_parts

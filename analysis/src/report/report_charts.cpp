// The report's charts of the frontier's configurations: capacity against quality, per strategy
// and against the batch limit, and the latency, depth and K/V distributions behind them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "exitsim/analysis/svg_chart.hpp"
#include "report_parts.hpp"

namespace exitsim::analysis::report_parts {

namespace {

using nlohmann::json;

bool placed(const FrontierRow& p) {
  return p.same_as == p.run && std::isfinite(p.efficiency) && std::isfinite(p.quality);
}

bool on_frontier(const Report& r, std::size_t run) {
  return std::find(r.frontier.begin(), r.frontier.end(), run) != r.frontier.end();
}

// The frontier's distinct configurations, best efficiency first, then the references not on
// it: the configurations whose distributions the report draws.
std::vector<std::size_t> frontier_and_references(const Report& r) {
  std::vector<std::size_t> out(r.frontier.rbegin(), r.frontier.rend());
  for (const FrontierRow& p : r.points) {
    if (p.reference && placed(p) && !on_frontier(r, p.run))
      out.push_back(p.run);
  }
  return out;
}

// The chart's tooltip for a point: its full key and both values.
std::string tooltip(const FrontierRow& p) {
  return fmt::format("{}: {}, {}", p.reference ? "full depth (reference), " + p.key : p.key,
                     fmt_number(p.efficiency), fmt_number(p.quality));
}

// A configuration but for its batch limit: one line of the batch-limit chart.
std::string line_name(const ChartInputs& c, std::size_t run) {
  const std::string axes = other_axes(c.in.runs[run], false);
  return setting_label(c.settings[run], c.report.points[run].reference) +
         (axes.empty() ? "" : " " + axes);
}

}  // namespace

std::string frontier_chart(const ChartInputs& c) {
  const Report& r = c.report;
  ChartSeries front{"Pareto frontier", {}, true, {}, true};
  ChartSeries reference{"full depth (reference)", {}, false, {}, true};
  ChartSeries others{"other configurations", {}, false, {}};
  for (const std::size_t f : r.frontier) {
    front.points.emplace_back(r.points[f].efficiency, r.points[f].quality);
    front.labels.push_back(c.labels[f]);
  }
  for (const FrontierRow& p : r.points) {
    if (!placed(p) || on_frontier(r, p.run))
      continue;
    ChartSeries& s = p.reference ? reference : others;
    s.points.emplace_back(p.efficiency, p.quality);
    s.labels.push_back(p.reference ? c.labels[p.run] : tooltip(p));
  }
  const std::vector<ChartSeries> series = {front, reference, others};
  return svg_xy_chart({is_capacity(c.in.efficiency_objective.metric) ? "Capacity against quality"
                                                                     : "Efficiency against quality",
                       efficiency_title(c.in, c.plan), quality_title(c.in), false, 900, 420},
                      series);
}

std::string by_strategy_chart(const ChartInputs& c) {
  const Report& r = c.report;
  // (strategy and the axes other than the batch limit) -> exit setting label -> best point.
  std::map<std::string, std::map<std::string, std::size_t>> best;
  for (const FrontierRow& p : r.points) {
    if (!placed(p))
      continue;
    const RunSetting& s = c.settings[p.run];
    const RunRecord& run = c.in.runs[p.run];
    const std::string axes = other_axes(run, false);
    const std::string series =
        p.reference ? "full depth (reference)" : s.strategy + (axes.empty() ? "" : " " + axes);
    const std::string setting = p.reference ? "full depth" : exit_label(s);
    auto [at, fresh] = best[series].try_emplace(setting, p.run);
    const bool better = c.in.efficiency_objective.maximize
                            ? p.efficiency > r.points[at->second].efficiency
                            : p.efficiency < r.points[at->second].efficiency;
    if (!fresh && better)
      at->second = p.run;
  }
  std::vector<ChartSeries> series;
  for (const auto& [name, settings] : best) {
    // Along the quality axis, so that the line runs through the thresholds in order.
    std::vector<std::pair<std::pair<double, double>, std::string>> labelled;
    for (const auto& [setting, run] : settings) {
      const FrontierRow& p = r.points[run];
      const double batch = c.settings[run].max_running;
      labelled.push_back({{p.efficiency, p.quality},
                          batch > 0 ? fmt::format("{} @{:g}", setting, batch) : setting});
    }
    std::sort(labelled.begin(), labelled.end(),
              [](const auto& a, const auto& b) { return a.first.second < b.first.second; });
    ChartSeries s{name, {}, true, {}, true};
    for (const auto& [point, label] : labelled) {
      s.points.push_back(point);
      s.labels.push_back(label);
    }
    series.push_back(s);
  }
  return "<p>Each strategy's exit settings, each at its best batch limit (labelled threshold "
         "@batch limit).</p>\n" +
         svg_xy_chart({"Capacity against quality per strategy", efficiency_title(c.in, c.plan),
                       quality_title(c.in), false, 900, 420},
                      series);
}

std::string by_batch_limit_chart(const ChartInputs& c, std::vector<std::string>& notes) {
  const Report& r = c.report;
  // The configurations drawn: the frontier's and the reference's settings of everything but
  // the batch limit; each a line over the batch limits the sweep tried.
  std::map<std::string, ChartSeries> lines;
  std::vector<std::string> wanted;
  for (const std::size_t run : frontier_and_references(r)) {
    const std::string name = line_name(c, run);
    if (std::find(wanted.begin(), wanted.end(), name) == wanted.end())
      wanted.push_back(name);
  }
  // Runs that do the same work share their outcome, so each run's own efficiency is its point's.
  std::vector<double> batch_limits;
  for (const FrontierRow& p : r.points) {
    if (!std::isfinite(p.efficiency))
      continue;
    const double batch = c.settings[p.run].max_running;
    if (std::find(batch_limits.begin(), batch_limits.end(), batch) == batch_limits.end())
      batch_limits.push_back(batch);
    const std::string name = line_name(c, p.run);
    if (std::find(wanted.begin(), wanted.end(), name) == wanted.end())
      continue;
    ChartSeries& s = lines[name];
    s.name = name;
    if (std::find_if(s.points.begin(), s.points.end(),
                     [&](const auto& q) { return q.first == batch; }) == s.points.end())
      s.points.emplace_back(batch, p.efficiency);
  }
  if (batch_limits.size() < 2) {
    notes.push_back(
        "the sweep does not vary scheduler.max_running: no chart of capacity against the batch "
        "limit");
    return empty_note(notes.back());
  }
  std::vector<ChartSeries> series;
  for (const std::string& name : wanted) {
    ChartSeries s = lines[name];
    std::sort(s.points.begin(), s.points.end());
    series.push_back(s);
  }
  return svg_xy_chart({"Capacity against the batch limit (the frontier's configurations)",
                       "scheduler.max_running (sequences per batch; log scale)",
                       efficiency_title(c.in, c.plan), true},
                      series);
}

std::string frontier_distributions(const ChartInputs& c, std::vector<std::string>& notes) {
  const Report& r = c.report;
  std::vector<std::size_t> shown = frontier_and_references(r);
  constexpr std::size_t k_most = 8;  // one colour each
  if (shown.size() > k_most) {
    notes.push_back(fmt::format(
        "the distributions show {} of the frontier's {} configurations and references (the "
        "most efficient first)",
        k_most, shown.size()));
    shown.resize(k_most);
  }
  if (shown.empty()) {
    // No frontier (no quality table): the first distinct configurations, said so.
    for (const FrontierRow& p : r.points) {
      if (p.same_as == p.run && shown.size() < k_most)
        shown.push_back(p.run);
    }
    if (shown.empty())
      return empty_note("no sweep runs");
    notes.push_back(fmt::format(
        "no frontier: the distributions show the sweep's first {} distinct configurations",
        shown.size()));
  }
  std::vector<ChartSeries> tpot, ttft, kv;
  std::string depth_charts;
  for (const std::size_t i : shown) {
    const json summary = run_summary(c.in.runs[i]);
    const std::string& name = c.labels[i];
    ChartSeries t{name, {}, true, {}};
    ChartSeries f{name, {}, true, {}};
    for (const char* p : {"p50", "p90", "p95", "p99"}) {
      const double percentile = std::stod(std::string(p).substr(1));
      t.points.emplace_back(percentile, summary["tpot_ms"][p].get<double>());
      f.points.emplace_back(percentile, summary["ttft_ms"][p].get<double>());
    }
    tpot.push_back(t);
    ttft.push_back(f);
    ChartSeries k{name, {}, true, {}};
    for (const json& point : summary["series"]["points"])
      k.points.emplace_back(point["start_ns"].get<double>() / 1e9, point["kv_usage"].get<double>());
    kv.push_back(k);
    std::vector<std::pair<std::string, double>> bars;
    for (const auto& [depth, tokens] : summary["depth"]["exit_depth_tokens"].items())
      bars.emplace_back(depth, tokens.get<double>());
    std::sort(bars.begin(), bars.end(),
              [](const auto& a, const auto& b) { return std::stod(a.first) < std::stod(b.first); });
    depth_charts +=
        "<figure>" +
        svg_bar_chart({name, "exit depth (layers)", "output tokens", false, 420, 260, false},
                      bars) +
        "</figure>\n";
  }
  const std::string at_load =
      "<p>From each configuration's sweep run, at the sweep's offered load (not at its "
      "capacity).</p>\n";
  return at_load +
         svg_xy_chart({"TPOT percentiles", "percentile", "time per output token (ms)"}, tpot) +
         svg_xy_chart({"TTFT percentiles", "percentile", "time to first token (ms)"}, ttft) +
         "<h3>Exit depths</h3>\n" + depth_charts +
         svg_xy_chart({"K/V memory over time", "time (s)", "fraction of K/V blocks in use"}, kv);
}

}  // namespace exitsim::analysis::report_parts

#include "exitsim/analysis/report.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "analysis/support/png_pixels.hpp"
#include "exitsim/analysis/validation.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::error_of;
using test_support::TempDir;

constexpr const char* k_quality =
    "# exitsim-quality-table v2\n"
    "policy,strategy,measure,threshold,capacities,tokens,nll_per_token,top1_agreement,"
    "mean_exit_depth,p_exit_1,p_exit_2,p_exit_3\n"
    "full_depth,full_depth,,,,100,1.30,1.00,31,0,0,1\n"
    "confidence,state_copy,top1,0.5,,100,1.50,0.95,15,0.6,0.3,0.1\n"
    "confidence,state_copy,top1,0.9,,100,1.35,0.99,24,0.2,0.3,0.5\n";

// A confidence sweep on a 3-recursion model, its quality table in `dir`: `extra` holds the
// scenario's sync section (if any) and its sweep axes.
std::vector<RunRecord> sweep_of(const TempDir& dir, const std::string& extra) {
  const std::string table = dir.write("quality.csv", k_quality);
  SweepOptions o;
  o.scenario_file = dir.write(
      "sweep.yaml",
      "name: sweep\nmodel:\n  preset: mor-smollm-360m-r3\n"
      "workload:\n  requests: 40\n  input_tokens: {max: 1536}\n  output_tokens: {max: 512}\n"
      "exit_policy:\n  kind: confidence\n  threshold: 0.5\n"
      "  threshold_table: " +
          table + "\n" + extra);
  o.database = dir.path("runs.db");
  o.jobs = 2;
  run_sweep(o);
  return SweepDatabase(o.database).runs();
}

// Two thresholds x two batch limits under state_copy.
std::vector<RunRecord> sweep_runs(const TempDir& dir) {
  return sweep_of(dir,
                  "sync:\n  strategy: state_copy\n"
                  "sweep:\n"
                  "  - key: exit_policy.threshold\n    values: [0.5, 0.9]\n"
                  "  - key: scheduler.max_running\n    values: [8, 64]\n");
}

// Configurations that do the same work are one point: thresholds under full_depth exit nobody,
// so the full-depth runs at two thresholds are one point, the reference; state_copy's two
// thresholds exit differently and stay two points.
TEST(Report, ConfigurationsThatDoTheSameWorkAreOnePoint) {
  TempDir dir;
  ReportInputs in;
  in.runs = sweep_of(dir,
                     "sweep:\n"
                     "  - key: exit_policy.threshold\n    values: [0.5, 0.9]\n"
                     "  - key: sync.strategy\n    values: [full_depth, state_copy]\n");
  ASSERT_EQ(in.runs.size(), 4U);
  in.quality = policy::QualityTable::read(dir.path("quality.csv"));
  const Report r = build_report(in);
  std::vector<std::size_t> reference, distinct;
  for (const FrontierRow& p : r.points) {
    if (p.reference)
      reference.push_back(p.same_as);
    if (p.same_as == p.run)
      distinct.push_back(p.run);
  }
  ASSERT_EQ(reference.size(), 2U);
  EXPECT_EQ(reference[0], reference[1]) << "the two full-depth runs are one point";
  EXPECT_EQ(distinct.size(), 3U);
  EXPECT_EQ(r.points[reference[0]].also.size(), 2U);  // it names both runs it stands for
  EXPECT_NE(r.html.find("full depth (reference)"), std::string::npos);
  EXPECT_NE(r.html.find("3 distinct configurations"), std::string::npos);
  for (std::size_t i = 0; i < r.frontier.size(); ++i) {
    for (std::size_t j = i + 1; j < r.frontier.size(); ++j) {
      const FrontierRow& a = r.points[r.frontier[i]];
      const FrontierRow& b = r.points[r.frontier[j]];
      EXPECT_FALSE(a.efficiency == b.efficiency && a.quality == b.quality)
          << "two frontier points with the same outcome";
    }
  }
}

// A plan of the same sweep gives each configuration its efficiency: the load it sustains within
// the SLOs, not its throughput at the sweep's (possibly light) offered load.
TEST(Report, EfficiencyIsTheSustainableCapacityWhenThePlanCoversEveryRun) {
  TempDir dir;
  ReportInputs in;
  in.runs = sweep_runs(dir);
  ASSERT_EQ(in.runs.size(), 4U);
  in.quality = policy::QualityTable::read(dir.path("quality.csv"));
  std::string candidates;
  for (std::size_t i = 0; i < in.runs.size(); ++i) {
    candidates += (i == 0 ? "" : ",") +
                  fmt::format(
                      "{{\"candidate\": \"{}\", \"load_key\": \"workload.arrivals.rate\", "
                      "\"max_load_per_replica\": {}, \"output_tokens_per_s_at_max\": {}, "
                      "\"tpot_p99_ms_at_max\": 1, \"replicas\": 0, \"cost_per_hour\": 0, "
                      "\"recommended\": false}}",
                      in.runs[i].point.key, 10.0 * static_cast<double>(i + 1),
                      100.0 * static_cast<double>(i + 1));
  }
  const std::string plan =
      "{\"format\": \"exitsim-plan v1\", \"recommendation\": \"r\", "
      "\"candidates\": [";
  in.plan_json = plan + candidates + "]}";
  EXPECT_EQ(default_efficiency(in), "sustainable_load");
  in.efficiency_objective = {"sustainable_load", true};
  const Report r = build_report(in);
  for (std::size_t i = 0; i < r.points.size(); ++i)
    EXPECT_DOUBLE_EQ(r.points[i].efficiency, 10.0 * static_cast<double>(i + 1));
  EXPECT_NE(r.html.find("Capacity against quality"), std::string::npos);
  EXPECT_EQ(r.html.find("not a capacity"), std::string::npos);
  in.efficiency_objective = {"sustainable_tokens_per_s", true};
  EXPECT_DOUBLE_EQ(build_report(in).points[1].efficiency, 200.0);

  // A plan without every run's configuration: the report falls back to throughput and says that
  // it is not a capacity.
  in.plan_json = plan + candidates.substr(0, candidates.rfind(",{")) + "]}";
  EXPECT_EQ(default_efficiency(in), "throughput_tokens_per_s");
  in.efficiency_objective = {"throughput_tokens_per_s", true};
  EXPECT_NE(build_report(in).html.find("not a capacity"), std::string::npos);
  in.plan_json.clear();
  in.efficiency_objective = {"sustainable_load", true};
  EXPECT_THROW(build_report(in), InputError);
}

// The verdict's arithmetic: the most efficient frontier configuration within the quality
// budget, its gain over full depth, and the refusal to recommend when none is within it.
TEST(Report, TheVerdictPicksTheBestConfigurationWithinTheQualityBudget) {
  TempDir dir;
  ReportInputs in;
  in.runs = sweep_of(dir,
                     "sweep:\n"
                     "  - key: sync.strategy\n    values: [full_depth, state_copy]\n"
                     "  - key: exit_policy.threshold\n    values: [0.5, 0.9]\n");
  ASSERT_EQ(in.runs.size(), 4U);
  in.quality = policy::QualityTable::read(dir.path("quality.csv"));
  // Capacities: full depth 10, state_copy at 0.5 13 (NLL 1.50, +15.4%), at 0.9 12 (1.35, +3.8%).
  std::string candidates;
  for (const RunRecord& run : in.runs) {
    const double capacity = run.point.key.find("full_depth") != std::string::npos ? 10
                            : run.point.key.find("0.5") != std::string::npos      ? 13
                                                                                  : 12;
    candidates += (candidates.empty() ? "" : ",") +
                  fmt::format(
                      "{{\"candidate\": \"{}\", \"max_load_per_replica\": {}, "
                      "\"output_tokens_per_s_at_max\": 1, \"replicas\": {}, \"gpus\": {}, "
                      "\"cost_per_hour\": 6, "
                      "\"cost_per_million_tokens\": {}, \"load_key\": \"rate\", "
                      "\"cost_per_million_tokens_at_capacity\": {}, "
                      "\"tpot_p99_ms_at_max\": 1.5, \"recommended\": false}}",
                      run.point.key, capacity, capacity == 10 ? 4 : 3, capacity == 10 ? 8 : 6,
                      capacity == 10 ? 0.7 : 0.5, 6 / capacity);
  }
  in.plan_json = "{\"format\": \"exitsim-plan v1\", \"recommendation\": \"r\", \"candidates\": [" +
                 candidates + "]}";
  in.efficiency_objective = {"sustainable_load", true};
  in.max_quality_loss = 0.05;
  const Report within = build_report(in);
  EXPECT_NE(within.verdict.find("sync.strategy=state_copy; exit_policy.threshold=0.9"),
            std::string::npos)
      << within.verdict;
  // At capacity: 6 per hour over 12 and over 10 requests/s's worth (the plan's figures).
  EXPECT_NE(within.verdict.find("At its capacity a replica costs 0.5 per million output tokens "
                                "(full depth: 0.6)"),
            std::string::npos)
      << within.verdict;
  EXPECT_NE(within.verdict.find("(1.200x full depth)"), std::string::npos) << within.verdict;
  // Replicas of parallel.tensor 2: 6 GPUs for 3 replicas.
  EXPECT_NE(within.verdict.find("it needs 3 replica(s) (6 GPU(s)), 6 per hour, 0.5 per million "
                                "output tokens (full depth: 4 replica(s), 0.7 per million"),
            std::string::npos)
      << within.verdict;
  EXPECT_NE(within.verdict.find("no validation given"), std::string::npos);
  EXPECT_NE(within.html.find("<h2>Verdict</h2>"), std::string::npos);
  in.max_quality_loss = 0.01;
  EXPECT_NE(build_report(in).verdict.find("does not pay off"), std::string::npos);
  in.max_quality_loss = 0.2;
  EXPECT_NE(build_report(in).verdict.find("(1.300x full depth)"), std::string::npos);
}

TEST(Report, ChartsTheFrontierAndEveryNumber) {
  TempDir dir;
  ReportInputs in;
  in.runs = sweep_runs(dir);
  ASSERT_EQ(in.runs.size(), 4U);
  in.quality = policy::QualityTable::read(dir.path("quality.csv"));
  const Report r = build_report(in);
  ASSERT_EQ(r.points.size(), 4U);
  EXPECT_DOUBLE_EQ(r.points[0].quality, 1.50);  // threshold 0.5
  EXPECT_DOUBLE_EQ(r.points[3].quality, 1.35);  // threshold 0.9
  ASSERT_FALSE(r.frontier.empty());
  // Every frontier run is undominated: no run is both faster and better.
  for (const std::size_t f : r.frontier) {
    for (const FrontierRow& p : r.points) {
      EXPECT_FALSE(p.efficiency > r.points[f].efficiency && p.quality < r.points[f].quality);
    }
  }
  EXPECT_GT(r.hypervolume, 0);
  EXPECT_NE(r.html.find("<svg"), std::string::npos);
  EXPECT_NE(r.html.find("Pareto frontier"), std::string::npos);
  EXPECT_NE(r.html.find("Capacity against the batch limit"), std::string::npos);
  // Lognormal prompts clamped to [16, 1536] in every run: the report says so, with the runs.
  EXPECT_NE(r.html.find("Warnings: where a run is not exactly the work asked for"),
            std::string::npos);
  EXPECT_NE(r.html.find("workload.input_tokens: "), std::string::npos);
  EXPECT_NE(r.html.find(" of 4</td>"), std::string::npos);
  // Self-contained: no script and nothing fetched.
  EXPECT_EQ(r.html.find("<script"), std::string::npos);
  EXPECT_EQ(r.html.find("src="), std::string::npos);
  EXPECT_EQ(r.html.find("href="), std::string::npos);
  EXPECT_NE(r.json.find("\"hypervolume\""), std::string::npos);
  EXPECT_EQ(r.frontier_csv.rfind("configuration,throughput_tokens_per_s,nll_per_token,", 0), 0U);
  // What was not given is said, in the report and in its notes.
  EXPECT_NE(r.html.find("no validation"), std::string::npos);
  EXPECT_NE(r.html.find("no capacity plan"), std::string::npos);
}

// The HTML of one section of the report, from its title to its end.
std::string section_of(const std::string& html, const std::string& title) {
  const std::size_t at = html.find("<h2>" + title + "</h2>");
  if (at == std::string::npos)
    return "";
  return html.substr(at, html.find("</section>", at) - at);
}

// The legend entries of every chart in `html` (the series' names, right of each plot).
std::vector<std::string> legend_of(const std::string& html) {
  std::vector<std::string> out;
  const std::regex entry(R"(height="10" fill="#[0-9a-f]+"/><text x="\d+" y="\d+">([^<]*)</text>)");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), entry);
       it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

// Full depth and state_copy at two thresholds and two batch limits, and a plan in which the
// larger batch limit carries each configuration further: the frontier is full depth, state_copy
// at 0.9 and at 0.5, all at 64 sequences; full depth at 8 is a reference off the frontier.
ReportInputs planned_sweep(const TempDir& dir) {
  ReportInputs in;
  in.runs = sweep_of(dir,
                     "sweep:\n"
                     "  - key: sync.strategy\n    values: [full_depth, state_copy]\n"
                     "  - key: exit_policy.threshold\n    values: [0.5, 0.9]\n"
                     "  - key: scheduler.max_running\n    values: [8, 64]\n");
  in.quality = policy::QualityTable::read(dir.path("quality.csv"));
  std::string candidates;
  for (const RunRecord& run : in.runs) {
    const bool full = run.point.key.find("full_depth") != std::string::npos;
    const bool wide = run.point.key.find("max_running=64") != std::string::npos;
    const double capacity = (full                                             ? 10
                             : run.point.key.find("0.5") != std::string::npos ? 12
                                                                              : 11) *
                            (wide ? 2.0 : 1.0);
    candidates += (candidates.empty() ? "" : ",") +
                  fmt::format(
                      "{{\"candidate\": \"{}\", \"max_load_per_replica\": {}, "
                      "\"output_tokens_per_s_at_max\": 1, \"replicas\": 3, \"cost_per_hour\": 6, "
                      "\"cost_per_million_tokens\": 0.5, \"load_key\": \"workload.arrivals.rate\", "
                      "\"tpot_p99_ms_at_max\": 1.5, \"recommended\": false}}",
                      run.point.key, capacity);
  }
  in.plan_json = "{\"format\": \"exitsim-plan v1\", \"recommendation\": \"r\", \"candidates\": [" +
                 candidates + "]}";
  in.efficiency_objective = {"sustainable_load", true};
  return in;
}

// The frontier chart names each frontier point by strategy, threshold and batch limit beside
// the point, draws the reference, and titles its axes with their units.
TEST(Report, TheFrontierChartLabelsItsPointsAndTitlesItsAxes) {
  TempDir dir;
  const ReportInputs in = planned_sweep(dir);
  const Report r = build_report(in);
  ASSERT_EQ(r.frontier.size(), 3U);
  const std::string chart = section_of(r.html, "Pareto frontier");
  for (const char* label : {"state_copy 0.5 max_running=64", "state_copy 0.9 max_running=64",
                            "full depth max_running=64", "full depth max_running=8"}) {
    EXPECT_NE(chart.find(std::string("\">") + label + "</text>"), std::string::npos)
        << label << " is not drawn beside its point";
  }
  EXPECT_NE(chart.find("sustainable load per replica within the SLOs (requests/s)"),
            std::string::npos);
  EXPECT_NE(chart.find("NLL per token (nats; lower is better)"), std::string::npos);
  const std::vector<std::string> legend = legend_of(chart);
  EXPECT_NE(std::find(legend.begin(), legend.end(), "full depth (reference)"), legend.end());
}

// Per strategy, one line through its exit settings at the best batch limit; against the batch
// limit, one line per frontier configuration (and the reference), priced by the plan.
TEST(Report, ChartsCapacityPerStrategyAndAgainstTheBatchLimit) {
  TempDir dir;
  const ReportInputs in = planned_sweep(dir);
  const Report r = build_report(in);
  const std::string per_strategy = section_of(r.html, "Capacity against quality per strategy");
  EXPECT_EQ(legend_of(per_strategy),
            (std::vector<std::string>{"full depth (reference)", "state_copy"}));
  // Each threshold at its best batch limit (64), labelled with it.
  EXPECT_NE(per_strategy.find(">0.5 @64</text>"), std::string::npos) << per_strategy;
  EXPECT_NE(per_strategy.find(">0.9 @64</text>"), std::string::npos);
  EXPECT_EQ(per_strategy.find("@8<"), std::string::npos);
  const std::string batch = section_of(r.html, "Capacity against the batch limit");
  EXPECT_EQ(legend_of(batch),
            (std::vector<std::string>{"state_copy 0.5", "state_copy 0.9", "full depth"}));
  // The plan's capacities at 8 and 64: state_copy 0.5 at 12 and 24.
  EXPECT_NE(batch.find("<title>8, 12</title>"), std::string::npos) << batch;
  EXPECT_NE(batch.find("<title>64, 24</title>"), std::string::npos);
}

// The distributions are those of the frontier's distinct configurations and the reference, each
// once: not four identical full-depth runs.
TEST(Report, DistributionsAreOfTheFrontiersDistinctConfigurations) {
  TempDir dir;
  const ReportInputs in = planned_sweep(dir);
  const Report r = build_report(in);
  const std::string shown =
      section_of(r.html, "Latency, exit depths and K/V memory of the frontier's configurations");
  const std::vector<std::string> expected = {
      "state_copy 0.5 max_running=64", "state_copy 0.9 max_running=64", "full depth max_running=64",
      "full depth max_running=8"};
  const std::vector<std::string> legend = legend_of(shown);
  // TPOT, TTFT and K/V charts: the same four configurations each.
  ASSERT_EQ(legend.size(), 3 * expected.size()) << shown;
  for (std::size_t k = 0; k < legend.size(); ++k)
    EXPECT_EQ(legend[k], expected[k % expected.size()]);
  EXPECT_NE(shown.find("TTFT percentiles"), std::string::npos);
  EXPECT_NE(shown.find("at the sweep's offered load (not at its capacity)"), std::string::npos);
  // One exit-depth histogram each, titled with the configuration.
  std::vector<std::string> depth_titles;
  const std::regex title(R"(<figure><svg[^>]*>\n<text[^>]*font-weight="bold">([^<]*)</text>)");
  for (auto it = std::sregex_iterator(shown.begin(), shown.end(), title);
       it != std::sregex_iterator(); ++it) {
    depth_titles.push_back((*it)[1].str());
  }
  EXPECT_EQ(depth_titles, expected);
}

// A screenshot of `html` taken by headless Chromium (empty when Chromium is not installed).
std::optional<test_support::Image> screenshot(const TempDir& dir, const std::string& name,
                                              const std::string& html) {
  if (!std::filesystem::exists("/usr/bin/chromium"))
    return std::nullopt;
  const std::string page = dir.write(name + ".html", html);
  const std::string png = dir.path(name + ".png");
  const std::string command =
      "timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic "
      "--no-first-run --disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir='" +
      dir.path(name + "-profile") + "' --window-size=1000,2600 --screenshot='" + png +
      "' 'file://" + page + "' >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0)
    return std::nullopt;
  return test_support::read_png(png);
}

// The page as a browser draws it: the frontier's colour (#1f77b4, the first series of every
// chart: markers, lines, legend swatches) is on screen over a chart's worth of pixels, where a
// report with nothing to chart has none of it.
TEST(Report, RendersItsChartsInHeadlessChromium) {
  if (!std::filesystem::exists("/usr/bin/chromium"))
    GTEST_SKIP() << "headless Chromium is not installed (apt-get install chromium)";
  TempDir dir;
  const std::optional<test_support::Image> page =
      screenshot(dir, "report", build_report(planned_sweep(dir)).html);
  const std::optional<test_support::Image> blank = screenshot(dir, "blank", build_report({}).html);
  ASSERT_TRUE(page && blank) << "chromium failed to take a screenshot";
  EXPECT_EQ(page->width, 1000U);
  EXPECT_EQ(page->height, 2600U);
  EXPECT_EQ(blank->count(0x1f, 0x77, 0xb4), 0U);
  EXPECT_GT(page->count(0x1f, 0x77, 0xb4), 500U);
  // The page is mostly white paper with ink on it, not a blank or an error page.
  const std::size_t white = page->count(0xff, 0xff, 0xff);
  EXPECT_GT(white, page->width * page->height / 2);
  EXPECT_LT(white, page->width * page->height * 97 / 100);
}

// A validation that priced none of the engine's own steps has no per-step error to state: the
// trust line says so rather than "within 0.0%".
TEST(Report, TheTrustLineStatesNoErrorThatWasNotMeasured) {
  TempDir dir;
  ReportInputs in = planned_sweep(dir);
  in.validation_json =
      R"({"format": "exitsim-validation v1", "strategies": [{"strategy": "depthwise", )"
      R"("iterations": {"median_ape": 0.1, "p90_ape": 0.2}, "metrics": []}]})";
  const std::string verdict = build_report(in).verdict;
  EXPECT_NE(verdict.find("the validation holds no per-step error"), std::string::npos) << verdict;
  EXPECT_EQ(verdict.find("within 0.0%"), std::string::npos) << verdict;
  in.validation_json =
      R"({"format": "exitsim-validation v1", "strategies": [{"strategy": "depthwise", )"
      R"("iterations": {"median_ape": 0.1, "p90_ape": 0.2}, "metrics": [], )"
      R"("same_batches": {"median_ape": 0.07}}]})";
  EXPECT_NE(build_report(in).verdict.find("within 7.0% (median per step, worst strategy "
                                          "depthwise): WARNING, above the 5% target"),
            std::string::npos);
}

// The validation section shows each figure against the engine's own spread over its repeats and
// judges it: a prediction 7% off the median but inside the engine's range passes; one outside
// fails; the speed probe's change beyond its tolerance is a warning; the verdict counts the
// strategies that met every target. Built from what `exitsim validate` writes.
TEST(Report, ValidationShowsTheEnginesSpreadAndJudgesEachTarget) {
  std::vector<analysis::EngineRunMeasurement> runs(5);
  const std::vector<double> throughputs = {100, 90, 110, 95, 105};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    runs[i].summary.throughput_tokens_per_s = throughputs[i];
    runs[i].summary.ttft.p50 = 10;
    runs[i].iterations = {1000, 1000};
    runs[i].priced_steps = {1020, 1020};
  }
  sim::MetricsSummary simulated;
  simulated.throughput_tokens_per_s = 107;
  simulated.ttft.p50 = 13;  // 30% off every run's 10 ms: outside the range
  const std::vector<TimeNs> it = {1000, 1000};
  const std::vector<analysis::ValidationResult> results = {
      analysis::compare_runs("state_copy", runs, simulated, it)};
  analysis::ValidationConditions conditions;
  conditions.hardware = "some cpu x 1 thread, pinned";
  conditions.repeats = 5;
  conditions.speed = {100, 118, 122, 0.10, false, 1};
  TempDir dir;
  ReportInputs in = planned_sweep(dir);
  in.validation_json = analysis::validation_json(results, conditions);
  const Report r = build_report(in);
  EXPECT_NE(r.html.find("100 [90, 110] cv 7.9%"), std::string::npos) << r.html;
  EXPECT_NE(r.html.find("<td>107</td><td>7.0%</td><td>pass (inside the engine's range)</td>"),
            std::string::npos);
  EXPECT_NE(r.html.find("<td>ttft_p50_ms</td><td>10 [10, 10] cv 0.0%</td><td>13</td>"
                        "<td>30.0%</td><td>FAIL</td>"),
            std::string::npos);
  EXPECT_NE(r.html.find("on some cpu x 1 thread, pinned"), std::string::npos);
  EXPECT_NE(r.html.find("class=\"warning\">Speed probe: 100.0 us at calibration"),
            std::string::npos);
  EXPECT_NE(r.verdict.find("0 of 1 validated strategies met every target (over 5 engine runs"),
            std::string::npos)
      << r.verdict;
}

// With validate's price band, the simulated cell shows the figure priced lower and higher by the
// same-batch error, and a judged figure the band moves beyond its target is named as not
// predictable to it at this load; one the band moves less is not.
TEST(Report, ValidationShowsThePriceBandAndWhatItCannotPredict) {
  analysis::EngineRunMeasurement run;
  run.summary.throughput_tokens_per_s = 100;
  run.summary.tpot.p50 = 2;
  run.iterations = {1000};
  run.priced_steps = {1030};
  const std::vector<TimeNs> it = {1000};
  std::vector<analysis::ValidationResult> results = {
      analysis::compare_runs("full_depth", std::span(&run, 1), run.summary, it)};
  sim::MetricsSummary lower = run.summary;
  sim::MetricsSummary upper = run.summary;
  upper.throughput_tokens_per_s = 101;
  upper.tpot.p50 = 3;
  analysis::add_price_band(results[0], 0.03, lower, upper);
  TempDir dir;
  ReportInputs in = planned_sweep(dir);
  in.validation_json = analysis::validation_json(results, {});
  const Report r = build_report(in);
  EXPECT_NE(r.html.find("<td>tpot_p50_ms</td><td>2</td><td>2 [2, 3]</td><td>0.0%</td><td>pass; "
                        "prices off by the profile's 3.0% move it 50%: not predictable to 5% "
                        "at this load</td>"),
            std::string::npos)
      << r.html;
  EXPECT_NE(r.html.find("<td>100 [100, 101]</td><td>0.0%</td><td>pass</td>"), std::string::npos);
}

TEST(Report, SaysWhatIsMissingInsteadOfDrawingNothing) {
  const Report empty = build_report({});
  EXPECT_TRUE(empty.frontier.empty());
  EXPECT_NE(empty.html.find("no sweep runs"), std::string::npos);
  EXPECT_NE(empty.html.find("no cost profile"), std::string::npos);

  TempDir dir;
  ReportInputs in;
  in.runs = sweep_runs(dir);
  const Report no_quality = build_report(in);
  EXPECT_NE(no_quality.html.find("no quality table"), std::string::npos);
  // A table without the runs' settings: nothing to put on the frontier, and the report says so.
  in.quality = policy::QualityTable::read(
      dir.write("other.csv",
                "# exitsim-quality-table v2\n"
                "policy,strategy,measure,threshold,capacities,tokens,nll_per_token,top1_agreement,"
                "mean_exit_depth,p_exit_1,p_exit_2,p_exit_3\n"
                "confidence,state_copy,top1,0.7,,100,1.4,0.97,20,0.3,0.3,0.4\n"));
  const Report unmatched = build_report(in);
  EXPECT_TRUE(unmatched.frontier.empty());
  EXPECT_NE(unmatched.html.find("empty frontier"), std::string::npos);
}

TEST(Report, RefusesMalformedInputs) {
  ReportInputs in;
  in.validation_json = "{not json";
  EXPECT_NE(error_of([&] { build_report(in); }).find("--validation"), std::string::npos);
  in.validation_json = R"({"format": "something else"})";
  EXPECT_NE(error_of([&] { build_report(in); }).find("exitsim-validation v1"), std::string::npos);
  ReportInputs bad_axis;
  bad_axis.efficiency_objective = {"speed", true};
  TempDir dir;
  bad_axis.runs = sweep_runs(dir);
  EXPECT_NE(error_of([&] { build_report(bad_axis); }).find("--efficiency"), std::string::npos);
}

// A sweep database is a file the user passes: a run summary edited by hand (a percentile written
// as a string, a depth key that is no number, text that is no JSON) was an internal error, or
// undefined behaviour on a missing key. Each is one line naming the run and the key path; the
// summaries the sweep wrote are read.
TEST(Report, RefusesARunSummaryWithoutWhatTheChartsRead) {
  TempDir dir;
  const std::vector<RunRecord> written = sweep_runs(dir);
  ASSERT_FALSE(written.empty());
  ReportInputs in;
  in.runs = written;
  EXPECT_NO_THROW(build_report(in));
  const std::string key = written[0].point.key;
  const auto error_with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json summary = nlohmann::json::parse(written[0].metrics.summary_json);
    edit(summary);
    in.runs[0].metrics.summary_json = summary.dump();
    return error_of([&] { build_report(in); });
  };
  EXPECT_EQ(error_with([](nlohmann::json& s) { s["tpot_ms"]["p99"] = "12.5"; }),
            "--db: the run " + key + ": tpot_ms.p99: expected a finite number, found \"12.5\"");
  EXPECT_EQ(error_with([](nlohmann::json& s) { s.erase("series"); }),
            "--db: the run " + key + ": series: expected an object (or null), found none");
  EXPECT_EQ(error_with([](nlohmann::json& s) { s["depth"]["exit_depth_tokens"]["deep"] = 3; }),
            "--db: the run " + key +
                ": depth.exit_depth_tokens.deep: expected a depth in layers as the key, found "
                "\"deep\"");
  in.runs[0].metrics.summary_json = "{\"tpot_ms\": ";
  EXPECT_EQ(
      error_of([&] {
        build_report(in);
      }).rfind("--db: the run " + key + ": expected a run summary, found invalid JSON at byte", 0),
      0U);
}

}  // namespace
}  // namespace exitsim::analysis

#include "exitsim/analysis/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "exitsim/core/nearest_rank.hpp"
#include "exitsim/sim/metrics/latency_sketch.hpp"

namespace exitsim::analysis {

namespace {

MetricComparison compared(std::string metric, double engine, double simulated) {
  return {std::move(metric), engine, simulated, relative_error(engine, simulated)};
}

}  // namespace

double relative_error(double reference, double simulated) {
  return reference != 0 ? std::abs(simulated - reference) / std::abs(reference)
                        : (simulated == 0 ? 0.0 : 1.0);
}

RunSpread spread_of_runs(std::vector<double> values) {
  RunSpread out;
  if (values.empty())
    return out;
  std::sort(values.begin(), values.end());
  out.min = values.front();
  out.max = values.back();
  out.median = values[(values.size() - 1) / 2];
  double mean = 0;
  for (const double v : values)
    mean += v;
  mean /= static_cast<double>(values.size());
  double variance = 0;
  for (const double v : values)
    variance += (v - mean) * (v - mean);
  if (values.size() > 1 && mean != 0) {
    out.cv = std::sqrt(variance / static_cast<double>(values.size() - 1)) / std::abs(mean);
  }
  return out;
}

IterationError compare_iterations(std::span<const TimeNs> engine,
                                  std::span<const TimeNs> simulated) {
  IterationError e;
  e.engine_iterations = static_cast<std::int64_t>(engine.size());
  e.simulated_iterations = static_cast<std::int64_t>(simulated.size());
  const std::size_t n = std::min(engine.size(), simulated.size());
  e.matched = static_cast<std::int64_t>(n);
  std::vector<double> errors;
  errors.reserve(n);
  double engine_sum = 0;
  double simulated_sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    engine_sum += static_cast<double>(engine[i]);
    simulated_sum += static_cast<double>(simulated[i]);
    if (engine[i] > 0) {
      // In double: a wild price must give a wild error, not a signed overflow.
      errors.push_back(
          std::abs(static_cast<double>(simulated[i]) - static_cast<double>(engine[i])) /
          static_cast<double>(engine[i]));
    }
  }
  e.median_ape = core::nearest_rank_value(errors, 0.5);
  e.p90_ape = core::nearest_rank_value(errors, 0.9);
  if (n > 0) {
    e.engine_mean_us = engine_sum / static_cast<double>(n) / 1000.0;
    e.simulated_mean_us = simulated_sum / static_cast<double>(n) / 1000.0;
  }
  return e;
}

namespace {

MetricComparison judged(std::string metric, const std::vector<double>& engine_runs,
                        double simulated, double target) {
  const RunSpread spread = spread_of_runs(engine_runs);
  MetricComparison m = compared(std::move(metric), spread.median, simulated);
  m.engine_runs = static_cast<int>(engine_runs.size());
  m.engine_min = spread.min;
  m.engine_max = spread.max;
  m.engine_cv = spread.cv;
  m.inside_engine_range = simulated >= spread.min && simulated <= spread.max;
  m.target = target;
  m.pass = target <= 0 || m.relative_error <= target ||
           (engine_runs.size() > 1 && m.inside_engine_range);
  m.simulated_low = simulated;
  m.simulated_high = simulated;
  return m;
}

struct NamedMetric {
  std::string name;
  double value = 0;
  bool judged = false;  // against ValidationTargets::metric
};

// The request metrics validation compares, in the order of ValidationResult::metrics.
std::vector<NamedMetric> metric_values(const sim::MetricsSummary& summary) {
  std::vector<NamedMetric> out{{"throughput_tokens_per_s", summary.throughput_tokens_per_s, true}};
  const auto add = [&](const char* name, const sim::LatencyStats& stats) {
    out.push_back({fmt::format("{}_p50_ms", name), stats.p50, true});
    out.push_back({fmt::format("{}_p90_ms", name), stats.p90, false});
    out.push_back({fmt::format("{}_p99_ms", name), stats.p99, false});
  };
  add("ttft", summary.ttft);
  add("tpot", summary.tpot);
  add("e2e", summary.e2e);
  out.push_back({"queueing_p50_ms", summary.queueing.p50, false});
  out.push_back({"queueing_p90_ms", summary.queueing.p90, false});
  return out;
}

// The run whose error is the median of the runs' (the lower middle for an even count).
std::size_t median_run(const std::vector<double>& errors) {
  std::vector<std::size_t> order(errors.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return errors[a] < errors[b]; });
  return order[(order.size() - 1) / 2];
}

}  // namespace

ValidationResult compare_runs(const std::string& strategy,
                              std::span<const EngineRunMeasurement> engine,
                              const sim::MetricsSummary& simulated,
                              std::span<const TimeNs> simulated_iterations,
                              const ValidationTargets& targets) {
  if (engine.empty())
    throw std::invalid_argument("compare_runs: no engine run");
  ValidationResult r;
  r.strategy = strategy;
  r.targets = targets;
  std::vector<IterationError> per_run;
  for (const EngineRunMeasurement& run : engine) {
    per_run.push_back(compare_iterations(run.iterations, simulated_iterations));
    r.iteration_median_by_run.push_back(per_run.back().median_ape);
  }
  r.iterations = per_run[median_run(r.iteration_median_by_run)];
  std::vector<IterationError> same;
  for (const EngineRunMeasurement& run : engine) {
    if (run.priced_steps.empty())
      continue;
    same.push_back(compare_iterations(run.iterations, run.priced_steps));
    r.same_batch_median_by_run.push_back(same.back().median_ape);
  }
  if (!same.empty())
    r.same_batches = same[median_run(r.same_batch_median_by_run)];

  // Throughput, then TTFT, TPOT, E2E at p50, p90, p99 (the p50s judged against the target), then
  // queueing, judged only through TTFT: a few milliseconds of queue at light load give large
  // relative errors that say little.
  const std::vector<NamedMetric> simulated_values = metric_values(simulated);
  std::vector<std::vector<NamedMetric>> run_values;
  for (const EngineRunMeasurement& run : engine)
    run_values.push_back(metric_values(run.summary));
  for (std::size_t i = 0; i < simulated_values.size(); ++i) {
    std::vector<double> runs;
    for (const std::vector<NamedMetric>& values : run_values)
      runs.push_back(values[i].value);
    const NamedMetric& m = simulated_values[i];
    r.metrics.push_back(judged(m.name, runs, m.value, m.judged ? targets.metric : 0));
  }

  r.pass = r.iterations.median_ape <= targets.iteration_median &&
           (!r.same_batches || r.same_batches->median_ape <= targets.same_batch_median);
  for (const MetricComparison& m : r.metrics)
    r.pass = r.pass && m.pass;
  return r;
}

double SpeedCheck::change() const {
  if (calibration_us <= 0 || start_us <= 0 || end_us <= 0)
    return 0;
  return 0.5 * (start_us + end_us) / calibration_us - 1;
}

std::string SpeedCheck::describe() const {
  if (calibration_us <= 0) {
    return fmt::format(
        "speed probe {:.1f} us at the start, {:.1f} us at the end; the profile holds no reading "
        "to compare with (calibrated before the probe existed)",
        start_us, end_us);
  }
  const double c = change();
  std::string out = fmt::format(
      "speed probe {:.1f} us at calibration, {:.1f} us at the start and {:.1f} us at the end of "
      "this validation: the machine is {:.1f}% {} now",
      calibration_us, start_us, end_us, 100 * std::abs(c), c >= 0 ? "slower" : "faster");
  if (std::abs(c) > tolerance) {
    out += fmt::format(" (WARNING: beyond {:.0f}%; errors below include the change{})",
                       100 * tolerance,
                       normalized ? "" : "; --normalize-speed rescales the engine's times");
  }
  if (normalized)
    out += fmt::format("; engine times normalized to calibration speed (x{:.3f})", factor);
  return out;
}

double MetricComparison::price_sensitivity() const {
  if (simulated == 0)
    return 0;
  return std::max(simulated_high - simulated, simulated - simulated_low) / std::abs(simulated);
}

void add_price_band(ValidationResult& result, double change, const sim::MetricsSummary& lower,
                    const sim::MetricsSummary& upper) {
  const std::vector<NamedMetric> low = metric_values(lower);
  const std::vector<NamedMetric> high = metric_values(upper);
  if (low.size() != result.metrics.size())
    throw std::invalid_argument("add_price_band: the result's metrics are not validation's");
  result.price_change = change;
  for (std::size_t i = 0; i < result.metrics.size(); ++i) {
    MetricComparison& m = result.metrics[i];
    m.simulated_low = std::min({m.simulated, low[i].value, high[i].value});
    m.simulated_high = std::max({m.simulated, low[i].value, high[i].value});
  }
}

std::string validation_csv(std::span<const ValidationResult> results) {
  // Against a benchmark the simulator's spread over the arrival seeds is two more columns.
  const bool seeds = std::any_of(results.begin(), results.end(),
                                 [](const ValidationResult& r) { return r.reference != "engine"; });
  std::string out =
      "strategy,metric,engine,simulated,relative_error,engine_min,engine_max,engine_cv,target,"
      "pass,simulated_low,simulated_high";
  out += seeds ? ",simulated_seed_min,simulated_seed_max\n" : "\n";
  for (const ValidationResult& r : results) {
    if (r.reference != "engine") {
      for (const MetricComparison& m : r.metrics) {
        out += fmt::format("{},{},{:.6g},{:.6g},{:.6g},,,,{},{},,,{:.6g},{:.6g}\n", r.strategy,
                           m.metric, m.engine, m.simulated, m.relative_error,
                           m.target > 0 ? fmt::format("{:.6g}", m.target) : "",
                           m.target > 0 ? (m.pass ? "true" : "false") : "", m.simulated_seed_min,
                           m.simulated_seed_max);
      }
      continue;
    }
    const IterationError& it = r.iterations;
    out += fmt::format(
        "{},iterations,{},{},{:.6g},,,,,,,\n", r.strategy, it.engine_iterations,
        it.simulated_iterations,
        it.engine_iterations > 0
            ? std::abs(static_cast<double>(it.simulated_iterations - it.engine_iterations)) /
                  static_cast<double>(it.engine_iterations)
            : 0.0);
    out += fmt::format("{},iteration_mean_us,{:.6g},{:.6g},{:.6g},,,,,,,\n", r.strategy,
                       it.engine_mean_us, it.simulated_mean_us,
                       it.engine_mean_us > 0
                           ? std::abs(it.simulated_mean_us - it.engine_mean_us) / it.engine_mean_us
                           : 0.0);
    out += fmt::format("{},iteration_ape_p50,,,{:.6g},,,,{:.6g},{},,\n", r.strategy, it.median_ape,
                       r.targets.iteration_median, it.median_ape <= r.targets.iteration_median);
    out += fmt::format("{},iteration_ape_p90,,,{:.6g},,,,,,,\n", r.strategy, it.p90_ape);
    if (r.same_batches) {
      out += fmt::format("{},same_batch_ape_p50,,,{:.6g},,,,{:.6g},{},,\n", r.strategy,
                         r.same_batches->median_ape, r.targets.same_batch_median,
                         r.same_batches->median_ape <= r.targets.same_batch_median);
      out += fmt::format("{},same_batch_ape_p90,,,{:.6g},,,,,,,\n", r.strategy,
                         r.same_batches->p90_ape);
      out += fmt::format(
          "{},same_batch_mean_us,{:.6g},{:.6g},{:.6g},,,,,,,\n", r.strategy,
          r.same_batches->engine_mean_us, r.same_batches->simulated_mean_us,
          r.same_batches->engine_mean_us > 0
              ? std::abs(r.same_batches->simulated_mean_us - r.same_batches->engine_mean_us) /
                    r.same_batches->engine_mean_us
              : 0.0);
    }
    for (const MetricComparison& m : r.metrics) {
      const bool band = r.price_change > 0;
      out +=
          fmt::format("{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{}\n", r.strategy,
                      m.metric, m.engine, m.simulated, m.relative_error, m.engine_min, m.engine_max,
                      m.engine_cv, m.target > 0 ? fmt::format("{:.6g}", m.target) : "",
                      m.target > 0 ? (m.pass ? "true" : "false") : "",
                      band ? fmt::format("{:.6g}", m.simulated_low) : "",
                      band ? fmt::format("{:.6g}", m.simulated_high) : "");
      if (seeds)
        out.insert(out.size() - 1, ",,");
    }
  }
  return out;
}

namespace {

// A strategy's comparison with a serving benchmark: request metrics only, the benchmark's figure
// under "benchmark" and the simulator's spread over the arrival seeds.
nlohmann::json benchmark_strategy_json(const ValidationResult& r) {
  nlohmann::json metrics = nlohmann::json::array();
  for (const MetricComparison& m : r.metrics) {
    nlohmann::json metric = {{"metric", m.metric},
                             {"benchmark", m.engine},
                             {"simulated", m.simulated},
                             {"simulated_seeds", m.simulated_seeds},
                             {"simulated_seed_min", m.simulated_seed_min},
                             {"simulated_seed_max", m.simulated_seed_max},
                             {"relative_error", m.relative_error},
                             {"benchmark_inside_seed_range", m.reference_inside_seed_range}};
    if (m.target > 0) {
      metric["target"] = m.target;
      metric["pass"] = m.pass;
    }
    metrics.push_back(std::move(metric));
  }
  return {{"strategy", r.strategy},
          {"reference", r.reference},
          {"pass", r.pass},
          {"targets", {{"metric", r.targets.metric}}},
          {"metrics", metrics}};
}

nlohmann::json provenance_json(const BenchmarkProvenance& p) {
  return {{"file", p.file},
          {"format", p.format},
          {"line", p.line},
          {"run", p.run},
          {"runs", p.runs},
          {"run_name", p.run_name},
          {"summary_only", p.summary_only},
          {"lengths", p.lengths},
          {"prefix_cache", p.prefix_cache},
          {"prompt_repetition", p.prompt_repetition},
          {"backend", p.backend},
          {"model_id", p.model_id},
          {"tokenizer_id", p.tokenizer_id},
          {"date", p.date},
          {"scenario_model", p.scenario_model},
          {"request_rate", p.request_rate},
          {"burstiness",
           std::isfinite(p.burstiness) ? nlohmann::json(p.burstiness) : nlohmann::json("inf")},
          {"requests_in_file", p.requests_in_file},
          {"requests_compared", p.requests_compared},
          {"excluded_failed", p.excluded_failed},
          {"arrival_seeds", p.arrival_seeds},
          {"arrivals", p.arrivals},
          {"max_concurrency",
           p.max_concurrency ? nlohmann::json(*p.max_concurrency) : nlohmann::json(nullptr)},
          {"max_concurrency_ignored", p.max_concurrency_ignored},
          {"overlay", p.overlay.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.overlay)},
          {"unmatched", p.unmatched}};
}

}  // namespace

std::string validation_json(std::span<const ValidationResult> results,
                            const ValidationConditions& conditions) {
  const SpeedCheck& speed = conditions.speed;
  nlohmann::json list = nlohmann::json::array();
  for (const ValidationResult& r : results) {
    if (r.reference != "engine") {
      list.push_back(benchmark_strategy_json(r));
      continue;
    }
    const IterationError& it = r.iterations;
    nlohmann::json metrics = nlohmann::json::array();
    for (const MetricComparison& m : r.metrics) {
      nlohmann::json metric = {{"metric", m.metric},
                               {"engine", m.engine},
                               {"engine_runs", m.engine_runs},
                               {"engine_min", m.engine_min},
                               {"engine_max", m.engine_max},
                               {"engine_cv", m.engine_cv},
                               {"simulated", m.simulated},
                               {"relative_error", m.relative_error},
                               {"inside_engine_range", m.inside_engine_range}};
      if (m.target > 0) {
        metric["target"] = m.target;
        metric["pass"] = m.pass;
      }
      if (r.price_change > 0) {
        metric["simulated_low"] = m.simulated_low;
        metric["simulated_high"] = m.simulated_high;
      }
      metrics.push_back(std::move(metric));
    }
    nlohmann::json same = nullptr;
    if (r.same_batches) {
      same = {{"steps", r.same_batches->matched},
              {"median_ape", r.same_batches->median_ape},
              {"p90_ape", r.same_batches->p90_ape},
              {"engine_mean_us", r.same_batches->engine_mean_us},
              {"priced_mean_us", r.same_batches->simulated_mean_us},
              {"median_ape_by_run", r.same_batch_median_by_run},
              {"target", r.targets.same_batch_median}};
    }
    list.push_back({{"strategy", r.strategy},
                    {"pass", r.pass},
                    {"same_batches", same},
                    {"iterations",
                     {{"engine", it.engine_iterations},
                      {"simulated", it.simulated_iterations},
                      {"matched", it.matched},
                      {"median_ape", it.median_ape},
                      {"p90_ape", it.p90_ape},
                      {"engine_mean_us", it.engine_mean_us},
                      {"simulated_mean_us", it.simulated_mean_us},
                      {"median_ape_by_run", r.iteration_median_by_run},
                      {"target", r.targets.iteration_median}}},
                    {"metrics", metrics},
                    {"price_change", r.price_change}});
  }
  const nlohmann::json probe = {{"calibration_us", speed.calibration_us},
                                {"start_us", speed.start_us},
                                {"end_us", speed.end_us},
                                {"change", speed.change()},
                                {"tolerance", speed.tolerance},
                                {"normalized", speed.normalized},
                                {"factor", speed.factor}};
  if (conditions.against) {
    return nlohmann::json{{"format", "exitsim-validation v1"},
                          {"hardware", conditions.hardware},
                          {"against", provenance_json(*conditions.against)},
                          {"strategies", list}}
               .dump(2) +
           "\n";
  }
  return nlohmann::json{{"format", "exitsim-validation v1"},
                        {"hardware", conditions.hardware},
                        {"repeats", conditions.repeats},
                        {"warmup_requests", conditions.warmup_requests},
                        {"omp_wait_policy", conditions.omp_wait_policy},
                        {"speed", probe},
                        {"strategies", list}}
             .dump(2) +
         "\n";
}

namespace {

// " [low, high]" of the price band, and for a judged figure the band moves further than its
// target, what that means.
std::string band_of(const ValidationResult& r, const MetricComparison& m) {
  if (r.price_change <= 0)
    return "";
  std::string out = fmt::format(" [{:.2f}, {:.2f}]", m.simulated_low, m.simulated_high);
  if (m.target > 0 && m.price_sensitivity() > m.target) {
    out += fmt::format(
        " (prices off by the profile's {:.1f}% move it {:.0f}%: not predictable to "
        "{:.0f}% here)",
        100 * r.price_change, 100 * m.price_sensitivity(), 100 * m.target);
  }
  return out;
}

}  // namespace

std::string format_validation(std::span<const ValidationResult> results) {
  std::string out;
  for (const ValidationResult& r : results) {
    if (r.reference != "engine") {
      const int seeds = r.metrics.empty() ? 0 : r.metrics.front().simulated_seeds;
      out +=
          seeds == 1
              ? fmt::format("{}: against the {}; simulated: one run, at the arrivals said below\n",
                            r.strategy, r.reference)
              : fmt::format(
                    "{}: against the {}; simulated: the median of {} runs, one per "
                    "reconstructed arrival seed, [lowest, highest] of them\n",
                    r.strategy, r.reference, seeds);
      for (const MetricComparison& m : r.metrics) {
        const std::string verdict =
            m.target > 0
                ? fmt::format("  {} (target {:.0f}%{})", m.pass ? "pass" : "FAIL", 100 * m.target,
                              m.reference_inside_seed_range
                                  ? ", the benchmark is inside the seeds' range"
                                  : "")
                : std::string();
        out += fmt::format(
            "  {:<28} {} {:>10.2f}  simulated {:>10.2f} [{:.2f}, {:.2f}]  error {:>5.1f}%{}\n",
            m.metric, r.reference, m.engine, m.simulated, m.simulated_seed_min,
            m.simulated_seed_max, 100 * m.relative_error, verdict);
      }
      out +=
          fmt::format("  {}: throughput and the p50s judged: within {:.0f}% or the seeds' range\n",
                      r.pass ? "PASS" : "FAIL", 100 * r.targets.metric);
      continue;
    }
    const IterationError& it = r.iterations;
    out += fmt::format(
        "{}: iterations engine {} / simulated {}; per-iteration error median {:.1f}%, p90 "
        "{:.1f}% (mean {:.0f} vs {:.0f} us)\n",
        r.strategy, it.engine_iterations, it.simulated_iterations, 100 * it.median_ape,
        100 * it.p90_ape, it.engine_mean_us, it.simulated_mean_us);
    if (r.same_batches) {
      out += fmt::format(
          "  the engine's own batches priced by the profile: error median {:.1f}%, p90 {:.1f}% "
          "(mean {:.0f} vs {:.0f} us over {} steps)\n",
          100 * r.same_batches->median_ape, 100 * r.same_batches->p90_ape,
          r.same_batches->engine_mean_us, r.same_batches->simulated_mean_us,
          r.same_batches->matched);
    } else {
      out += "  the engine's own batches: not recorded for this strategy\n";
    }
    if (r.price_change > 0) {
      out += fmt::format(
          "  simulated in brackets: its runs priced {:.1f}% lower and higher (the same-batch "
          "median error)\n",
          100 * r.price_change);
    }
    for (const MetricComparison& m : r.metrics) {
      const std::string spread = m.engine_runs > 1
                                     ? fmt::format(" [{:.2f}, {:.2f}] cv {:.1f}%", m.engine_min,
                                                   m.engine_max, 100 * m.engine_cv)
                                     : std::string();
      const std::string verdict =
          m.target > 0
              ? fmt::format(
                    "  {} (target {:.0f}%{})", m.pass ? "pass" : "FAIL", 100 * m.target,
                    m.inside_engine_range && m.engine_runs > 1 ? ", inside the engine's range" : "")
              : std::string();
      out += fmt::format("  {:<24} engine {:>10.2f}{}  simulated {:>10.2f}{}  error {:>5.1f}%{}\n",
                         m.metric, m.engine, spread, m.simulated, band_of(r, m),
                         100 * m.relative_error, verdict);
    }
    out += fmt::format(
        "  {}: per-iteration median {:.1f}% (target {:.0f}%){}\n", r.pass ? "PASS" : "FAIL",
        100 * r.iterations.median_ape, 100 * r.targets.iteration_median,
        r.same_batches
            ? fmt::format(", same batches {:.1f}% (target {:.0f}%)",
                          100 * r.same_batches->median_ape, 100 * r.targets.same_batch_median)
            : std::string());
  }
  return out;
}

}  // namespace exitsim::analysis

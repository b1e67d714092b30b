#include "exitsim/analysis/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <nlohmann/json.hpp>

namespace exitsim::analysis {

namespace {

double nearest_rank(std::vector<double> values, double p) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

MetricComparison compared(std::string metric, double engine, double simulated) {
  const double error =
      engine != 0 ? std::abs(simulated - engine) / std::abs(engine) : (simulated == 0 ? 0.0 : 1.0);
  return {std::move(metric), engine, simulated, error};
}

}  // namespace

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
  e.median_ape = nearest_rank(errors, 0.5);
  e.p90_ape = nearest_rank(errors, 0.9);
  if (n > 0) {
    e.engine_mean_us = engine_sum / static_cast<double>(n) / 1000.0;
    e.simulated_mean_us = simulated_sum / static_cast<double>(n) / 1000.0;
  }
  return e;
}

ValidationResult compare_runs(const std::string& strategy, const sim::MetricsSummary& engine,
                              const sim::MetricsSummary& simulated,
                              std::span<const TimeNs> engine_iterations,
                              std::span<const TimeNs> simulated_iterations) {
  ValidationResult r;
  r.strategy = strategy;
  r.iterations = compare_iterations(engine_iterations, simulated_iterations);
  r.metrics.push_back(compared("throughput_tokens_per_s", engine.throughput_tokens_per_s,
                               simulated.throughput_tokens_per_s));
  const auto add = [&](const char* name, const sim::LatencyStats& a, const sim::LatencyStats& b) {
    r.metrics.push_back(compared(fmt::format("{}_p50_ms", name), a.p50, b.p50));
    r.metrics.push_back(compared(fmt::format("{}_p90_ms", name), a.p90, b.p90));
    r.metrics.push_back(compared(fmt::format("{}_p99_ms", name), a.p99, b.p99));
  };
  add("ttft", engine.ttft, simulated.ttft);
  add("tpot", engine.tpot, simulated.tpot);
  add("e2e", engine.e2e, simulated.e2e);
  return r;
}

std::string validation_csv(std::span<const ValidationResult> results) {
  std::string out = "strategy,metric,engine,simulated,relative_error\n";
  for (const ValidationResult& r : results) {
    const IterationError& it = r.iterations;
    out += fmt::format(
        "{},iterations,{},{},{:.6g}\n", r.strategy, it.engine_iterations, it.simulated_iterations,
        it.engine_iterations > 0
            ? std::abs(static_cast<double>(it.simulated_iterations - it.engine_iterations)) /
                  static_cast<double>(it.engine_iterations)
            : 0.0);
    out += fmt::format("{},iteration_mean_us,{:.6g},{:.6g},{:.6g}\n", r.strategy, it.engine_mean_us,
                       it.simulated_mean_us,
                       it.engine_mean_us > 0
                           ? std::abs(it.simulated_mean_us - it.engine_mean_us) / it.engine_mean_us
                           : 0.0);
    out += fmt::format("{},iteration_ape_p50,,,{:.6g}\n", r.strategy, it.median_ape);
    out += fmt::format("{},iteration_ape_p90,,,{:.6g}\n", r.strategy, it.p90_ape);
    if (r.same_batches) {
      out +=
          fmt::format("{},same_batch_ape_p50,,,{:.6g}\n", r.strategy, r.same_batches->median_ape);
      out += fmt::format("{},same_batch_ape_p90,,,{:.6g}\n", r.strategy, r.same_batches->p90_ape);
      out += fmt::format(
          "{},same_batch_mean_us,{:.6g},{:.6g},{:.6g}\n", r.strategy,
          r.same_batches->engine_mean_us, r.same_batches->simulated_mean_us,
          r.same_batches->engine_mean_us > 0
              ? std::abs(r.same_batches->simulated_mean_us - r.same_batches->engine_mean_us) /
                    r.same_batches->engine_mean_us
              : 0.0);
    }
    for (const MetricComparison& m : r.metrics) {
      out += fmt::format("{},{},{:.6g},{:.6g},{:.6g}\n", r.strategy, m.metric, m.engine,
                         m.simulated, m.relative_error);
    }
  }
  return out;
}

std::string validation_json(std::span<const ValidationResult> results) {
  nlohmann::json list = nlohmann::json::array();
  for (const ValidationResult& r : results) {
    const IterationError& it = r.iterations;
    nlohmann::json metrics = nlohmann::json::array();
    for (const MetricComparison& m : r.metrics) {
      metrics.push_back({{"metric", m.metric},
                         {"engine", m.engine},
                         {"simulated", m.simulated},
                         {"relative_error", m.relative_error}});
    }
    nlohmann::json same = nullptr;
    if (r.same_batches) {
      same = {{"steps", r.same_batches->matched},
              {"median_ape", r.same_batches->median_ape},
              {"p90_ape", r.same_batches->p90_ape},
              {"engine_mean_us", r.same_batches->engine_mean_us},
              {"priced_mean_us", r.same_batches->simulated_mean_us}};
    }
    list.push_back({{"strategy", r.strategy},
                    {"same_batches", same},
                    {"iterations",
                     {{"engine", it.engine_iterations},
                      {"simulated", it.simulated_iterations},
                      {"matched", it.matched},
                      {"median_ape", it.median_ape},
                      {"p90_ape", it.p90_ape},
                      {"engine_mean_us", it.engine_mean_us},
                      {"simulated_mean_us", it.simulated_mean_us}}},
                    {"metrics", metrics}});
  }
  return nlohmann::json{{"format", "exitsim-validation v1"}, {"strategies", list}}.dump(2) + "\n";
}

std::string format_validation(std::span<const ValidationResult> results) {
  std::string out;
  for (const ValidationResult& r : results) {
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
    for (const MetricComparison& m : r.metrics) {
      out += fmt::format("  {:<24} engine {:>10.2f}  simulated {:>10.2f}  error {:>5.1f}%\n",
                         m.metric, m.engine, m.simulated, 100 * m.relative_error);
    }
  }
  return out;
}

}  // namespace exitsim::analysis

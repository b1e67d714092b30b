#include "exitsim/analysis/benchmark_validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "benchmark_summary.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/nearest_rank.hpp"
#include "exitsim/core/random.hpp"
#include "exitsim/core/request.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/metrics/latency_sketch.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/prefix_model.hpp"
#include "exitsim/traces/request_source.hpp"

namespace exitsim::analysis {
namespace {

constexpr double k_ns_per_ms = 1e6;

TimeNs to_ns(double seconds) {
  return static_cast<TimeNs>(std::llround(seconds * 1e9));
}

// Mean, p50, p90, p99 of `values` (ms): percentiles by nearest rank, as exitsim's metrics.
struct Stats {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};

Stats stats_of(std::vector<double> values) {
  Stats s;
  if (values.empty())
    return s;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (const double v : values)
    sum += v;
  const auto n = static_cast<std::int64_t>(values.size());
  const auto at = [&](double q) {
    return values[static_cast<std::size_t>(core::nearest_rank(q, n) - 1)];
  };
  s.mean = sum / static_cast<double>(n);
  s.p50 = at(0.5);
  s.p90 = at(0.9);
  s.p99 = at(0.99);
  return s;
}

void add_latency(std::vector<NamedFigure>& out, const char* name, const Stats& s) {
  out.push_back({fmt::format("{}_mean_ms", name), s.mean, false});
  out.push_back({fmt::format("{}_p50_ms", name), s.p50, true});
  out.push_back({fmt::format("{}_p90_ms", name), s.p90, false});
  out.push_back({fmt::format("{}_p99_ms", name), s.p99, false});
}

// The per-request values of the successful requests, in ms.
struct Samples {
  std::vector<double> ttft, tpot, itl, e2e;
  std::int64_t requests = 0;
  std::int64_t output_tokens = 0;
};

Samples samples_of(const traces::ServingBenchmark& b) {
  Samples s;
  for (const traces::BenchmarkRequest& r : b.requests) {
    if (r.failed)
      continue;
    ++s.requests;
    s.output_tokens += r.output_tokens;
    for (const TimeNs gap : r.itls)
      s.itl.push_back(static_cast<double>(gap) / k_ns_per_ms);
    s.ttft.push_back(static_cast<double>(r.ttft) / k_ns_per_ms);
    s.e2e.push_back(static_cast<double>(r.ttft + r.decode) / k_ns_per_ms);
    if (r.output_tokens > 1) {
      s.tpot.push_back(static_cast<double>(r.decode) / k_ns_per_ms /
                       static_cast<double>(r.output_tokens - 1));
    }
  }
  return s;
}

// Replays the successful requests at their arrivals, their prompts named by the request each
// repeats (`repetition`) in blocks of `block_tokens`.
class ReplaySource final : public traces::RequestSource {
 public:
  ReplaySource(const traces::ServingBenchmark& b, std::span<const TimeNs> arrivals,
               const PromptRepetition* repetition, std::int64_t block_tokens) {
    if (arrivals.size() != b.requests.size())
      throw std::invalid_argument("simulate_benchmark: one arrival per request of the file");
    if (repetition && repetition->first_sent.size() != b.requests.size())
      throw std::invalid_argument("simulate_benchmark: one repetition entry per request");
    for (std::size_t i = 0; i < b.requests.size(); ++i) {
      const traces::BenchmarkRequest& r = b.requests[i];
      if (r.failed)
        continue;
      RequestDescriptor d;
      d.id = RequestId(requests_.size());
      d.arrival = arrivals[i];
      d.input_tokens = r.input_tokens;
      d.output_tokens = r.output_tokens;
      if (repetition && repetition->period > 0 && block_tokens > 0) {
        d.prefix_block_tokens = block_tokens;
        for (std::int64_t k = 0; k < r.input_tokens / block_tokens; ++k) {
          d.prefix_hashes.push_back(sim::PrefixModelSource::block_name(
              sim::PrefixModelSource::k_benchmark_prompt, repetition->first_sent[i],
              static_cast<std::uint64_t>(k)));
        }
      }
      requests_.push_back(std::move(d));
    }
  }
  std::optional<RequestDescriptor> next() override {
    if (next_ == requests_.size())
      return std::nullopt;
    return requests_[next_++];
  }
  std::int64_t skipped_rows() const override { return 0; }
  bool has_arrivals() const override { return true; }
  std::string format_name() const override { return "serving benchmark"; }
  bool may_carry_prefix_hashes() const override { return true; }

 private:
  std::vector<RequestDescriptor> requests_;
  std::size_t next_ = 0;
};

// Refuses a request_rate whose reconstructed arrivals (`span_s` seconds from the first to the
// last) leave the arrival range the simulator's clock keeps (k_max_arrival_ns, about 146 years).
void check_arrival_span(const traces::ServingBenchmark& b, double rate, double span_s) {
  if (span_s * 1e9 <= static_cast<double>(k_max_arrival_ns))
    return;
  throw InputError(
      SourceLocation{b.path, b.line, 0, "request_rate"},
      expected_found(
          "a request rate whose reconstructed arrivals span at most 2^62 ns (about "
          "146 years)",
          fmt::format("{} ({} requests over {:.3g} s)", rate, b.requests.size(), span_s)));
}

}  // namespace

std::vector<TimeNs> benchmark_arrivals(const traces::ServingBenchmark& benchmark,
                                       std::uint64_t seed) {
  const std::size_t n = benchmark.requests.size();
  std::vector<TimeNs> arrivals(n, 0);
  if (benchmark.arrivals_recorded()) {
    for (std::size_t i = 0; i < n; ++i)
      arrivals[i] = benchmark.requests[i].sent.value_or(0);
    return arrivals;
  }
  if (!benchmark.request_rate || n == 0)
    return arrivals;
  const double rate = *benchmark.request_rate;
  // vLLM's last request is sent at n / rate; SGLang's and AIPerf's gaps have that mean.
  check_arrival_span(benchmark, rate, static_cast<double>(n) / rate);
  RandomStream rng(seed, "validate.against.arrivals");
  std::vector<double> sent(n, 0.0);  // seconds
  const double shape = benchmark.burstiness;
  if (benchmark.format != traces::ServingBenchmarkFormat::vllm) {
    // The first request at once, then an exponential (or, constant, an even) gap after each.
    for (std::size_t i = 1; i < n; ++i)
      sent[i] = sent[i - 1] + (std::isinf(shape) ? 1.0 / rate : rng.exponential(rate));
  } else {
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      total += std::isinf(shape) ? 1.0 / rate : rng.gamma(shape, 1.0 / (rate * shape));
      sent[i] = total;
    }
    // vLLM rescales the delays so that the last is num_requests / rate.
    if (total > 0) {
      const double scale = static_cast<double>(n) / rate / total;
      for (double& t : sent)
        t *= scale;
    }
  }
  // Relative to the first request, as the simulator's traces are.
  check_arrival_span(benchmark, rate, sent[n - 1] - sent[0]);
  for (std::size_t i = 0; i < n; ++i)
    arrivals[i] = to_ns(sent[i] - sent[0]);
  return arrivals;
}

std::vector<NamedFigure> benchmark_figures(const traces::ServingBenchmark& benchmark) {
  if (benchmark.summary_only)
    return summary_figures(benchmark);
  const Samples s = samples_of(benchmark);
  std::vector<NamedFigure> out{
      {"throughput_tokens_per_s", static_cast<double>(s.output_tokens) / benchmark.duration_s,
       true},
      {"throughput_requests_per_s", static_cast<double>(s.requests) / benchmark.duration_s, true}};
  add_latency(out, "ttft", stats_of(s.ttft));
  add_latency(out, "tpot", stats_of(s.tpot));
  if (benchmark.gaps_recorded)
    add_latency(out, "itl", stats_of(s.itl));
  add_latency(out, "e2e", stats_of(s.e2e));
  return out;
}

std::vector<NamedFigure> simulated_figures(const sim::MetricsSummary& summary) {
  std::vector<NamedFigure> out{
      {"throughput_tokens_per_s", summary.throughput_tokens_per_s, true},
      {"throughput_requests_per_s", summary.request_throughput_per_s, true}};
  const auto add = [&](const char* name, const sim::LatencyStats& l) {
    add_latency(out, name, Stats{l.mean, l.p50, l.p90, l.p99});
  };
  add("ttft", summary.ttft);
  add("tpot", summary.tpot);
  add("itl", summary.itl);
  add("e2e", summary.e2e);
  return out;
}

std::vector<std::string> summary_cross_checks(const traces::ServingBenchmark& benchmark,
                                              double tolerance) {
  if (benchmark.summary_only)
    return {};  // its summary is all there is
  const std::vector<NamedFigure> figures = benchmark_figures(benchmark);
  std::vector<std::string> out;
  // The file's key, and the figure computed here from its per-request records: the means,
  // medians and throughputs (a file's p99 interpolates where exitsim takes the nearest rank, too
  // far apart on a few hundred requests to say anything).
  for (const auto& figure_key : summary_figure_keys()) {
    // Named, not bound: clang 14 (the fuzz build's) refuses a lambda capturing a structured
    // binding.
    const auto& key = figure_key.first;
    const auto& name = figure_key.second;
    if (name.find("_p9") != std::string::npos)
      continue;
    const auto it = benchmark.summary.find(key);
    const auto mine_it = std::find_if(figures.begin(), figures.end(),
                                      [&](const NamedFigure& f) { return f.name == name; });
    if (it == benchmark.summary.end() || mine_it == figures.end())
      continue;
    const double mine = mine_it->value;
    const double theirs = it->second;
    const double scale = std::max(std::abs(mine), std::abs(theirs));
    if (scale > 0 && std::abs(mine - theirs) / scale > tolerance) {
      out.push_back(fmt::format(
          "the file's {} is {:.4g} but its per-request records give {:.4g} ({}; {:.1f}% apart){}",
          key, theirs, mine, name, 100 * std::abs(mine - theirs) / scale,
          name.ends_with("_p50_ms")
              ? ": a median of an even count interpolates between the two middle values, "
                "exitsim's is the nearest rank"
              : ""));
    }
  }
  return out;
}

std::vector<std::string> warm_prefix_cache_evidence(const traces::ServingBenchmark& benchmark,
                                                    const ModelShape& model,
                                                    const HardwareSpec& hardware,
                                                    int tensor_parallel, PromptReplay replay) {
  const double peak = hardware.peak_flops_for(model.dtype) * std::max(1, tensor_parallel);
  if (!(peak > 0) || benchmark.summary_only)  // a summary's requests are made up
    return {};
  const sim::RooflineCostModel counter = sim::RooflineCostModel::counting(model);
  const int depth = model.depth.stacked_depth();
  std::int64_t below = 0;
  std::int64_t compared = 0;
  double worst = 1;  // the smallest measured / floor
  std::string example;
  for (const traces::BenchmarkRequest& r : benchmark.requests) {
    if (r.failed)
      continue;
    ++compared;
    // Prefilling the prompt: its FLOPs as the roofline counts them (LM head for the first token).
    sim::BatchEntry prompt;
    prompt.query_tokens = r.input_tokens;
    prompt.depth = depth;
    prompt.emits_token = true;
    const double floor_s = counter.iteration_cost({&prompt, 1}).flops / peak;
    const double measured_s = static_cast<double>(r.ttft) / 1e9;
    if (measured_s >= floor_s)
      continue;
    ++below;
    if (measured_s / floor_s < worst) {
      worst = measured_s / floor_s;
      example = fmt::format("{:.0f} ms for {} prompt tokens, which take at least {:.0f} ms",
                            measured_s * 1e3, r.input_tokens, floor_s * 1e3);
    }
  }
  if (below == 0)
    return {};
  return {fmt::format(
      "prefix cache: {} of {} requests' first tokens came sooner than their prompts can be "
      "computed at {}'s peak on {} GPU(s) (e.g. {}): the server reused cached prefixes (prefix "
      "caching over prompts the benchmark repeated), {}",
      below, compared, hardware.name, std::max(1, tensor_parallel), example,
      replay == PromptReplay::warm
          ? "which --prefix-cache warm replays as cached only where it recognised the repetition"
      : replay == PromptReplay::computed
          ? "which the replay computes in full, so simulated TTFTs run high: try --prefix-cache "
            "warm (repeated prompts replayed as cached)"
          : "which the fit replays computed in full, so its prefill terms stand in for the cache: "
            "fit on runs without repeated prompts")};
}

void check_open_workload(const traces::ServingBenchmark& benchmark, bool ignore_max_concurrency) {
  if (!benchmark.max_concurrency || ignore_max_concurrency)
    return;
  throw InputError(
      {benchmark.path, benchmark.line, 0,
       benchmark.format == traces::ServingBenchmarkFormat::aiperf
           ? "input_config.loadgen.concurrency"
           : "max_concurrency"},
      expected_found("null: the simulator has no closed client limit (give "
                     "--ignore-max-concurrency to compare anyway, as an open workload)",
                     fmt::format("{}", *benchmark.max_concurrency)));
}

sim::MetricsSummary simulate_benchmark(const scenario::Scenario& scenario,
                                       const traces::ServingBenchmark& benchmark,
                                       std::span<const TimeNs> arrivals,
                                       const PromptRepetition* repetition) {
  const sim::SimulationConfig config = sim::simulation_config_from(scenario, "");
  ReplaySource source(benchmark, arrivals, repetition, scenario.scheduler.block_size);
  return sim::simulate(config, source).summary;
}

ValidationResult compare_with_benchmark(const std::string& strategy,
                                        std::span<const NamedFigure> benchmark,
                                        std::span<const sim::MetricsSummary> simulated,
                                        const ValidationTargets& targets) {
  if (simulated.empty())
    throw std::invalid_argument("compare_with_benchmark: no simulation");
  std::vector<std::vector<NamedFigure>> runs;
  for (const sim::MetricsSummary& s : simulated)
    runs.push_back(simulated_figures(s));
  ValidationResult r;
  r.strategy = strategy;
  r.reference = "benchmark";
  r.targets = targets;
  for (std::size_t i = 0; i < benchmark.size(); ++i) {
    std::vector<double> values;
    for (const std::vector<NamedFigure>& run : runs) {
      const auto it = std::find_if(run.begin(), run.end(), [&](const NamedFigure& f) {
        return f.name == benchmark[i].name;
      });
      if (it == run.end())
        throw std::invalid_argument("compare_with_benchmark: no simulated " + benchmark[i].name);
      values.push_back(it->value);
    }
    const RunSpread spread = spread_of_runs(std::move(values));
    MetricComparison m;
    m.metric = benchmark[i].name;
    m.engine = benchmark[i].value;
    m.engine_min = m.engine;
    m.engine_max = m.engine;
    m.simulated = spread.median;
    m.simulated_low = spread.median;
    m.simulated_high = spread.median;
    m.simulated_seeds = static_cast<int>(simulated.size());
    m.simulated_seed_min = spread.min;
    m.simulated_seed_max = spread.max;
    m.relative_error = relative_error(m.engine, m.simulated);
    m.reference_inside_seed_range = m.engine >= spread.min && m.engine <= spread.max;
    m.target = benchmark[i].judged ? targets.metric : 0;
    m.pass = m.target <= 0 || m.relative_error <= m.target || m.reference_inside_seed_range;
    r.pass = r.pass && m.pass;
    r.metrics.push_back(std::move(m));
  }
  return r;
}

}  // namespace exitsim::analysis

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <tuple>
#include <utility>

#include "exitsim/analysis/against_benchmark.hpp"
#include "exitsim/analysis/benchmark_validation.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/sim/workload/workload.hpp"

namespace exitsim::analysis {
namespace {

using traces::ServingBenchmark;
using traces::ServingBenchmarkFormat;

std::string arrivals_text(const ServingBenchmark& b, int seeds) {
  if (b.arrivals_recorded()) {
    return fmt::format(
        "recorded in the file ({}): each request replayed at its send time, no reconstruction "
        "needed",
        b.format == ServingBenchmarkFormat::guidellm ? "GuideLLM's request_start_time"
                                                     : "AIPerf's request_start_ns");
  }
  const std::string source =
      b.summary_only
          ? fmt::format("not in the file (summary only: {} requests sent)", b.summary_only->sent)
          : "not in the file";
  if (!b.request_rate) {
    return fmt::format(
        "{}: request_rate inf: every request sent at time 0 (no reconstruction "
        "needed)",
        source);
  }
  if (b.format == ServingBenchmarkFormat::vllm) {
    return fmt::format(
        "{}: gamma gaps of shape {} (burstiness) and mean 1/{} s, rescaled to end at n/rate as "
        "vLLM does, drawn under {} seeds",
        source, b.burstiness, *b.request_rate, seeds);
  }
  if (std::isinf(b.burstiness))
    return fmt::format("{}: even gaps of 1/{} s (AIPerf's constant mode)", source, *b.request_rate);
  return fmt::format("{}: Poisson at {} req/s ({}'s exponential gaps), drawn under {} seeds",
                     source, *b.request_rate,
                     b.format == ServingBenchmarkFormat::sglang ? "SGLang" : "AIPerf", seeds);
}

// What the file is and which of its runs and figures are compared, one line each.
void describe_run(const ServingBenchmark& b, const std::vector<NamedFigure>& figures,
                  std::vector<std::string>& unmatched) {
  if (b.runs > 1) {
    const char* kind =
        b.format == ServingBenchmarkFormat::guidellm ? "GuideLLM's benchmarks" : "JSON Lines";
    unmatched.push_back(
        fmt::format("the file holds {} runs ({}): run {}{}{} is compared{}; --run K picks another",
                    b.runs, kind, b.run, b.run_name.empty() ? "" : " (" + b.run_name + ")",
                    b.line > 0 ? fmt::format(", line {}", b.line) : "",
                    b.run == b.runs ? ", the last, by default" : ""));
  }
  if (b.summary_only) {
    std::string names;
    for (const NamedFigure& f : figures)
      names += (names.empty() ? "" : ", ") + f.name;
    unmatched.push_back(fmt::format(
        "figures: the file's summary only ({}); the rest are not in the file and not compared; "
        "its medians and percentiles may interpolate between requests where exitsim's take the "
        "nearest rank",
        names));
  } else if (!b.gaps_recorded) {
    unmatched.push_back(
        "figures: no ITL: the file records each request's mean inter-token gap only (compared "
        "as its TPOT), not the gaps");
  }
  for (const std::string& note : b.notes)
    unmatched.push_back(note);
}

BenchmarkProvenance provenance_of(const AgainstBenchmarkOptions& args, const ServingBenchmark& b,
                                  const scenario::Scenario& s) {
  BenchmarkProvenance p;
  p.file = args.file;
  p.format = traces::format_name(b.format);
  p.line = b.line;
  p.run = b.run;
  p.runs = b.runs;
  p.run_name = b.run_name;
  p.summary_only = b.summary_only.has_value();
  p.backend = b.backend;
  p.model_id = b.model_id;
  p.tokenizer_id = b.tokenizer_id;
  p.date = b.date;
  p.scenario_model = s.model.shape.name;
  p.request_rate = b.arrivals_recorded() ? "recorded"
                   : b.request_rate      ? fmt::format("{}", *b.request_rate)
                                         : "inf";
  p.burstiness = b.burstiness;
  p.requests_in_file = static_cast<std::int64_t>(b.requests.size());
  p.excluded_failed = b.failed_requests();
  p.requests_compared = p.requests_in_file - p.excluded_failed;
  p.max_concurrency = b.max_concurrency;
  p.max_concurrency_ignored = b.max_concurrency.has_value();
  p.arrivals = arrivals_text(b, args.arrival_seeds);
  p.prefix_cache = args.warm_prefix_cache ? "warm" : "off";
  return p;
}

// The simulator's runs of the benchmark on `s`, one per arrival seed.
std::vector<sim::MetricsSummary> replay(const ServingBenchmark& bench, const scenario::Scenario& s,
                                        std::span<const std::uint64_t> seeds,
                                        const PromptRepetition* repeats, const std::string& label,
                                        std::int64_t& rejected, const SeedProgress& progress) {
  std::vector<sim::MetricsSummary> runs;
  for (const std::uint64_t seed : seeds) {
    const std::vector<TimeNs> arrivals = benchmark_arrivals(bench, seed);
    runs.push_back(simulate_benchmark(s, bench, arrivals, repeats));
    rejected = std::max(rejected, runs.back().rejected.total());
    if (progress)
      progress(runs.size(), seeds.size(), fmt::format("{}seed {}", label, seed));
  }
  return runs;
}

// What the comparison cannot match, before any replay: how arrivals and lengths were obtained,
// the run and figures compared, failed requests, assumed burstiness, concurrency, the model names,
// the file's own summary cross-checks and the prefix cache's evidence. Appended to p.unmatched.
void note_what_is_not_matched(const ServingBenchmark& bench,
                              const std::vector<NamedFigure>& figures, const std::string& lengths,
                              const scenario::Scenario& s, bool warm, BenchmarkProvenance& p) {
  std::vector<std::string>& unmatched = p.unmatched;
  unmatched.push_back("arrivals: " + p.arrivals);
  if (!lengths.empty())
    unmatched.push_back(lengths);
  p.lengths = lengths.empty() ? "the file's, per request" : lengths;
  describe_run(bench, figures, unmatched);
  if (p.excluded_failed > 0 && !bench.summary_only) {
    unmatched.push_back(fmt::format(
        "{} of {} requests failed in the benchmark (error, no output or no first token) and are "
        "neither replayed nor compared",
        p.excluded_failed, p.requests_in_file));
  }
  if (bench.format == ServingBenchmarkFormat::vllm && !bench.burstiness_given)
    unmatched.push_back("the file names no burstiness: Poisson arrivals (burstiness 1) assumed");
  if (bench.max_concurrency) {
    unmatched.push_back(fmt::format(
        "max_concurrency {}: the benchmark held at most that many requests in flight; the "
        "simulator replays an open workload (--ignore-max-concurrency), so queueing differs",
        *bench.max_concurrency));
  }
  const std::string named = !bench.model_id.empty() ? bench.model_id : bench.tokenizer_id;
  unmatched.push_back(fmt::format(
      "model: the file names \"{}\" (backend \"{}\"), the scenario simulates \"{}\" on {}; "
      "exitsim cannot check that they are the same",
      named.empty() ? "none" : named, bench.backend, s.model.shape.name, s.hardware.spec.name));
  if (!bench.summary_only) {
    unmatched.push_back(
        "the scenario's workload section is not used: the file's request lengths replace it");
  }
  for (std::string& line : summary_cross_checks(bench))
    unmatched.push_back(std::move(line));
  for (std::string& line :
       warm_prefix_cache_evidence(bench, s.model.shape, s.hardware.spec, s.parallel.tensor,
                                  warm ? PromptReplay::warm : PromptReplay::computed))
    unmatched.push_back(std::move(line));
}

}  // namespace

ServingBenchmark pick_benchmark_run(const std::string& file, int run) {
  std::vector<ServingBenchmark> runs = traces::read_serving_benchmark_runs(file);
  const int count = static_cast<int>(runs.size());
  if (run > count) {
    throw InputError(
        {"", 0, 0, "--run"},
        expected_found(fmt::format("a run of {}: 1 to {}", file, count), fmt::format("{}", run)));
  }
  return std::move(runs[static_cast<std::size_t>(run > 0 ? run - 1 : count - 1)]);
}

AgainstBenchmarkComparison compare_against_benchmark(ServingBenchmark bench,
                                                     const scenario::Scenario& s,
                                                     const scenario::Scenario* overlaid,
                                                     const AgainstBenchmarkOptions& options,
                                                     const SeedProgress& progress) {
  const bool warm = options.warm_prefix_cache;
  std::string lengths;
  if (bench.summary_only) {
    const auto workload = sim::make_workload(s.workload, s.seed);
    std::tie(bench, lengths) = with_reconstructed_requests(bench, workload.get());
  }
  const std::vector<NamedFigure> figures = benchmark_figures(bench);
  if (figures.empty()) {
    throw InputError({options.file, bench.line, 0, ""},
                     expected_found("at least one figure exitsim compares (output or request "
                                    "throughput; TTFT, TPOT, ITL or E2E mean, median, p90, p99)",
                                    "none in its summary"));
  }

  BenchmarkProvenance p = provenance_of(options, bench, s);
  note_what_is_not_matched(bench, figures, lengths, s, warm, p);
  std::vector<std::string>& unmatched = p.unmatched;
  std::optional<PromptRepetition> repetition;
  if (warm) {
    repetition = recognise_prompt_repetition(bench);
    p.prompt_repetition = repetition->description;
    unmatched.push_back(repetition->description);
  }

  const int seeds = bench.request_rate && !bench.arrivals_recorded() ? options.arrival_seeds : 1;
  for (int k = 0; k < seeds; ++k)
    p.arrival_seeds.push_back(s.seed + static_cast<std::uint64_t>(k));
  const PromptRepetition* repeats = repetition ? &*repetition : nullptr;
  std::int64_t rejected = 0;
  const std::vector<sim::MetricsSummary> runs =
      replay(bench, s, p.arrival_seeds, repeats, "", rejected, progress);
  std::vector<ValidationResult> results{compare_with_benchmark(s.sync.strategy, figures, runs)};
  if (overlaid != nullptr) {
    // Its own label: the CSV's strategy column and the JSON's strategies tell the two apart.
    results.push_back(compare_with_benchmark(
        overlaid->sync.strategy + "+overlay", figures,
        replay(bench, *overlaid, p.arrival_seeds, repeats, "overlay, ", rejected, progress)));
    p.overlay = options.overlay;
    unmatched.push_back(
        fmt::format("overlay: {} laid over the scenario; its comparison is labelled {}+overlay",
                    options.overlay, overlaid->sync.strategy));
  }
  if (rejected > 0) {
    unmatched.push_back(fmt::format(
        "the scenario could not serve {} of the replayed requests (rejected; see simulate)",
        rejected));
  }
  if (warm && runs.front().prefix_cache) {
    unmatched.push_back(fmt::format(
        "the replay's prefix cache served {:.1f}% of the prompt tokens (the first arrival "
        "seed's run)",
        100 * runs.front().prefix_cache->token_hit_rate()));
  }

  // The file's own strings (model_id, backend) are shown as error messages show them: a terminal
  // escape in a benchmark file must not reach the console.
  const std::string what =
      bench.summary_only
          ? fmt::format("summary only: {} requests reconstructed, {} figures compared",
                        p.requests_compared, figures.size())
          : fmt::format("{} of {} requests compared", p.requests_compared, p.requests_in_file);
  AgainstBenchmarkComparison out;
  out.headline = one_safe_line(fmt::format(
      "{} ({}{}{}, {})", options.file, p.format, bench.backend.empty() ? "" : " " + bench.backend,
      bench.runs > 1 ? fmt::format(", run {} of {}", bench.run, bench.runs) : "", what));
  out.results = std::move(results);
  out.provenance = std::move(p);
  return out;
}

}  // namespace exitsim::analysis

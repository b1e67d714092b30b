#include "exitsim/sim/workload/workload.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/random.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/sim/workload/arrivals.hpp"
#include "exitsim/sim/workload/lengths.hpp"
#include "exitsim/sim/workload/prefix_model.hpp"
#include "exitsim/sim/workload/synthetic_source.hpp"
#include "exitsim/sim/workload/trace_replay_source.hpp"
#include "exitsim/traces/request_trace.hpp"

namespace exitsim::sim {
namespace {

std::unique_ptr<traces::RequestSource> make_synthetic(const scenario::WorkloadConfig& config,
                                                      std::uint64_t seed) {
  if (config.requests < 1) {
    throw_setting_error("workload.requests", "a request count >= 1",
                        fmt::format("{}", config.requests));
  }
  return std::make_unique<SyntheticRequestSource>(
      config.requests, make_arrival_process(config.arrivals, RandomStream(seed, k_arrivals_stream)),
      make_length_distribution(config.input_tokens, "workload.input_tokens",
                               RandomStream(seed, k_input_tokens_stream)),
      make_length_distribution(config.output_tokens, "workload.output_tokens",
                               RandomStream(seed, k_output_tokens_stream)));
}

std::optional<traces::RequestTraceFormat> trace_format(const std::string& name) {
  if (name.empty() || name == "auto")
    return std::nullopt;
  if (const auto format = traces::parse_request_trace_format(name))
    return format;
  std::vector<std::string> names = {"auto"};
  for (std::string& format_name : traces::request_trace_format_names()) {
    names.push_back(std::move(format_name));
  }
  std::string found = fmt::format("'{}'", name);
  const std::string hint = nearest_match(name, names);
  if (!hint.empty())
    found += fmt::format(" (did you mean '{}'?)", hint);
  throw_setting_error("workload.trace.format", one_of(names), found);
}

std::unique_ptr<traces::RequestSource> make_replay(const scenario::WorkloadConfig& config,
                                                   std::uint64_t seed) {
  const scenario::TraceConfig& trace = config.trace;
  if (trace.path.empty())
    throw_setting_error("workload.trace.path", "a request trace file", "an empty path");
  if (!(trace.rate_scale > 0.0) || !std::isfinite(trace.rate_scale)) {
    throw_setting_error("workload.trace.rate_scale", "a scale > 0",
                        fmt::format("{}", trace.rate_scale));
  }
  if (trace.max_requests < 0) {
    throw_setting_error("workload.trace.max_requests", "a request cap >= 0 (0 = whole trace)",
                        fmt::format("{}", trace.max_requests));
  }
  traces::RequestTraceOptions options;
  options.format = trace_format(trace.format);
  options.skip_bad_rows = trace.skip_bad_rows;
  options.columns.arrival = trace.columns.arrival;
  options.columns.arrival_unit = trace.columns.arrival_unit;
  options.columns.input_tokens = trace.columns.input_tokens;
  options.columns.output_tokens = trace.columns.output_tokens;
  options.tokenizer = trace.tokenizer;
  std::unique_ptr<traces::RequestSource> source = traces::open_request_trace(trace.path, options);
  std::unique_ptr<ArrivalProcess> arrivals;
  if (!source->has_arrivals()) {
    arrivals = make_arrival_process(config.arrivals, RandomStream(seed, k_arrivals_stream));
  }
  return std::make_unique<TraceReplaySource>(std::move(source), trace.rate_scale,
                                             trace.max_requests, std::move(arrivals));
}

}  // namespace

std::unique_ptr<traces::RequestSource> make_workload(const scenario::WorkloadConfig& config,
                                                     std::uint64_t seed) {
  if (config.prefix.kind == "sessions" && config.source == "trace") {
    throw_setting_error("workload.prefix.kind",
                        "none or system_prompts for a replayed trace (sessions set prompt lengths, "
                        "and a trace's are its own)",
                        "sessions");
  }
  std::unique_ptr<traces::RequestSource> source;
  if (config.source == "synthetic")
    source = make_synthetic(config, seed);
  else if (config.source == "trace")
    source = make_replay(config, seed);
  else
    throw_setting_error("workload.source", "synthetic or trace",
                        fmt::format("'{}'", config.source));
  if (config.prefix.kind.empty() || config.prefix.kind == "none")
    return source;
  return std::make_unique<PrefixModelSource>(std::move(source), config.prefix,
                                             RandomStream(seed, k_prefix_stream));
}

}  // namespace exitsim::sim

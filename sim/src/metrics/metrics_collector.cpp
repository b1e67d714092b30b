#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "exitsim/sim/metrics/latency_sketch.hpp"
#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "metrics/request_rows.hpp"
#include "metrics/usage_series.hpp"

namespace exitsim::sim {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw std::invalid_argument("MetricsCollector: " + message);
}

void check(const RequestRecord& r, int replicas) {
  if (r.replica < 0 || r.replica >= replicas) {
    invalid(fmt::format("request {} on replica {}, expected 0 to {}", r.id.value, r.replica,
                        replicas - 1));
  }
  if (!(r.arrival <= r.first_scheduled && r.first_scheduled <= r.first_token &&
        r.first_token <= r.completion)) {
    invalid(
        fmt::format("request {} with arrival {}, first_scheduled {}, first_token {}, "
                    "completion {} ns (expected them in that order)",
                    r.id.value, r.arrival, r.first_scheduled, r.first_token, r.completion));
  }
  if (r.output_tokens < 1 || r.input_tokens < 0 || r.preemptions < 0) {
    invalid(fmt::format("request {} with {} input tokens, {} output tokens, {} preemptions",
                        r.id.value, r.input_tokens, r.output_tokens, r.preemptions));
  }
}

// A latency compared with a target in milliseconds; equal counts as met.
bool meets(double latency_ns, const std::optional<double>& target_ms) {
  return !target_ms || latency_ns <= *target_ms * static_cast<double>(k_ns_per_ms);
}

bool meets_ttft(const RequestRecord& r, const SloTargets& slo) {
  return meets(static_cast<double>(r.first_token - r.arrival), slo.ttft_ms);
}

// TPOT is compared unrounded; a one-token output has no TPOT and meets any TPOT target.
bool meets_tpot(const RequestRecord& r, const SloTargets& slo) {
  return r.output_tokens == 1 || meets(static_cast<double>(r.completion - r.first_token) /
                                           static_cast<double>(r.output_tokens - 1),
                                       slo.tpot_ms);
}

bool meets_e2e(const RequestRecord& r, const SloTargets& slo) {
  return meets(static_cast<double>(r.completion - r.arrival), slo.e2e_ms);
}

LatencyStats stats_of(const LatencySketch& sketch) {
  const auto ms = [](double ns) { return ns / static_cast<double>(k_ns_per_ms); };
  LatencyStats stats;
  stats.count = sketch.count();
  stats.mean = ms(sketch.mean());
  stats.p50 = ms(sketch.quantile(0.50));
  stats.p90 = ms(sketch.quantile(0.90));
  stats.p95 = ms(sketch.quantile(0.95));
  stats.p99 = ms(sketch.quantile(0.99));
  stats.max = ms(static_cast<double>(sketch.max()));
  return stats;
}

double per_second(double amount, TimeNs span) {
  return span > 0 ? amount / to_seconds(span) : 0.0;
}

}  // namespace

bool meets_slo(const RequestRecord& request, const SloTargets& slo) {
  return meets_ttft(request, slo) && meets_tpot(request, slo) && meets_e2e(request, slo);
}

struct MetricsCollector::Impl {
  explicit Impl(MetricsOptions o)
      : options(std::move(o)),
        series(options.replicas, options.series_window, options.max_series_points) {
    if (!options.requests_csv_path.empty()) {
      csv = std::make_unique<traces::detail::AtomicOutputFile>(options.requests_csv_path);
      csv->write(metrics_detail::k_request_csv_header);
    }
  }

  MetricsOptions options;
  LatencySketch ttft, tpot, itl, e2e, queueing;
  std::int64_t requests = 0;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  TimeNs first_arrival = std::numeric_limits<TimeNs>::max();
  TimeNs last_completion = std::numeric_limits<TimeNs>::min();
  std::int64_t met_all = 0, met_ttft = 0, met_tpot = 0, met_e2e = 0;
  std::int64_t iterations = 0;
  std::int64_t preemptions = 0;
  std::int64_t recomputed_tokens = 0;
  RejectedRequests rejected;
  std::int64_t batched_sequences = 0;
  std::map<std::int64_t, std::int64_t> batch_sizes;
  metrics_detail::UsageSeries series;
  DepthSummary depth;
  // Tokens by exit depth, indexed by depth: a map lookup per generated token would cost more
  // than the rest of the token's bookkeeping.
  std::vector<std::int64_t> tokens_by_exit_depth;
  std::int64_t depth_tokens = 0;
  double exit_depth_sum = 0, executed_depth_sum = 0;
  std::unique_ptr<traces::detail::AtomicOutputFile> csv;
  std::string row;  // reused buffer for CSV rows
};

MetricsCollector::MetricsCollector(MetricsOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

MetricsCollector::~MetricsCollector() = default;

void MetricsCollector::record_token_gap(TimeNs gap, std::int64_t count) {
  if (gap < 0)
    invalid(fmt::format("negative inter-token gap {} ns", gap));
  impl_->itl.add(gap, count);
}

void MetricsCollector::record_request(const RequestRecord& request) {
  Impl& m = *impl_;
  check(request, m.options.replicas);
  const TimeNs ttft = request.first_token - request.arrival;
  const TimeNs e2e = request.completion - request.arrival;
  m.ttft.add(ttft);
  m.e2e.add(e2e);
  m.queueing.add(request.first_scheduled - request.arrival);
  const std::optional<TimeNs> tpot = metrics_detail::tpot_ns(request);
  if (tpot)
    m.tpot.add(*tpot);

  const bool ttft_ok = meets_ttft(request, m.options.slo);
  const bool tpot_ok = meets_tpot(request, m.options.slo);
  const bool e2e_ok = meets_e2e(request, m.options.slo);
  m.met_ttft += ttft_ok ? 1 : 0;
  m.met_tpot += tpot_ok ? 1 : 0;
  m.met_e2e += e2e_ok ? 1 : 0;
  m.met_all += ttft_ok && tpot_ok && e2e_ok ? 1 : 0;
  if (m.options.request_observer)
    m.options.request_observer(request);

  ++m.requests;
  m.input_tokens += request.input_tokens;
  m.output_tokens += request.output_tokens;
  m.first_arrival = std::min(m.first_arrival, request.arrival);
  m.last_completion = std::max(m.last_completion, request.completion);

  if (m.csv) {
    m.row.clear();
    metrics_detail::append_request_row(m.row, request);
    m.csv->write(m.row);
  }
}

void MetricsCollector::record_iteration(const IterationRecord& iteration) {
  if (iteration.sequences < 0)
    invalid(fmt::format("iteration with {} sequences", iteration.sequences));
  Impl& m = *impl_;
  m.series.add(iteration);  // validates the rest before anything is counted
  ++m.iterations;
  m.batched_sequences += iteration.sequences;
  ++m.batch_sizes[iteration.sequences];
}

void MetricsCollector::record_kv_usage(int replica, TimeNs time, std::int64_t used,
                                       std::int64_t total) {
  impl_->series.set_usage(replica, time, used, total);
}

void MetricsCollector::record_token_depth(int exit_depth, int executed_depth) {
  record_token_depths(exit_depth, executed_depth, 1);
}

void MetricsCollector::record_token_depths(int exit_depth, int executed_depth, std::int64_t count) {
  Impl& m = *impl_;
  const auto index = static_cast<std::size_t>(std::max(exit_depth, 0));
  if (index >= m.tokens_by_exit_depth.size())
    m.tokens_by_exit_depth.resize(index + 1, 0);
  m.tokens_by_exit_depth[index] += count;
  m.depth_tokens += count;
  // Integer-valued sums, exact in a double below 2^53: the same as `count` single additions.
  m.exit_depth_sum += static_cast<double>(exit_depth) * static_cast<double>(count);
  m.executed_depth_sum += static_cast<double>(executed_depth) * static_cast<double>(count);
}

void MetricsCollector::record_iteration_work(double flops, double masked_flops,
                                             const FillWork& fill) {
  Impl& m = *impl_;
  m.depth.executed_flops += flops;
  m.depth.masked_flops += masked_flops;
  m.depth.fill_token_passes += fill.joins;
  m.depth.fill_layers += fill.layers;
  m.depth.filled_states += fill.completed;
}

void MetricsCollector::record_rollback(std::int64_t tokens) {
  impl_->depth.rolled_back_tokens += tokens;
}

void MetricsCollector::record_preemption() {
  ++impl_->preemptions;
}

void MetricsCollector::record_recompute(std::int64_t tokens) {
  if (tokens < 0)
    invalid(fmt::format("recompute of {} tokens", tokens));
  impl_->recomputed_tokens += tokens;
}

void MetricsCollector::record_rejection(policy::UnservableReason reason) {
  ++impl_->rejected.count(reason);
}

MetricsSummary MetricsCollector::summarize() const {
  const Impl& m = *impl_;
  MetricsSummary s;
  s.slo = m.options.slo;
  s.requests = m.requests;
  s.output_tokens = m.output_tokens;
  s.input_tokens = m.input_tokens;
  if (m.requests > 0) {
    s.first_arrival = m.first_arrival;
    s.last_completion = m.last_completion;
    s.makespan = m.last_completion - m.first_arrival;
  }
  s.throughput_tokens_per_s = per_second(static_cast<double>(m.output_tokens), s.makespan);
  s.request_throughput_per_s = per_second(static_cast<double>(m.requests), s.makespan);
  s.goodput_requests_per_s = per_second(static_cast<double>(m.met_all), s.makespan);
  const auto fraction = [&](std::int64_t met) {
    return m.requests > 0 ? static_cast<double>(met) / static_cast<double>(m.requests) : 0.0;
  };
  s.slo_attainment = fraction(m.met_all);
  if (m.options.slo.ttft_ms)
    s.slo_attainment_by_metric["ttft"] = fraction(m.met_ttft);
  if (m.options.slo.tpot_ms)
    s.slo_attainment_by_metric["tpot"] = fraction(m.met_tpot);
  if (m.options.slo.e2e_ms)
    s.slo_attainment_by_metric["e2e"] = fraction(m.met_e2e);
  s.ttft = stats_of(m.ttft);
  s.tpot = stats_of(m.tpot);
  s.itl = stats_of(m.itl);
  s.e2e = stats_of(m.e2e);
  s.queueing = stats_of(m.queueing);
  s.percentile_relative_error = m.ttft.relative_error();
  s.iterations = m.iterations;
  s.preemptions = m.preemptions;
  s.recomputed_tokens = m.recomputed_tokens;
  s.rejected = m.rejected;
  s.batch_size_histogram = m.batch_sizes;
  s.depth = m.depth;
  for (std::size_t d = 0; d < m.tokens_by_exit_depth.size(); ++d) {
    if (m.tokens_by_exit_depth[d] > 0) {
      s.depth.exit_depth_tokens[static_cast<int>(d)] = m.tokens_by_exit_depth[d];
    }
  }
  if (m.depth_tokens > 0) {
    s.depth.mean_exit_depth = m.exit_depth_sum / static_cast<double>(m.depth_tokens);
    s.depth.mean_executed_depth = m.executed_depth_sum / static_cast<double>(m.depth_tokens);
  }
  s.mean_batch_size = m.iterations > 0 ? static_cast<double>(m.batched_sequences) /
                                             static_cast<double>(m.iterations)
                                       : 0.0;
  s.series = m.series.points();
  s.series_window = m.series.window();
  return s;
}

void MetricsCollector::finish() {
  if (impl_->csv)
    impl_->csv->finish();
}

}  // namespace exitsim::sim

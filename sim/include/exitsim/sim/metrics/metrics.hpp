#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exitsim/core/ids.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/policy/adaptive_threshold.hpp"
#include "exitsim/policy/servable.hpp"
#include "exitsim/policy/sync_strategy.hpp"

namespace exitsim::sim {

// Everything the simulator knows about one finished request (definitions in BRIEF.md).
struct RequestRecord {
  RequestId id;
  int replica = 0;
  TimeNs arrival = 0;
  TimeNs first_scheduled = 0;  // start of the first iteration that processed any of its tokens
  TimeNs first_token = 0;      // end of the iteration that emitted its first output token
  TimeNs completion = 0;       // end of the iteration that emitted its last output token
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  std::int64_t preemptions = 0;
};

// One executed iteration of one replica.
struct IterationRecord {
  int replica = 0;
  TimeNs start = 0;
  TimeNs duration = 0;
  std::int64_t sequences = 0;  // sequences in the batch
  std::int64_t prefill_tokens = 0;
  std::int64_t decode_tokens = 0;
  std::int64_t kv_blocks_used = 0;  // after this iteration's allocation
  std::int64_t kv_blocks_total = 0;
};

struct SloTargets {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2e_ms;
};

// Whether one finished request meets every target (TPOT compared unrounded; a one-token output
// has no TPOT and meets any TPOT target): what SLO attainment counts.
bool meets_slo(const RequestRecord& request, const SloTargets& slo);

struct MetricsOptions {
  SloTargets slo;
  int replicas = 1;
  std::string requests_csv_path;  // "" = no per-request CSV
  // Called with every finished request (the planner's steady-state test reads them all).
  std::function<void(const RequestRecord&)> request_observer;
  // Time-series resolution: windows start at this width and double whenever the series would
  // exceed max_series_points, so memory stays bounded on arbitrarily long runs.
  TimeNs series_window = k_ns_per_s;
  std::size_t max_series_points = 2048;
};

// Distribution summary of one latency metric, in milliseconds.
struct LatencyStats {
  std::int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};

struct SeriesPoint {
  TimeNs start = 0;
  double kv_usage = 0;     // mean fraction of KV blocks in use, over replicas and the window
  double utilization = 0;  // fraction of the window replicas spent executing iterations
};

// deferred_fill's work in one iteration (policy::DepthPlan's fills, summed).
struct FillWork {
  std::int64_t joins = 0;      // pending states that joined a deeper token
  std::int64_t layers = 0;     // token-layers they ran
  std::int64_t completed = 0;  // states that reached the top

  void add(const policy::DepthPlan& plan) {
    if (plan.fill_count == 0)
      return;
    const std::int64_t tokens = plan.fill_tokens();
    joins += tokens;
    layers += plan.fill_layers();
    completed += plan.fills_complete ? tokens : 0;
  }
};

// Where tokens exited and what the synchronization strategy spent on them.
struct DepthSummary {
  std::map<int, std::int64_t> exit_depth_tokens;  // exit depth (layers) -> output tokens
  double mean_exit_depth = 0;                     // per output token
  double mean_executed_depth = 0;  // layers the iteration carried each output token through
  double executed_flops = 0;       // all FLOPs of all iterations
  double masked_flops = 0;         // part of executed_flops whose results were discarded
  // deferred_fill: pending states that joined a deeper token (one pass each), the token-layers
  // they ran there, and the states whose K/V the fill completed (they reached the top).
  std::int64_t fill_token_passes = 0;
  std::int64_t fill_layers = 0;
  std::int64_t filled_states = 0;
  // deferred_fill with rollback: output tokens discarded because a filled shallow prediction
  // disagreed with the deep one (they are regenerated; tokens emitted counts them out).
  std::int64_t rolled_back_tokens = 0;

  friend bool operator==(const DepthSummary&, const DepthSummary&) = default;
};

// Requests the configuration cannot serve (policy::unservable_reason), rejected at arrival
// under scheduler.unservable: reject; they are in no latency or throughput figure.
struct RejectedRequests {
  std::int64_t prompt_over_batch_budget = 0;
  std::int64_t over_context_window = 0;
  std::int64_t over_kv_capacity = 0;

  std::int64_t total() const {
    return prompt_over_batch_budget + over_context_window + over_kv_capacity;
  }
  std::int64_t& count(policy::UnservableReason reason) {
    switch (reason) {
      case policy::UnservableReason::prompt_over_batch_budget:
        return prompt_over_batch_budget;
      case policy::UnservableReason::over_context_window:
        return over_context_window;
      case policy::UnservableReason::over_kv_capacity:
        break;
    }
    return over_kv_capacity;
  }
  std::int64_t count(policy::UnservableReason reason) const {
    return const_cast<RejectedRequests&>(*this).count(reason);  // the same field, read only
  }
  friend bool operator==(const RejectedRequests&, const RejectedRequests&) = default;
};

// What prefix caching did (scheduler.prefix_caching), over every replica.
struct PrefixCacheSummary {
  std::int64_t admitted_prompt_tokens = 0;  // prompts admitted (again after a preemption too)
  std::int64_t hit_tokens = 0;              // of those, read from cached blocks
  std::int64_t hashed_blocks = 0;           // their whole blocks a trace named
  std::int64_t hit_blocks = 0;
  std::int64_t evicted_blocks = 0;
  double prefill_flops_saved = 0;  // what the hit tokens' prefill would have executed

  double token_hit_rate() const {
    return admitted_prompt_tokens > 0
               ? static_cast<double>(hit_tokens) / static_cast<double>(admitted_prompt_tokens)
               : 0.0;
  }
  double block_hit_rate() const {
    return hashed_blocks > 0 ? static_cast<double>(hit_blocks) / static_cast<double>(hashed_blocks)
                             : 0.0;
  }
  void add(const PrefixCacheSummary& other) {
    admitted_prompt_tokens += other.admitted_prompt_tokens;
    hit_tokens += other.hit_tokens;
    hashed_blocks += other.hashed_blocks;
    hit_blocks += other.hit_blocks;
    evicted_blocks += other.evicted_blocks;
    prefill_flops_saved += other.prefill_flops_saved;
  }
  friend bool operator==(const PrefixCacheSummary&, const PrefixCacheSummary&) = default;
};

// What swap preemption moved (scheduler.preemption: swap), over every replica.
struct SwapSummary {
  std::int64_t swapped_out = 0;  // victims whose K/V went to host memory
  std::int64_t swapped_out_bytes = 0;
  std::int64_t swapped_in_bytes = 0;
  TimeNs transfer_time = 0;             // added to the iterations that moved them
  std::int64_t recomputed_instead = 0;  // victims the host's swap space could not take

  void add(const SwapSummary& other) {
    swapped_out += other.swapped_out;
    swapped_out_bytes += other.swapped_out_bytes;
    swapped_in_bytes += other.swapped_in_bytes;
    transfer_time += other.transfer_time;
    recomputed_instead += other.recomputed_instead;
  }
  friend bool operator==(const SwapSummary&, const SwapSummary&) = default;
};

// K/V moved from prefill to decode replicas (disaggregated serving).
struct TransferSummary {
  std::int64_t transfers = 0;
  std::int64_t bytes = 0;  // per GPU
  TimeNs total_time = 0;   // summed over transfers, latency and sharing included
  TimeNs longest = 0;
  std::int64_t most_concurrent = 0;  // on one prefill replica's link
  friend bool operator==(const TransferSummary&, const TransferSummary&) = default;
};

// One refit attempt of adaptive_threshold's estimator (threshold_trajectory.csv's row).
struct ThresholdTrajectoryRow {
  std::int64_t step = 0;  // the replica's step (1-based) at whose start it refit
  TimeNs time = 0;
  int replica = 0;
  int attempt = 0;         // 1-based per replica
  std::int64_t pairs = 0;  // calibration pairs it fitted on
  bool fitted = false;     // false: degenerate (one label, zero variance), threshold kept
  double threshold = 0;    // the threshold from then on
  double alpha0 = 0, beta0 = 0, alpha1 = 0, beta1 = 0;  // disagreeing (0), agreeing (1)
  friend bool operator==(const ThresholdTrajectoryRow&, const ThresholdTrajectoryRow&) = default;
};

// The row of the refit an estimator returned at the start of `step` (the engine's too: it is
// replica 0).
ThresholdTrajectoryRow trajectory_row(std::int64_t step, TimeNs time, int replica,
                                      const policy::ThresholdRefit& refit);

// exit_policy.kind: adaptive_threshold over the run, every replica's estimator together.
struct AdaptiveThresholdSummary {
  double initial_threshold = 0;
  std::int64_t pairs = 0;                          // calibration pairs collected
  std::vector<ThresholdTrajectoryRow> trajectory;  // by replica, then step

  std::int64_t refits() const { return static_cast<std::int64_t>(trajectory.size()); }
  std::int64_t degenerate_refits() const;
  // Over the initial threshold and every refit's: the first is the initial one.
  double last_threshold() const;
  double min_threshold() const;
  double max_threshold() const;
  friend bool operator==(const AdaptiveThresholdSummary&,
                         const AdaptiveThresholdSummary&) = default;
};

// threshold_trajectory.csv's header and rows (docs/outputs.md).
void write_threshold_trajectory(std::ostream& out, const AdaptiveThresholdSummary& summary);

struct MetricsSummary {
  std::int64_t requests = 0;  // served (finished) requests; rejected ones are counted apart
  std::int64_t output_tokens = 0;
  std::int64_t input_tokens = 0;
  TimeNs first_arrival = 0;
  TimeNs last_completion = 0;
  TimeNs makespan = 0;
  double throughput_tokens_per_s = 0;  // output tokens / makespan
  double request_throughput_per_s = 0;
  double goodput_requests_per_s = 0;  // requests meeting every SLO / makespan
  // The targets that attainment and goodput refer to. A request meets a target when its metric is
  // <= the target; a one-token output has no TPOT and meets any TPOT target; with no targets every
  // request meets "every SLO", so attainment is 1 and goodput equals request throughput.
  SloTargets slo;
  double slo_attainment = 0;  // fraction of requests meeting every SLO
  // Per configured target only: "ttft", "tpot", "e2e".
  std::map<std::string, double> slo_attainment_by_metric;
  LatencyStats ttft, tpot, itl, e2e, queueing;
  double percentile_relative_error = 0;  // bound of the sketch behind every percentile
  std::int64_t iterations = 0;
  std::int64_t preemptions = 0;  // record_preemption() calls
  // Wasted work of preemption by recompute: tokens whose K/V was discarded and computed again.
  std::int64_t recomputed_tokens = 0;
  RejectedRequests rejected;
  std::map<std::int64_t, std::int64_t> batch_size_histogram;  // sequences -> iterations
  double mean_batch_size = 0;
  std::vector<SeriesPoint> series;
  TimeNs series_window = 0;
  DepthSummary depth;
  std::optional<PrefixCacheSummary> prefix_cache;              // with scheduler.prefix_caching
  std::optional<SwapSummary> swap;                             // with scheduler.preemption: swap
  std::optional<TransferSummary> transfers;                    // with prefill-only replicas
  std::optional<AdaptiveThresholdSummary> adaptive_threshold;  // exit_policy adaptive_threshold
  // Every place where the run is not exactly the work the scenario asked for (a trace cut short,
  // requests rejected, prices extrapolated beyond a calibration, a timeline cut at its size cap),
  // one line each, in a fixed order; printed by format_summary and written to summary.json.
  std::vector<std::string> warnings;
};

// Collects metrics as the simulation runs, in memory bounded independently of the number of
// requests and tokens (latencies go into log-bucketed sketches; per-request rows stream to CSV).
class MetricsCollector {
 public:
  // Throws std::invalid_argument for options out of range (replicas < 1, series_window < 1,
  // max_series_points < 2) and InputError when the CSV's temporary file cannot be created.
  explicit MetricsCollector(MetricsOptions options);
  ~MetricsCollector();
  MetricsCollector(const MetricsCollector&) = delete;
  MetricsCollector& operator=(const MetricsCollector&) = delete;

  // Each record_* throws std::invalid_argument for an inconsistent record: times out of order, a
  // negative length or count, an unknown replica, an iteration overlapping the previous one of
  // its replica. record_request() writes the request's CSV row at once (rows in call order).
  void record_token_gap(TimeNs gap, std::int64_t count = 1);  // `count` inter-token latencies
  void record_request(const RequestRecord& request);
  void record_iteration(const IterationRecord& iteration);
  void record_preemption();
  // A preempted sequence's `tokens` computed tokens, discarded to be recomputed.
  void record_recompute(std::int64_t tokens);
  void record_rejection(policy::UnservableReason reason);
  // One output token that exited at `exit_depth` and was carried through `executed_depth` layers.
  void record_token_depth(int exit_depth, int executed_depth);
  // `count` tokens of the same depths at once (as many record_token_depth calls).
  void record_token_depths(int exit_depth, int executed_depth, std::int64_t count);
  // The work of one iteration, from the cost model.
  void record_iteration_work(double flops, double masked_flops, const FillWork& fill);
  void record_rollback(std::int64_t tokens);
  // KV blocks in use after an iteration completed (finished sequences freed theirs); `time` is
  // the end of that iteration.
  void record_kv_usage(int replica, TimeNs time, std::int64_t used, std::int64_t total);

  MetricsSummary summarize() const;
  // Completes the per-request CSV (renamed into place only now, so a failed run leaves none).
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The summary as pretty-printed JSON (stable key order) and as the readable stdout block.
std::string summary_to_json(const MetricsSummary& summary);
std::string format_summary(const MetricsSummary& summary);

}  // namespace exitsim::sim

#include <nlohmann/json.hpp>
#include <string>

#include "exitsim/core/version.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::sim {
namespace {

using Json = nlohmann::ordered_json;

Json latency_json(const LatencyStats& stats) {
  Json j;
  j["count"] = stats.count;
  j["mean"] = stats.mean;
  j["p50"] = stats.p50;
  j["p90"] = stats.p90;
  j["p95"] = stats.p95;
  j["p99"] = stats.p99;
  j["max"] = stats.max;
  return j;
}

Json target_json(const std::optional<double>& target) {
  return target ? Json(*target) : Json(nullptr);
}

}  // namespace

// Keys are inserted in a fixed order (ordered_json keeps it) and nlohmann prints each double as
// the shortest text that reads back to it, so equal summaries give equal bytes. Schema:
// docs/metrics.md.
std::string summary_to_json(const MetricsSummary& s) {
  Json j;
  j["schema"] = "exitsim-metrics v1";
  j["exitsim"] = {{"version", version()}, {"commit", commit()}};
  j["requests"] = s.requests;
  j["input_tokens"] = s.input_tokens;
  j["output_tokens"] = s.output_tokens;
  j["first_arrival_ns"] = s.first_arrival;
  j["last_completion_ns"] = s.last_completion;
  j["makespan_ns"] = s.makespan;
  j["makespan_s"] = to_seconds(s.makespan);
  j["throughput_tokens_per_s"] = s.throughput_tokens_per_s;
  j["request_throughput_per_s"] = s.request_throughput_per_s;
  j["goodput_requests_per_s"] = s.goodput_requests_per_s;

  Json slo;
  slo["ttft_ms"] = target_json(s.slo.ttft_ms);
  slo["tpot_ms"] = target_json(s.slo.tpot_ms);
  slo["e2e_ms"] = target_json(s.slo.e2e_ms);
  slo["attainment"] = s.slo_attainment;
  Json by_metric = Json::object();
  for (const char* metric : {"ttft", "tpot", "e2e"}) {
    if (const auto it = s.slo_attainment_by_metric.find(metric);
        it != s.slo_attainment_by_metric.end()) {
      by_metric[metric] = it->second;
    }
  }
  slo["attainment_by_metric"] = std::move(by_metric);
  j["slo"] = std::move(slo);

  j["ttft_ms"] = latency_json(s.ttft);
  j["tpot_ms"] = latency_json(s.tpot);
  j["itl_ms"] = latency_json(s.itl);
  j["e2e_ms"] = latency_json(s.e2e);
  j["queueing_ms"] = latency_json(s.queueing);
  j["percentile_relative_error"] = s.percentile_relative_error;

  j["iterations"] = s.iterations;
  j["preemptions"] = s.preemptions;
  j["recomputed_tokens"] = s.recomputed_tokens;
  if (const auto& t = s.transfers) {
    Json transfers;
    transfers["transfers"] = t->transfers;
    transfers["bytes_per_gpu"] = t->bytes;
    transfers["total_time_ms"] = to_milliseconds(t->total_time);
    transfers["longest_ms"] = to_milliseconds(t->longest);
    transfers["most_concurrent"] = t->most_concurrent;
    j["kv_transfers"] = std::move(transfers);
  }
  if (const auto& w = s.swap) {
    Json swap;
    swap["swapped_out"] = w->swapped_out;
    swap["swapped_out_bytes"] = w->swapped_out_bytes;
    swap["swapped_in_bytes"] = w->swapped_in_bytes;
    swap["transfer_time_ms"] = to_milliseconds(w->transfer_time);
    swap["recomputed_instead"] = w->recomputed_instead;
    j["swap"] = std::move(swap);
  }
  if (const auto& a = s.adaptive_threshold) {
    Json adaptive;
    adaptive["pairs"] = a->pairs;
    adaptive["refits"] = a->refits();
    adaptive["degenerate_refits"] = a->degenerate_refits();
    adaptive["initial_threshold"] = a->initial_threshold;
    adaptive["last_threshold"] = a->last_threshold();
    adaptive["min_threshold"] = a->min_threshold();
    adaptive["max_threshold"] = a->max_threshold();
    // The threshold over the run for the report's chart; every column is in
    // threshold_trajectory.csv.
    Json trajectory = Json::array();
    for (const ThresholdTrajectoryRow& row : a->trajectory) {
      trajectory.push_back({{"time_s", to_seconds(row.time)},
                            {"replica", row.replica},
                            {"fitted", row.fitted},
                            {"threshold", row.threshold}});
    }
    adaptive["trajectory"] = std::move(trajectory);
    j["adaptive_threshold"] = std::move(adaptive);
  }
  if (const auto& p = s.prefix_cache) {
    Json prefix;
    prefix["admitted_prompt_tokens"] = p->admitted_prompt_tokens;
    prefix["hit_tokens"] = p->hit_tokens;
    prefix["token_hit_rate"] = p->token_hit_rate();
    prefix["hashed_blocks"] = p->hashed_blocks;
    prefix["hit_blocks"] = p->hit_blocks;
    prefix["block_hit_rate"] = p->block_hit_rate();
    prefix["prefill_flops_saved"] = p->prefill_flops_saved;
    prefix["evicted_blocks"] = p->evicted_blocks;
    j["prefix_cache"] = std::move(prefix);
  }
  Json rejected;
  rejected["total"] = s.rejected.total();
  for (const policy::UnservableReason reason : policy::k_unservable_reasons)
    rejected[std::string(policy::to_string(reason))] = s.rejected.count(reason);
  j["rejected_requests"] = std::move(rejected);
  j["mean_batch_size"] = s.mean_batch_size;
  Json histogram = Json::object();
  for (const auto& [sequences, iterations] : s.batch_size_histogram)
    histogram[std::to_string(sequences)] = iterations;
  j["batch_size_histogram"] = std::move(histogram);

  Json depth;
  depth["mean_exit_depth"] = s.depth.mean_exit_depth;
  depth["mean_executed_depth"] = s.depth.mean_executed_depth;
  Json exits = Json::object();
  for (const auto& [layers, tokens] : s.depth.exit_depth_tokens)
    exits[std::to_string(layers)] = tokens;
  depth["exit_depth_tokens"] = std::move(exits);
  depth["executed_flops"] = s.depth.executed_flops;
  depth["masked_flops"] = s.depth.masked_flops;
  depth["fill_token_passes"] = s.depth.fill_token_passes;
  depth["fill_layers"] = s.depth.fill_layers;
  depth["filled_states"] = s.depth.filled_states;
  depth["rolled_back_tokens"] = s.depth.rolled_back_tokens;
  j["depth"] = std::move(depth);

  Json series;
  series["window_ns"] = s.series_window;
  Json points = Json::array();
  for (const SeriesPoint& point : s.series) {
    Json p;
    p["start_ns"] = point.start;
    p["kv_usage"] = point.kv_usage;
    p["utilization"] = point.utilization;
    points.push_back(std::move(p));
  }
  series["points"] = std::move(points);
  j["series"] = std::move(series);
  j["warnings"] = s.warnings;
  return j.dump(2) + "\n";
}

}  // namespace exitsim::sim
